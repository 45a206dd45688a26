"""AXI4-Stream top for a NIC engine: the standard port names an FPGA NIC shell (and
cocotbext-axi) expects."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiStreamTop", "axis_ports", "connect_axis"]


def axis_ports(nbytes, source="s_axis", sink="m_axis"):
    """Signature members of an AXI4-Stream input ``source_*`` and output ``sink_*`` of
    ``nbytes`` bytes: ``tdata``, ``tkeep``, ``tlast``, ``tvalid``, ``tready``."""
    members = {}
    for prefix, direction, flipped in ((source, In, Out), (sink, Out, In)):
        members.update({f"{prefix}_tdata": direction(8 * nbytes),
                        f"{prefix}_tkeep": direction(nbytes),
                        f"{prefix}_tlast": direction(1),
                        f"{prefix}_tvalid": direction(1),
                        f"{prefix}_tready": flipped(1)})
    return members


def connect_axis(m, engine, top, source="s_axis", sink="m_axis"):
    """Wire ``engine``'s streams ``i``/``o`` to ``top``'s ports of ``axis_ports``."""
    def port(prefix, name):
        return getattr(top, f"{prefix}_{name}")
    m.d.comb += [
        engine.i.payload.data.eq(port(source, "tdata")),
        engine.i.payload.keep.eq(port(source, "tkeep")),
        engine.i.payload.last.eq(port(source, "tlast")),
        engine.i.valid.eq(port(source, "tvalid")),
        port(source, "tready").eq(engine.i.ready),
        port(sink, "tdata").eq(engine.o.payload.data),
        port(sink, "tkeep").eq(engine.o.payload.keep),
        port(sink, "tlast").eq(engine.o.payload.last),
        port(sink, "tvalid").eq(engine.o.valid),
        engine.o.ready.eq(port(sink, "tready")),
    ]


class AxiStreamTop(wiring.Component):
    """Wrap an engine with streams ``i``/``o`` of ``codnn.hw.nic.layouts.beat_layout`` in
    ``s_axis_*`` (input) and ``m_axis_*`` (output) ports: ``tdata``, ``tkeep``, ``tlast``,
    ``tvalid``, ``tready``. The engine's other ports keep their names.

    Latency and throughput: the engine's (the top adds no logic).

    Parameters
    ----------
    engine : wiring.Component
    """

    def __init__(self, engine):
        self._engine = engine
        members = axis_ports(len(engine.i.payload.keep))
        for name, member in engine.signature.members.items():
            if name not in ("i", "o"):
                members[name] = member
        super().__init__(members)

    engine = property(lambda self: self._engine, doc="The wrapped engine.")
    latency = property(lambda self: self._engine.latency, doc="The engine's latency.")

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = engine = self._engine
        connect_axis(m, engine, self)
        for name, member in engine.signature.members.items():
            if name in ("i", "o"):
                continue
            if member.flow == In:
                m.d.comb += getattr(engine, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(engine, name))
        return m
