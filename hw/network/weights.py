"""Where the network engine reads its weight image from: on-chip memory, or external memory
through an AXI4 read port. Both stream a run of consecutive words on request."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from codnn.golden.network_program import word_stride

__all__ = ["AxiWeights", "OnChipWeights", "axi_read_signature", "burst_words"]

#: Words a read request may ask for.
MAX_RUN = (1 << 16) - 1
#: Beats of an AXI4 INCR burst at most.
MAX_BURST = 256


def axi_read_signature(data_bits, addr_bits=32):
    """An AXI4 read address and read data channel, master's view (IDs of one bit, tied
    to 0)."""
    return wiring.Signature({
        "arid": Out(1), "araddr": Out(addr_bits), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
        "rid": In(1), "rdata": In(data_bits), "rresp": In(2), "rlast": In(1),
        "rvalid": In(1), "rready": Out(1)})


def burst_words(address, left, stride):
    """Words of the next AXI4 INCR burst from byte ``address`` with ``left`` words to go,
    ``stride`` bytes a word: at most ``MAX_BURST``, none past the address's 4 KB page."""
    if stride < 4096:                   # the words left in the address's 4 KB page
        in_page = (4096 - address[:12]) >> ceil_log2(stride)
    else:
        in_page = 1
    room = Mux(in_page < MAX_BURST, in_page, MAX_BURST)
    return Mux(left < room, left, room)


class _Reader(wiring.Component):
    """The request side both readers share: ``start`` (a pulse) with ``addr`` (a word)
    and ``count`` (1..``MAX_RUN`` words) begins a run; its words leave on ``o`` in order.
    ``bytes_read`` counts the bytes the memory moved since reset."""

    def __init__(self, word_bits, words, extra):
        self.word_bits = word_bits
        super().__init__({"start": In(1), "addr": In(range(words)),
                          "count": In(range(MAX_RUN + 1)),
                          "o": Out(stream.Signature(word_bits)),
                          "bytes_read": Out(32), **extra})


class OnChipWeights(_Reader):
    """The weight image in on-chip memory (``words`` words of ``word_bits``), written
    through ``write`` (address, data, enable).

    Latency: a run's first word is on ``o`` the cycle after ``start``; then a word a cycle
    while ``o`` is taken."""

    def __init__(self, *, word_bits, words):
        super().__init__(word_bits, words, {"write": In(data.StructLayout({
            "addr": range(words), "data": word_bits, "en": 1}))})
        self.words = words

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = mem = memory.Memory(shape=self.word_bits, depth=self.words,
                                                  init=[])
        write, read = mem.write_port(), mem.read_port(transparent_for=())
        m.d.comb += [write.addr.eq(self.write.addr), write.data.eq(self.write.data),
                     write.en.eq(self.write.en)]
        following = Signal(range(self.words + 1))       # the next word to read
        left = Signal(range(MAX_RUN + 1))               # words of the run not yet read
        valid = Signal()
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(read.data)]
        with m.If(self.start):
            m.d.comb += read.addr.eq(self.addr)
            m.d.sync += [following.eq(self.addr + 1), left.eq(self.count - 1),
                         valid.eq(self.count != 0)]
        with m.Elif(~valid | self.o.ready):
            m.d.comb += read.addr.eq(following)
            m.d.sync += valid.eq(left != 0)
            with m.If(left != 0):
                m.d.sync += [following.eq(following + 1), left.eq(left - 1)]
        with m.Else():
            m.d.comb += read.addr.eq(following - 1)     # hold the word on offer
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.bytes_read.eq(self.bytes_read + self.word_bits // 8)
        return m


class AxiWeights(_Reader):
    """The weight image in external memory behind an AXI4 read port (``axi``: a bus of
    ``word_stride`` bytes; word ``k`` at byte ``base + k * word_stride``; ``base`` aligned
    to the stride): a run goes out as INCR bursts of at most 256 beats that do not cross a
    4 KB page, the
    next burst's address as soon as the last one's is taken, and the read data go to
    ``o`` as they come (``rready`` is ``o.ready``). ``error`` is high with a word whose
    response is not OKAY.

    Latency: the address the cycle after ``start``, the first word the memory's latency
    after that; then a word a cycle while the memory and ``o`` keep up."""

    def __init__(self, *, word_bits, words=1 << 24):
        self.stride = word_stride(word_bits // 8)
        super().__init__(word_bits, words, {
            "base": In(32), "error": Out(1),
            "axi": Out(axi_read_signature(8 * self.stride))})
        self.words = words

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        following = Signal(32)              # the next word to ask for
        left = Signal(range(MAX_RUN + 1))   # words of the run not asked for yet
        address = Signal(32)
        m.d.comb += address.eq(self.base + following * self.stride)
        burst = Signal(range(MAX_BURST + 1))    # words this burst takes
        m.d.comb += burst.eq(burst_words(address, left, self.stride))
        m.d.comb += [axi.arid.eq(0), axi.arsize.eq(ceil_log2(self.stride)), axi.arburst.eq(1),
                     axi.araddr.eq(address),
                     axi.arlen.eq(burst - 1), axi.arvalid.eq(left != 0)]
        with m.If(self.start):
            m.d.sync += [following.eq(self.addr), left.eq(self.count)]
        with m.Elif(axi.arvalid & axi.arready):
            m.d.sync += [following.eq(following + burst), left.eq(left - burst)]
        m.d.comb += [self.o.valid.eq(axi.rvalid), self.o.payload.eq(axi.rdata),
                     axi.rready.eq(self.o.ready)]
        m.d.comb += self.error.eq(axi.rvalid & axi.rready & (axi.rresp != 0))
        with m.If(axi.rvalid & axi.rready):
            m.d.sync += self.bytes_read.eq(self.bytes_read + self.stride)
        return m
