"""Formal properties of the engines (``codnn prove``, docs/formal.md): the stream rules
every stream keeps, beats conserved and in order, latency bounded, and the designs wrapped
with them for ``codnn.sim.formal.run_proof``."""
