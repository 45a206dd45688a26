"""AXI4-Stream top for a NIC engine: the standard port names an FPGA NIC shell (and
cocotbext-axi) expects."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiStreamTop"]


class AxiStreamTop(wiring.Component):
    """Wrap an engine with streams ``i``/``o`` of ``hw.nic.layouts.beat_layout`` in
    ``s_axis_*`` (input) and ``m_axis_*`` (output) ports: ``tdata``, ``tkeep``, ``tlast``,
    ``tvalid``, ``tready``. The engine's other ports keep their names.

    Latency and throughput: the engine's (the top adds no logic).

    Parameters
    ----------
    engine : wiring.Component
    """

    def __init__(self, engine):
        self._engine = engine
        nbytes = len(engine.i.payload.keep)
        members = {}
        for prefix, direction, flipped in (("s_axis", In, Out), ("m_axis", Out, In)):
            members.update({f"{prefix}_tdata": direction(8 * nbytes),
                            f"{prefix}_tkeep": direction(nbytes),
                            f"{prefix}_tlast": direction(1),
                            f"{prefix}_tvalid": direction(1),
                            f"{prefix}_tready": flipped(1)})
        for name, member in engine.signature.members.items():
            if name not in ("i", "o"):
                members[name] = member
        super().__init__(members)

    engine = property(lambda self: self._engine, doc="The wrapped engine.")
    latency = property(lambda self: self._engine.latency, doc="The engine's latency.")

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = engine = self._engine
        m.d.comb += [
            engine.i.payload.data.eq(self.s_axis_tdata),
            engine.i.payload.keep.eq(self.s_axis_tkeep),
            engine.i.payload.last.eq(self.s_axis_tlast),
            engine.i.valid.eq(self.s_axis_tvalid),
            self.s_axis_tready.eq(engine.i.ready),
            self.m_axis_tdata.eq(engine.o.payload.data),
            self.m_axis_tkeep.eq(engine.o.payload.keep),
            self.m_axis_tlast.eq(engine.o.payload.last),
            self.m_axis_tvalid.eq(engine.o.valid),
            engine.o.ready.eq(self.m_axis_tready),
        ]
        for name, member in engine.signature.members.items():
            if name in ("i", "o"):
                continue
            if member.flow == In:
                m.d.comb += getattr(engine, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(engine, name))
        return m
