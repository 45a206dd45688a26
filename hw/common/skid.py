"""An output register with a spare beat, so that a producer's go-ahead is a register."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidOutput"]


class SkidOutput(wiring.Component):
    """A stream output driven from registers: ``o.valid`` and ``o.payload`` are the main
    register, and a beat written while ``o`` is held goes to a spare register.

    The producer writes a beat by driving ``write`` and ``payload`` (comb) while ``free``
    is high. ``free`` is a register (the spare is empty), so ``o.ready`` reaches only the
    two registers' enables, never the producer's logic, and ``write`` reaches neither
    wide enable; ``free_next`` is what ``free`` will be in the next cycle, for a producer
    that registers its decision a cycle ahead. The producer connects ``o`` to its own
    output (``wiring.connect(m, skid.o, wiring.flipped(self.o))``).

    Latency: a written beat is on ``o`` the next cycle (or as soon as the spare's beat has
    gone). Throughput: one beat per cycle while ``o.ready`` stays high; after a cycle of
    backpressure, one cycle with ``free`` low.

    Parameters
    ----------
    payload_shape : shape-like
        The shape of ``o.payload``.

    Attributes
    ----------
    write : In(1)
    payload : In(payload_shape)
    free, free_next : Out(1)
    o : Out(stream.Signature(payload_shape))
    """

    def __init__(self, payload_shape):
        super().__init__({"write": In(1), "payload": In(payload_shape),
                          "free": Out(1), "free_next": Out(1),
                          "o": Out(stream.Signature(payload_shape))})

    @classmethod
    def driving(cls, m, o, name="out"):
        """A ``SkidOutput`` added to module ``m`` as submodule ``name`` that drives the
        producer's output stream ``o`` (an ``Out`` port of the producer)."""
        skid = cls(o.signature.members["payload"].shape)
        m.submodules[name] = skid
        wiring.connect(m, skid.o, wiring.flipped(o))
        return skid

    def elaborate(self, platform):
        m = Module()
        o = self.o
        spare = Signal.like(o.payload, name="spare_beat")
        spare_valid = Signal()
        m.d.comb += [self.free.eq(~spare_valid),
                     self.free_next.eq(~(o.valid & ~o.ready & (spare_valid | self.write)))]
        with m.If(~o.valid | o.ready):
            with m.If(spare_valid):
                m.d.sync += [o.payload.eq(spare), spare_valid.eq(0)]
            with m.Else():
                m.d.sync += [o.payload.eq(self.payload), o.valid.eq(self.write)]
        with m.Else():
            # The empty spare loads whatever is offered, so its wide enable is registers
            # and ``o.ready`` only; ``write`` decides whether that becomes a beat.
            with m.If(spare_valid == 0):
                m.d.sync += spare.eq(self.payload)
            with m.If(self.write):
                m.d.sync += spare_valid.eq(1)
        return m
