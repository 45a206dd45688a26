"""Compressor into decompressor: the round trip a pair of NICs makes, on one chip."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS
from codnn.hw.nic.compressor import InceptionnCompressor, compressor_latency
from codnn.hw.nic.decompressor import DECOMPRESSOR_LATENCY, InceptionnDecompressor
from codnn.hw.nic.engine_base import NicEngineBase
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES

__all__ = ["CodecLoopback"]

#: Messages whose settings wait between the two engines before the input waits.
_SETTINGS_DEPTH = 32


class CodecLoopback(NicEngineBase):
    """Value messages in, through an ``InceptionnCompressor`` and an
    ``InceptionnDecompressor`` of the same width, value messages out.

    ``bound_bits`` and ``bypass`` are sampled at the clock edge that takes a message's
    descriptor beat, as the compressor does; a queue carries them to the decompressor,
    which takes them at the edge that takes the message's first compressed beat, so both
    engines use the message's own settings. The input waits while ``_SETTINGS_DEPTH``
    messages are between the two.

    Latency: the compressor's plus the decompressor's. Throughput: the slower of the two
    on the data at hand.

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1), for both engines.

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

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"bound_bits": In(4, init=DEFAULT_BOUND_BITS), "bypass": In(1),
             "error": Out(1), "error_count": Out(17)}

    def __init__(self, *, lanes=8, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    @property
    def latency(self):
        """The compressor's latency plus the decompressor's."""
        return compressor_latency(self.lanes) + DECOMPRESSOR_LATENCY

    def elaborate(self, platform):
        m = Module()
        lanes, limit = self.lanes, self.max_values
        m.submodules.compressor = compressor = InceptionnCompressor(lanes=lanes,
                                                                    max_values=limit)
        m.submodules.decompressor = decompressor = InceptionnDecompressor(lanes=lanes,
                                                                          max_values=limit)
        m.submodules.settings = settings = SyncFIFOBuffered(width=5, depth=_SETTINGS_DEPTH)
        wiring.connect(m, compressor.o, decompressor.i)
        wiring.connect(m, decompressor.o, wiring.flipped(self.o))

        # The input: a message's first beat pushes its settings, unless the compressor
        # drops the message whole (its count above the limit: no output to pop them).
        first_in = Signal(init=1)
        m.d.comb += [compressor.i.payload.eq(self.i.payload),
                     compressor.i.valid.eq(self.i.valid & settings.w_rdy),
                     self.i.ready.eq(compressor.i.ready & settings.w_rdy),
                     compressor.bound_bits.eq(self.bound_bits),
                     compressor.bypass.eq(self.bypass)]
        taken_in = self.i.valid & self.i.ready
        with m.If(taken_in):
            m.d.sync += first_in.eq(self.i.payload.last)
        dropped = ~self.bypass & (self.i.payload.data[:32] > limit)
        m.d.comb += [settings.w_data.eq(Cat(self.bound_bits, self.bypass)),
                     settings.w_en.eq(taken_in & first_in & ~dropped)]

        # Between the engines: the decompressor samples the head at its first beat's take.
        first_mid = Signal(init=1)
        taken_mid = compressor.o.valid & compressor.o.ready
        with m.If(taken_mid):
            m.d.sync += first_mid.eq(compressor.o.payload.last)
        m.d.comb += [decompressor.bound_bits.eq(settings.r_data[:4]),
                     decompressor.bypass.eq(settings.r_data[4]),
                     settings.r_en.eq(taken_mid & first_mid)]

        m.d.comb += [self.error.eq(compressor.error | decompressor.error),
                     self.error_count.eq(compressor.error_count + decompressor.error_count)]
        return m
