"""AXI4-Stream top for a NIC engine: the standard port names an FPGA NIC shell (and
cocotbext-axi) expects."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiStreamTop", "axis_ports", "connect_axis"]


def axis_ports(nbytes, source="s_axis", sink="m_axis", user=False):
    """Signature members of an AXI4-Stream input ``source_*`` and output ``sink_*`` of
    ``nbytes`` bytes: ``tdata``, ``tkeep``, ``tlast``, ``tvalid``, ``tready``, and with
    ``user`` a 1-bit ``tuser``."""
    fields = {"data": 8 * nbytes, "keep": nbytes, "last": 1, **({"user": 1} if user else {})}
    members = {}
    for prefix, direction, flipped in ((source, In, Out), (sink, Out, In)):
        members.update({f"{prefix}_t{name}": direction(width)
                        for name, width in fields.items()})
        members.update({f"{prefix}_tvalid": direction(1), f"{prefix}_tready": flipped(1)})
    return members


def connect_axis(m, engine, top, source="s_axis", sink="m_axis"):
    """Wire ``engine``'s streams ``i``/``o`` to ``top``'s ports of ``axis_ports``: each
    field of the payload to its ``t`` port (``data`` to ``tdata``...)."""
    def port(prefix, name):
        return getattr(top, f"{prefix}_{name}")
    for name in engine.i.payload.shape().members:
        m.d.comb += [getattr(engine.i.payload, name).eq(port(source, f"t{name}")),
                     port(sink, f"t{name}").eq(getattr(engine.o.payload, name))]
    m.d.comb += [engine.i.valid.eq(port(source, "tvalid")),
                 port(source, "tready").eq(engine.i.ready),
                 port(sink, "tvalid").eq(engine.o.valid),
                 engine.o.ready.eq(port(sink, "tready"))]


class AxiStreamTop(wiring.Component):
    """Wrap an engine with streams ``i``/``o`` of ``codnn.hw.nic.layouts.beat_layout``
    (or ``frame_beat_layout``) in ``s_axis_*`` (input) and ``m_axis_*`` (output) ports:
    ``tdata``, ``tkeep``, ``tlast``, (``tuser``), ``tvalid``, ``tready``. The engine's other
    ports keep their names.

    Latency and throughput: the engine's (the top adds no logic).

    Parameters
    ----------
    engine : wiring.Component
    """

    def __init__(self, engine):
        self._engine = engine
        members = axis_ports(len(engine.i.payload.keep),
                             user="user" in engine.i.payload.shape().members)
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
