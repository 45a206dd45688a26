"""The designs ``codnn prove`` checks: each engine wrapped with its environment (inputs
from ``AnySeq`` / ``AnyConst``, the environment's stream rules assumed) and its
properties (docs/formal.md). ``PROOFS`` maps a name to a ``ProofSpec``."""

from dataclasses import dataclass

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Module, Shape, Signal, unsigned
from amaranth.lib import stream
from amaranth.lib.wiring import Flow

from codnn.hw.common.fmix32 import Fmix32Unit
from codnn.hw.common.skid import SkidOutput
from codnn.hw.formal.streams import Tracker, beats, no_reset, stream_rules
from codnn.hw.nic.registry import ENGINES as NIC_ENGINES

__all__ = ["ProofSpec", "PROOFS", "skid_top", "fmix32_top", "stream_engine_top"]


@dataclass(frozen=True)
class ProofSpec:
    """A design with properties: ``build(**params)`` gives the top module; ``params``
    their defaults; ``mode`` and ``depth`` what shows them (k-induction closes at that
    depth); ``properties`` says what is asserted, in words."""

    build: object
    params: dict
    mode: str
    depth: int
    properties: tuple


def _in_flight(m, i, o, name, width=4):
    """Beats taken by ``i`` and not yet given by ``o``."""
    count = Signal(width, name=f"{name}_in_flight")
    m.d.sync += count.eq(count + (i.valid & i.ready) - (o.valid & o.ready))
    return count


def skid_top(width=8, order=False, dut_class=SkidOutput):
    """``hw.common.SkidOutput`` with a producer that writes any beat while ``free`` and an
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
    in_flight = _in_flight(m, written, dut.o, "skid")
    m.d.comb += [Assert(in_flight == dut.o.valid + ~dut.free),
                 Assert(dut.o.valid | dut.free)]
    return m


def fmix32_top(latency_only=False):
    """``hw.common.Fmix32Unit`` (one lane) between a source that keeps the stream rules
    and a sink ready at random; with ``latency_only`` the sink is always ready and the
    property is the latency: a beat taken now is on ``o`` exactly 5 cycles later."""
    m = Module()
    no_reset(m)
    m.submodules.dut = dut = Fmix32Unit(lanes=1)
    m.d.comb += [dut.i.valid.eq(AnySeq(1)), dut.i.payload.eq(AnySeq(32))]
    stream_rules(m, dut.i, "i", assume=True)
    if latency_only:
        m.d.comb += dut.o.ready.eq(1)
        taken = [Signal(name=f"taken_{k}") for k in range(dut.latency)]
        m.d.sync += taken[0].eq(dut.i.valid & dut.i.ready)
        m.d.sync += [taken[k].eq(taken[k - 1]) for k in range(1, dut.latency)]
        m.d.comb += [Assert(dut.o.valid == taken[-1]), Assert(dut.i.ready)]
        return m
    m.d.comb += dut.o.ready.eq(AnySeq(1))
    stream_rules(m, dut.o, "o")
    in_flight = _in_flight(m, dut.i, dut.o, "fmix32")
    m.d.comb += Assert(in_flight <= dut.latency)
    out = beats(m, dut.o, "o")
    went = beats(m, dut.i, "i")
    m.d.comb += Assert(out <= went)
    return m


def stream_engine_top(dut):
    """A NIC engine (``hw.nic.layouts.StreamEngine``) under any environment: its input
    stream from a source that keeps the stream rules (any beats, any messages, good or
    bad), its settings changing at any cycle, its output's sink ready at random. The
    property: its output keeps the stream rules."""
    m = Module()
    no_reset(m)
    m.submodules.dut = dut
    m.d.comb += [dut.i.valid.eq(AnySeq(1)),
                 dut.i.payload.eq(AnySeq(Shape.cast(dut.i.payload.shape()).width)),
                 dut.o.ready.eq(AnySeq(1))]
    for name, member in dut.PORTS.items():
        if member.flow == Flow.In:
            m.d.comb += getattr(dut, name).eq(AnySeq(Shape.cast(member.shape).width))
    stream_rules(m, dut.i, "i", assume=True)
    stream_rules(m, dut.o, "o")
    return m


def _nic_proof(name):
    engine = NIC_ENGINES[name]
    return ProofSpec(lambda lanes=1: stream_engine_top(engine.component(lanes=lanes)),
                     {"lanes": 1}, "prove", 3, (
                         f"the {name}'s output keeps the stream rules whatever its input "
                         "(any messages, bad ones too), its settings and its sink do",))


PROOFS = {
    "skid": ProofSpec(skid_top, {"width": 8}, "prove", 4, (
        "o keeps the stream rules (a beat held stays, unchanged)",
        "the beats held (o.valid, and the spare while free is low) are the beats written "
        "and not yet given; the spare holds one only behind o")),
    "skid_order": ProofSpec(lambda width=8: skid_top(width, order=True), {"width": 8},
                            "bmc", 12, (
        "the k-th beat out is the k-th beat written (any k < 16): no loss, reorder or "
        "copy",)),
    "fmix32": ProofSpec(fmix32_top, {}, "bmc", 12, (
        "o keeps the stream rules whatever the sink does",
        "at most 5 beats in flight; never more beats out than in")),
    "fmix32_latency": ProofSpec(lambda: fmix32_top(latency_only=True), {}, "prove", 8, (
        "with the sink always ready: i always ready, and each beat out exactly 5 cycles "
        "after it went in",)),
    **{name: _nic_proof(name) for name in NIC_ENGINES},
}
