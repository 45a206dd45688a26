"""Proofs of the shared units (``codnn.hw.common``): the skid buffer and the fmix32
hash."""

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Module, Signal, unsigned
from amaranth.lib import stream

from codnn.hw.common.fmix32 import Fmix32Unit
from codnn.hw.common.skid import SkidOutput
from codnn.hw.formal.environment import stream_engine_top
from codnn.hw.formal.streams import Tracker, beats, in_flight, no_reset, stream_rules

__all__ = ["skid_top", "fmix32_top"]


def skid_top(width=8, order=False, dut_class=SkidOutput):
    """``codnn.hw.common.SkidOutput`` with a producer that writes any beat while ``free`` and an
    output ready at random: the stream rules on ``o`` and the beats held (``o.valid``
    plus the spare, which ``free`` shows) equal to those written and not yet given; with
    ``order``, the tracked beat instead. ``dut_class`` lets the tests put a broken skid
    in its place."""
    m = Module()
    no_reset(m)
    m.submodules.dut = dut = dut_class(unsigned(width))
    m.d.comb += [dut.write.eq(AnySeq(1)), dut.payload.eq(AnySeq(width)),
                 dut.o.ready.eq(AnySeq(1))]
    m.d.comb += Assume(~dut.write | dut.free)              # the producer's rule
    written = stream.Signature(unsigned(width)).create(path=("written",))
    m.d.comb += [written.valid.eq(dut.write), written.ready.eq(dut.free),
                 written.payload.eq(dut.payload)]
    if order:
        tracked = Tracker(m, written, dut.o, AnyConst(4))
        with m.If(tracked.at_out):
            m.d.comb += Assert(tracked.seen_in & (dut.o.payload == tracked.payload))
        return m
    stream_rules(m, dut.o, "o")
    flying = in_flight(m, written, dut.o, "skid")
    m.d.comb += [Assert(flying == dut.o.valid + ~dut.free),
                 Assert(dut.o.valid | dut.free)]
    return m


def fmix32_top(latency_only=False):
    """``codnn.hw.common.Fmix32Unit`` (one lane) under ``stream_engine_top``'s environment, and
    its counts: at most ``latency`` beats in flight, never more out than in; with
    ``latency_only`` the sink is always ready and the property is the latency: a beat
    taken now is on ``o`` exactly 5 cycles later, and ``i`` is always ready."""
    dut = Fmix32Unit(lanes=1)
    m = stream_engine_top(dut)
    if latency_only:
        m.d.comb += Assume(dut.o.ready)
        taken = [Signal(name=f"taken_{k}") for k in range(dut.latency)]
        m.d.sync += taken[0].eq(dut.i.valid & dut.i.ready)
        m.d.sync += [taken[k].eq(taken[k - 1]) for k in range(1, dut.latency)]
        m.d.comb += [Assert(dut.o.valid == taken[-1]), Assert(dut.i.ready)]
        return m
    flying = in_flight(m, dut.i, dut.o, "fmix32")
    m.d.comb += Assert(flying <= dut.latency)
    m.d.comb += Assert(beats(m, dut.o, "o") <= beats(m, dut.i, "i"))
    return m
