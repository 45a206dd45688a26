"""Where the network engine reads its weight image from: on-chip memory, or external memory
through an AXI4 read port. Both stream a run of consecutive words on request."""

from amaranth.hdl import Cat, Module, Mux, Signal
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
    through ``write`` (address, data, enable; while no run is on), read by two runs at
    once: ``start``/``addr``/``count``/``o`` (sharing the memory's port with ``write``)
    and ``table_start``/``table_addr``/``table_count``/``table_o`` (the second port), so
    that a tile's gather table and its cells load together. ``bytes_read`` counts both.

    Latency: a run's first word is on its stream the cycle after its start; then a word
    a cycle while the stream is taken."""

    def __init__(self, *, word_bits, words):
        super().__init__(word_bits, words, {
            "write": In(data.StructLayout({"addr": range(words), "data": word_bits, "en": 1})),
            "table_start": In(1), "table_addr": In(range(words)),
            "table_count": In(range(MAX_RUN + 1)),
            "table_o": Out(stream.Signature(word_bits))})
        self.words = words

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = mem = memory.Memory(shape=self.word_bits, depth=self.words,
                                                  init=[])
        # The host's writes and the first run share a port (one address: a read-write
        # port of a dual-port block RAM); the table's run has the other.
        write, read = mem.write_port(), mem.read_port(transparent_for=())
        address = Signal(range(self.words))
        m.d.comb += [write.addr.eq(address), read.addr.eq(address),
                     write.data.eq(self.write.data), write.en.eq(self.write.en)]
        run_address = _run(m, read.data, self.start, self.addr, self.count, self.o, self.words)
        m.d.comb += address.eq(Mux(self.write.en, self.write.addr, run_address))
        table = mem.read_port(transparent_for=())
        m.d.comb += table.addr.eq(_run(m, table.data, self.table_start, self.table_addr,
                                       self.table_count, self.table_o, self.words))
        taken = Cat(self.o.valid & self.o.ready, self.table_o.valid & self.table_o.ready)
        with m.If(taken.any()):
            m.d.sync += self.bytes_read.eq(self.bytes_read + Mux(taken.all(), 2, 1)
                                           * (self.word_bits // 8))
        return m


def _run(m, read_data, start, addr, count, o, words):
    """A run of ``count`` words from ``addr`` on ``o``, from a memory read port whose data
    (``read_data``) come a cycle after its address: returns the address to read."""
    following = Signal(range(words + 1))        # the next word to read
    left = Signal(range(MAX_RUN + 1))           # words of the run not yet read
    valid = Signal()
    read_addr = Signal(range(words))
    m.d.comb += [o.valid.eq(valid), o.payload.eq(read_data)]
    with m.If(start):
        m.d.comb += read_addr.eq(addr)
        m.d.sync += [following.eq(addr + 1), left.eq(count - 1), valid.eq(count != 0)]
    with m.Elif(~valid | o.ready):
        m.d.comb += read_addr.eq(following)
        m.d.sync += valid.eq(left != 0)
        with m.If(left != 0):
            m.d.sync += [following.eq(following + 1), left.eq(left - 1)]
    with m.Else():
        m.d.comb += read_addr.eq(following - 1)         # hold the word on offer
    return read_addr


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
