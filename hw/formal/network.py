"""Proofs of the network engine's parts: the on-chip and the AXI4 weight readers."""

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Module, Signal
from amaranth.utils import ceil_log2

from codnn.hw.formal.environment import FlatStream, stream_engine_top
from codnn.hw.formal.streams import stream_rules
from codnn.hw.network.weights import AxiWeights, OnChipWeights

__all__ = ["onchip_weights_top", "axi_weights_top"]


def onchip_weights_top(word_bits, words):
    """The network engine's on-chip weight reader (``codnn.hw.network.OnChipWeights``)
    under ``stream_engine_top``'s environment, with the rules the engine keeps: a run
    starts (``start``, a count of 1 or more, as documented) only while ``o`` offers no
    word, and the memory is written only then too, not in a run's first cycle; the same
    for the ``aside`` run. Property: ``o`` and ``aside.o`` keep the stream rules."""
    dut = OnChipWeights(word_bits=word_bits, words=words, aside=True)
    m = stream_engine_top(dut)
    aside = dut.aside
    m.d.comb += [aside.start.eq(AnySeq(1)), aside.addr.eq(AnySeq(len(aside.addr))),
                 aside.count.eq(AnySeq(len(aside.count))), aside.o.ready.eq(AnySeq(1))]
    stream_rules(m, aside.o, "aside_o")
    for run in (dut, aside):
        m.d.comb += [Assume(~run.start | ~run.o.valid),
                     Assume(~dut.write.en | ~(run.o.valid | run.start))]
        with m.If(run.start):
            m.d.comb += Assume(run.count != 0)
    return m


def axi_weights_top(word_bits):
    """The network engine's AXI4 weight reader (``codnn.hw.network.AxiWeights``): a run
    of any count from any word at any cycle, but only once the previous run's bursts have
    all been asked for (``arvalid`` low, as the engine keeps it), ``clear`` at any cycle
    but a start's while ``o`` offers no word (a clear withdraws the word on offer: the
    engine clears only between runs, when its sequencer takes none), ``base`` any
    constant aligned to a word, its memory keeping AXI4's rule on the read data channel (``rvalid``
    held with its data until ``rready``) and ready at random, ``o``'s sink at random, a
    reset at any cycle. Properties: the read address channel keeps AXI4's rule
    (``arvalid`` held with the same address and length until ``arready``), every burst
    is aligned to a word and stays inside its 4 KB page (AXI4 forbids crossing one), and
    ``o`` keeps the stream rules."""
    dut = AxiWeights(word_bits=word_bits)
    m = Module()
    m.submodules.dut = dut
    axi = dut.axi
    base = AnyConst(32)
    m.d.comb += [dut.start.eq(AnySeq(1)), dut.addr.eq(AnySeq(len(dut.addr))),
                 dut.count.eq(AnySeq(len(dut.count))), dut.base.eq(base),
                 Assume(base[:ceil_log2(dut.stride)] == 0),
                 Assume(~dut.start | ~axi.arvalid), dut.clear.eq(AnySeq(1)),
                 Assume(~dut.clear | ~(dut.start | dut.o.valid)),
                 axi.arready.eq(AnySeq(1)), axi.rvalid.eq(AnySeq(1)),
                 axi.rdata.eq(AnySeq(len(axi.rdata))), axi.rresp.eq(AnySeq(2)),
                 axi.rlast.eq(AnySeq(1)), axi.rid.eq(0), dut.o.ready.eq(AnySeq(1))]
    read_data = FlatStream(axi.rvalid, axi.rready, Cat(axi.rdata, axi.rresp, axi.rlast),
                           True, [], [])
    address = FlatStream(axi.arvalid, axi.arready,
                         Cat(axi.araddr, axi.arlen, axi.arsize, axi.arburst, axi.arid),
                         False, [], [])
    stream_rules(m, read_data, "r", assume=True)
    stream_rules(m, address, "ar")
    stream_rules(m, dut.o, "o")
    end = Signal(14, name="burst_end")             # one past the burst's last byte in page
    m.d.comb += end.eq(axi.araddr[:12] + (axi.arlen + 1) * dut.stride)
    with m.If(axi.arvalid):
        m.d.comb += [Assert(end <= 4096),
                     Assert(axi.araddr[:ceil_log2(dut.stride)] == 0)]
    return m
