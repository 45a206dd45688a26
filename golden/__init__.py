"""NumPy reference semantics of codnn (docs/semantics.md): what the gateware must equal,
bit for bit.

Nothing here imports Amaranth, cocotb or touches files: every function takes and returns
arrays or bytes. Installed as ``codnn.golden`` (the folder ``golden/``).
"""
