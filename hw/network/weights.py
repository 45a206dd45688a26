"""Where the network engine reads its weight image from: on-chip memory, or external memory
through an AXI4 read port. Both stream a run of consecutive words on request."""

from amaranth.hdl import Module, Mux, ResetInserter, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from codnn.golden.network_program import PREFETCH_BURST, PREFETCH_BURSTS, word_stride

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


def burst_words(address, left, stride, most=MAX_BURST):
    """Words of the next AXI4 INCR burst from byte ``address`` with ``left`` words to go,
    ``stride`` bytes a word: at most ``most``, none past the address's 4 KB page."""
    if stride < 4096:                   # the words left in the address's 4 KB page
        in_page = (4096 - address[:12]) >> ceil_log2(stride)
    else:
        in_page = 1
    room = Mux(in_page < most, in_page, most)
    return Mux(left < room, left, room)


class _Reader(wiring.Component):
    """The request side both readers share: ``start`` (a pulse) with ``addr`` (a word)
    and ``count`` (1..``MAX_RUN`` words) begins a run; its words leave on ``o`` in order.
    ``bytes_read`` counts the bytes the memory moved since reset."""

    def __init__(self, word_bits, words, extra, run=MAX_RUN):
        self.word_bits = word_bits
        super().__init__({"start": In(1), "addr": In(range(words)),
                          "count": In(range(run + 1)),
                          "o": Out(stream.Signature(word_bits)),
                          "bytes_read": Out(32), **extra})


