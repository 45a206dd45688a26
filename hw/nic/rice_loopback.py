"""Rice compressor into Rice decompressor: the round trip of the Rice codec on one chip."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS
from codnn.hw.nic.engine_base import NicEngineBase
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.rice_compressor import RICE_COMPRESSOR_LATENCY, RiceCompressor
from codnn.hw.nic.rice_decompressor import RICE_DECOMPRESSOR_LATENCY, RiceDecompressor

__all__ = ["RiceLoopback"]


class RiceLoopback(NicEngineBase):
    """Value messages in, through a ``RiceCompressor`` and a ``RiceDecompressor`` of the
    same width, value messages out: what a receiving NIC hands its host. The settings
    (``bound_bits``, ``rounding``, ``seed``) are the compressor's, sampled as it samples
    them; the decompressor needs none (each message names its bound and rounding).

    Latency: the compressor's plus the decompressor's. Throughput: the slower of the two
    on the data at hand (one value a cycle at best).

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1), for both engines.

    Attributes
    ----------
    i, o : In/Out(stream.Signature(beat_layout(4 * lanes)))
    bound_bits, rounding, seed : In
        The compressor's settings.
    error : Out(1)
        Either engine's error flag.
    error_count : Out(17)
        Bad messages both engines counted.
    """

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"bound_bits": In(4, init=DEFAULT_BOUND_BITS), "rounding": In(1),
             "seed": In(32), "error": Out(1), "error_count": Out(17)}

    def __init__(self, *, lanes=1, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    @property
    def latency(self):
        """The compressor's latency plus the decompressor's."""
        return RICE_COMPRESSOR_LATENCY + RICE_DECOMPRESSOR_LATENCY

    def elaborate(self, platform):
        m = Module()
        lanes, limit = self.lanes, self.max_values
        m.submodules.compressor = compressor = RiceCompressor(lanes=lanes, max_values=limit)
        m.submodules.decompressor = decompressor = RiceDecompressor(lanes=lanes,
                                                                    max_values=limit)
        wiring.connect(m, wiring.flipped(self.i), compressor.i)
        wiring.connect(m, compressor.o, decompressor.i)
        wiring.connect(m, decompressor.o, wiring.flipped(self.o))
        m.d.comb += [compressor.bound_bits.eq(self.bound_bits),
                     compressor.rounding.eq(self.rounding), compressor.seed.eq(self.seed),
                     self.error.eq(compressor.error | decompressor.error),
                     self.error_count.eq(compressor.error_count + decompressor.error_count)]
        return m
