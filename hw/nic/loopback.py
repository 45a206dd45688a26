"""Compressor into decompressor: the round trip a pair of NICs makes, on one chip."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.nic.compressor import InceptionnCompressor, compressor_latency
from hw.nic.decompressor import InceptionnDecompressor
from hw.nic.layouts import StreamEngine

__all__ = ["CodecLoopback"]


class CodecLoopback(StreamEngine):
    """Value messages in, through an ``InceptionnCompressor`` and an
    ``InceptionnDecompressor`` of the same width, value messages out.

    Latency: the compressor's plus the decompressor's. Throughput: the slower of the two
    on the data at hand.

    Attributes
    ----------
    i, o : In/Out(stream.Signature(beat_layout(4 * lanes)))
    bound_bits, bypass : In
        Shared by both engines.
    error : Out(1)
        Either engine's error flag.
    error_count : Out(17)
        Bad messages both engines counted.
    """

    def __init__(self, *, lanes=8):
        super().__init__(lanes, {
            "bound_bits": In(4, init=10), "bypass": In(1),
            "error": Out(1), "error_count": Out(17),
        })

    @property
    def LATENCY(self):
        """The compressor's latency plus the decompressor's."""
        return compressor_latency(self.lanes) + InceptionnDecompressor.LATENCY

    def elaborate(self, platform):
        m = Module()
        m.submodules.compressor = compressor = InceptionnCompressor(lanes=self.lanes)
        m.submodules.decompressor = decompressor = InceptionnDecompressor(lanes=self.lanes)
        wiring.connect(m, wiring.flipped(self.i), compressor.i)
        wiring.connect(m, compressor.o, decompressor.i)
        wiring.connect(m, decompressor.o, wiring.flipped(self.o))
        for engine in (compressor, decompressor):
            m.d.comb += [engine.bound_bits.eq(self.bound_bits), engine.bypass.eq(self.bypass)]
        m.d.comb += [self.error.eq(compressor.error | decompressor.error),
                     self.error_count.eq(compressor.error_count + decompressor.error_count)]
        return m