class OnChipWeights(_Reader):
    """The weight image in on-chip memory (``words`` words of ``word_bits``), written
    through ``write`` (address, data, enable), read through one port (``start``,
    ``addr``, ``count`` and ``o``: a run) or, with ``aside``, two: ``aside`` another run
    at the same time (``start``, ``addr``, ``count``, ``o``: a tile's gather table beside
    its cells; yosys builds the memory's block RAMs twice on ECP5, a copy per read
    port). ``bytes_read`` counts both.

    Latency: a run's first word is on its ``o`` the cycle after its ``start``; then a
    word a cycle while ``o`` is taken."""

    def __init__(self, *, word_bits, words, aside=False):
        run = wiring.Signature({"start": Out(1), "addr": Out(range(words)),
                                "count": Out(range(MAX_RUN + 1)),
                                "o": In(stream.Signature(word_bits))})
        super().__init__(word_bits, words, {
            "write": In(data.StructLayout({"addr": range(words), "data": word_bits,
                                           "en": 1})),
            **({"aside": In(run)} if aside else {})})
        self.words, self._aside = words, aside

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = mem = memory.Memory(shape=self.word_bits, depth=self.words,
                                                  init=[])
        write = mem.write_port()
        m.d.comb += [write.addr.eq(self.write.addr), write.data.eq(self.write.data),
                     write.en.eq(self.write.en)]
        runs = [(self, "run")] + ([(self.aside, "aside")] if self._aside else [])
        taken = [self._run(m, mem.read_port(transparent_for=()), run, name)
                 for run, name in runs]
        m.d.sync += self.bytes_read.eq(self.bytes_read
                                       + sum(taken) * (self.word_bits // 8))
        return m

    def _run(self, m, read, run, name):
        """A run through memory read port ``read``; returns whether a word of it is
        taken."""
        following = Signal(range(self.words + 1), name=f"{name}_following")
        left = Signal(range(MAX_RUN + 1), name=f"{name}_left")
        valid = Signal(name=f"{name}_valid")
        m.d.comb += [run.o.valid.eq(valid), run.o.payload.eq(read.data)]
        with m.If(run.start):
            m.d.comb += read.addr.eq(run.addr)
            m.d.sync += [following.eq(run.addr + 1), left.eq(run.count - 1),
                         valid.eq(run.count != 0)]
        with m.Elif(~valid | run.o.ready):
            m.d.comb += read.addr.eq(following)
            m.d.sync += valid.eq(left != 0)
            with m.If(left != 0):
                m.d.sync += [following.eq(following + 1), left.eq(left - 1)]
        with m.Else():
            m.d.comb += read.addr.eq(following - 1)     # hold the word on offer
        return run.o.valid & run.o.ready


class AxiWeights(_Reader):
    """The weight image in external memory behind an AXI4 read port (``axi``: a bus of
    ``word_stride`` bytes; word ``k`` at byte ``base + k * word_stride``; ``base`` aligned
    to the stride), prefetched: a run (a layer's words, up to ``2**32 - 1``) goes out as
    INCR bursts of at most ``PREFETCH_BURST`` words that do not cross a 4 KB page, an
    address a cycle while fewer than ``PREFETCH_BURSTS`` bursts are held (asked for and
    not yet wholly taken from ``o``), and the read data go into a FIFO that holds them
    all (so ``rready`` stays high and the memory is never held up), out to ``o`` in
    order. ``error`` is high with a word whose response is not OKAY. ``clear`` ends a
    run: its words not yet taken are dropped (the one on offer on ``o`` too), those
    still to come as they arrive (an address on offer stays on offer until taken, as
    AXI4 asks), and no burst of the next run is asked for before the last of them has.

    Latency: the first address the cycle after ``start``, its first word the memory's
    latency after that and on ``o`` ``PREFETCH_LAG`` cycles later; then a word a cycle
    while the memory and ``o`` keep up (``codnn.golden.network_program.layer_cycles``)."""

    def __init__(self, *, word_bits, words=1 << 24):
        self.stride = word_stride(word_bits // 8)
        super().__init__(word_bits, words, {
            "base": In(32), "error": Out(1), "clear": In(1),
            "axi": Out(axi_read_signature(8 * self.stride))}, run=(1 << 32) - 1)
        self.words = words

    def elaborate(self, platform):
        m = Module()
        axi, B, H = self.axi, PREFETCH_BURST, PREFETCH_BURSTS
        m.submodules.fifo = fifo = ResetInserter(self.clear)(
            SyncFIFOBuffered(width=self.word_bits, depth=B * H))
        following = Signal(32)              # the next word to ask for
        left = Signal(32)                   # words of the run not asked for yet
        address = Signal(32)
        m.d.comb += address.eq(self.base + following * self.stride)
        burst = Signal(range(B + 1))        # words the next burst asks for
        m.d.comb += burst.eq(burst_words(address, left, self.stride, B))
        # The bursts held (asked for, their last word not yet taken): the oldest's words
        # not yet taken (``rest``) and the next one's words (``after``).
        held = Signal(range(H + 1))
        rest, after = Signal(range(B + 1)), Signal(range(B + 1))
        outstanding = Signal(range(B * H + 1))      # asked for, not yet arrived
        dropping = Signal(range(B * H + 1))         # to drop as they arrive
        # An address on offer when ``clear`` came stays on offer (AXI4), its words dropped.
        stale = Signal()
        stale_addr, stale_words = Signal(32), Signal(range(B + 1))
        asked = axi.arvalid & axi.arready
        arrived = axi.rvalid & axi.rready
        taken = self.o.valid & self.o.ready
        m.d.comb += [axi.arid.eq(0), axi.arsize.eq(ceil_log2(self.stride)), axi.arburst.eq(1),
                     axi.araddr.eq(Mux(stale, stale_addr, address)),
                     axi.arlen.eq(Mux(stale, stale_words, burst) - 1),
                     axi.arvalid.eq(stale | ((left != 0) & (held < H) & (dropping == 0)))]
        with m.If(self.start):
            m.d.sync += [following.eq(self.addr), left.eq(self.count)]
        with m.Elif(asked & ~stale):
            m.d.sync += [following.eq(following + burst), left.eq(left - burst)]
        # A take of the oldest burst's last word frees it; an address adds a burst.
        done = taken & (rest == 1) & (held != 0)
        fresh = asked & ~stale
        with m.If(fresh & ((held == 0) | ((held == 1) & done))):
            m.d.sync += rest.eq(burst)
        with m.Elif(taken):
            m.d.sync += rest.eq(Mux(done, after, rest - 1))
        with m.If(fresh & (held != 0) & ~((held == 1) & done)):
            m.d.sync += after.eq(burst)
        words = Mux(asked, axi.arlen + 1, 0)
        m.d.sync += [held.eq(held + fresh - done),
                     outstanding.eq(outstanding + words - arrived),
                     dropping.eq(dropping - (arrived & (dropping != 0))
                                 + Mux(stale, words, 0))]
        with m.If(asked):
            m.d.sync += stale.eq(0)
        m.d.comb += [axi.rready.eq(1), fifo.w_data.eq(axi.rdata),
                     fifo.w_en.eq(arrived & (dropping == 0)),
                     self.o.valid.eq(fifo.r_rdy), self.o.payload.eq(fifo.r_data),
                     fifo.r_en.eq(self.o.ready)]
        with m.If(self.clear):
            # Words asked for (this cycle's too) and not yet arrived go as they come; an
            # address on offer and not taken stays on offer and its words go too.
            pending = axi.arvalid & ~axi.arready
            m.d.sync += [left.eq(0), held.eq(0),
                         dropping.eq(outstanding + words - arrived),
                         stale.eq(pending), stale_addr.eq(axi.araddr),
                         stale_words.eq(axi.arlen + 1)]
        m.d.comb += self.error.eq(arrived & (axi.rresp != 0))
        with m.If(arrived):
            m.d.sync += self.bytes_read.eq(self.bytes_read + self.stride)
        return m
