"""The network engine's external activation memory: loads and stores between the
activation buffer and an AXI4 memory, one burst at a time (docs/semantics.md section 9)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from codnn.golden.network_program import word_stride
from codnn.hw.network.weights import axi_read_signature, burst_words

__all__ = ["AxiActivations", "axi_signature"]

#: Words a transfer may move (an activation buffer holds at most 65536).
MAX_WORDS = 1 << 16


def axi_signature(data_bits, addr_bits=32):
    """An AXI4 master's five channels (IDs of one bit, tied to 0), master's view."""
    members = dict(axi_read_signature(data_bits, addr_bits).members)
    members.update({
        "awid": Out(1), "awaddr": Out(addr_bits), "awlen": Out(8), "awsize": Out(3),
        "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_bits), "wstrb": Out(data_bits // 8), "wlast": Out(1),
        "wvalid": Out(1), "wready": In(1),
        "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1)})
    return wiring.Signature(members)


class _Phase(enum.Enum, shape=3):
    IDLE = 0
    AR = 1          # a load burst's address
    R = 2           # its words, into the buffer
    AW = 3          # a store burst's address (its first word is read meanwhile)
    W = 4           # its words, from the buffer
    B = 5           # its response


class AxiActivations(wiring.Component):
    """Moves ``count`` words between the activation buffer (words of ``word_bits``) and
    external memory behind the AXI4 port ``axi`` (a bus of ``word_stride(word_bits // 8)``
    bytes; word ``k`` at byte ``base + k * stride``, ``base`` 4 KB aligned): a pulse on
    ``start`` (while not ``busy``) with ``store`` low loads external words ``addr``... into
    buffer words ``buf``... (``write``), with ``store`` high stores buffer words into
    external memory (``read``, data a cycle after the address; the buffer must not change
    meanwhile). Bursts (``codnn.golden.network_program.bursts``: at most 256 beats, none across
    a 4 KB page) go one at a time: a store burst's words follow its address, then its
    response is awaited; write strobes cover the word's bytes only. ``error`` is high in a
    cycle whose read data or write response is not OKAY; ``bytes_read`` and
    ``bytes_written`` count the bus bytes moved since reset.

    Latency: two cycles from ``start`` to the first burst's address; then per burst of
    ``n`` words, with a memory that takes an address at once, answers its first read word
    ``L`` cycles after the cycle its address was taken in and a write response ``L_w``
    cycles after the last write word's, a load burst takes ``L + n`` cycles (the address
    and the wait, a word a cycle) and a store burst ``1 + n + L_w`` (the address while the
    first word is read, a word a cycle, the response); ``busy`` is low the cycle after
    the last burst's last one. Throughput: a word a cycle within a burst.
    """

    def __init__(self, *, word_bits, depth):
        self.stride = word_stride(-(-word_bits // 8))
        self.word_bits, self.depth = word_bits, depth
        super().__init__({
            "start": In(1), "store": In(1), "addr": In(32), "buf": In(range(depth)),
            "count": In(range(MAX_WORDS + 1)), "base": In(32),
            "busy": Out(1), "error": Out(1),
            "read": Out(range(depth)), "read_data": In(word_bits),
            "write": Out(data.StructLayout({"addr": range(depth), "data": word_bits,
                                            "en": 1})),
            "bytes_read": Out(32), "bytes_written": Out(32),
            "axi": Out(axi_signature(8 * self.stride)),
        })

    def elaborate(self, platform):
        m = Module()
        axi, stride = self.axi, self.stride
        phase = Signal(_Phase)
        m.d.comb += self.busy.eq(phase != _Phase.IDLE)
        ext = Signal(32)                        # the burst's first external word
        buf = Signal(range(self.depth + 1))     # the buffer word the next beat moves
        left = Signal(range(MAX_WORDS + 1))     # words not yet in a burst
        beats = Signal(9)                       # words of the burst under way
        beat = Signal(9)                        # beats of it moved
        address = Signal(32, name="address")
        m.d.comb += address.eq(self.base + ext * stride)
        size = burst_words(address, left, stride)
        m.d.comb += [
            axi.arid.eq(0), axi.arsize.eq(ceil_log2(stride)), axi.arburst.eq(1),
            axi.araddr.eq(address), axi.arlen.eq(beats - 1),
            axi.awid.eq(0), axi.awsize.eq(ceil_log2(stride)), axi.awburst.eq(1),
            axi.awaddr.eq(address), axi.awlen.eq(beats - 1),
            axi.wstrb.eq((1 << -(-self.word_bits // 8)) - 1),
            axi.wdata.eq(self.read_data), axi.wlast.eq(beat == beats - 1),
            self.read.eq(buf),
            self.write.addr.eq(buf), self.write.data.eq(axi.rdata[:self.word_bits]),
        ]

        store = Signal()

        def next_burst():
            """The next burst of what is left, or the end."""
            m.d.sync += [beats.eq(size), beat.eq(0), left.eq(left - size),
                         phase.eq(Mux(left == 0, _Phase.IDLE,
                                      Mux(store, _Phase.AW, _Phase.AR)))]

        with m.Switch(phase):
            with m.Case(_Phase.IDLE):
                with m.If(self.start):
                    m.d.sync += [ext.eq(self.addr), buf.eq(self.buf), left.eq(self.count),
                                 store.eq(self.store), beats.eq(0), phase.eq(_Phase.B)]
                    # The first burst is sized in a cycle of B with nothing to await.
            with m.Case(_Phase.AR):
                m.d.comb += axi.arvalid.eq(1)
                with m.If(axi.arready):
                    m.d.sync += [phase.eq(_Phase.R), ext.eq(ext + beats)]
            with m.Case(_Phase.R):
                m.d.comb += axi.rready.eq(1)
                with m.If(axi.rvalid):
                    m.d.comb += self.write.en.eq(1)
                    m.d.sync += [buf.eq(buf + 1), beat.eq(beat + 1),
                                 self.bytes_read.eq(self.bytes_read + stride)]
                    with m.If(beat == beats - 1):
                        next_burst()
            with m.Case(_Phase.AW):
                m.d.comb += axi.awvalid.eq(1)
                with m.If(axi.awready):
                    m.d.sync += [phase.eq(_Phase.W), ext.eq(ext + beats)]
            with m.Case(_Phase.W):
                m.d.comb += axi.wvalid.eq(1)
                with m.If(axi.wready):
                    m.d.comb += self.read.eq(buf + 1)
                    m.d.sync += [buf.eq(buf + 1), beat.eq(beat + 1),
                                 self.bytes_written.eq(self.bytes_written + stride)]
                    with m.If(beat == beats - 1):
                        m.d.sync += phase.eq(_Phase.B)
            with m.Case(_Phase.B):
                # Awaits a store burst's response; a transfer's start passes once, with
                # nothing to await (``beats`` is 0), to size its first burst.
                m.d.comb += axi.bready.eq(beats != 0)
                with m.If((beats == 0) | axi.bvalid):
                    next_burst()
        m.d.comb += self.error.eq((axi.rvalid & axi.rready & (axi.rresp != 0))
                                  | (axi.bvalid & axi.bready & (axi.bresp != 0)))
        return m
