"""Stream payloads of the NIC engines and the lane-count check they share.

A *beat* is one AXI4-Stream transfer: ``data`` (``lanes`` float32, byte 0 in bits 7..0),
``keep`` (one bit per byte, read on a message's last beat only: its valid bytes are its
lowest ones; every other beat is taken whole) and ``last`` (the message's final beat). A
*chunk* is what a stage hands the byte packer: up to ``bytes`` bytes, the first ``length``
of them valid (the rest zero), and ``last``.

Value messages (the compressor's input, the decompressor's output) start with a
*descriptor beat*: bytes 0..3 hold the value count ``n`` (little-endian), the rest are zero
and ignored; ``ceil(n / lanes)`` beats of values follow, the last one keeping ``4 * (n mod
lanes)`` bytes (all if that is 0).
"""

import operator

from amaranth.hdl import Cat, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from codnn.hw.common.trees import balanced

__all__ = ["LANES", "DEFAULT_MAX_VALUES", "check_lanes", "beat_layout", "chunk_layout",
           "beat_bytes", "count_errors", "StreamEngine"]

#: Lane counts the engines support (float32 values per beat).
LANES = (1, 2, 4, 8, 16)
#: The largest value count a message may declare unless an engine is built with another
#: (16 Mi values, 64 MiB of float32): a corrupted count is dropped, not padded to 2**32.
DEFAULT_MAX_VALUES = 1 << 24


def check_lanes(lanes):
    """Raise ``ValueError`` unless ``lanes`` is one of ``LANES``."""
    if isinstance(lanes, bool) or lanes not in LANES:
        raise ValueError(f"Lane count must be one of {', '.join(map(str, LANES))}, "
                         f"not {lanes!r}")


def beat_layout(nbytes):
    """An AXI4-Stream beat of ``nbytes`` bytes."""
    return data.StructLayout({"data": unsigned(8 * nbytes), "keep": unsigned(nbytes),
                              "last": unsigned(1)})


def chunk_layout(nbytes):
    """A chunk of at most ``nbytes`` bytes for the byte packer."""
    return data.StructLayout({"data": unsigned(8 * nbytes),
                              "length": unsigned(ceil_log2(nbytes + 1)),
                              "last": unsigned(1)})


def beat_bytes(m, beat):
    """The bytes a beat carries: a message's last beat its kept ones (the lowest ``keep``
    bits), every other beat all of them (its ``keep`` is not read). Returns their number
    and the beat's data with the bytes past them zeroed."""
    width = len(beat.keep)
    kept = Signal(range(width + 1), name="kept_bytes")
    m.d.comb += kept.eq(balanced(beat.keep, operator.add))
    count = Signal(range(width + 1), name="beat_bytes")
    m.d.comb += count.eq(Mux(beat.last, kept, width))
    masked = Cat(beat.data[8 * k:8 * (k + 1)] & (beat.keep[k] | ~beat.last).replicate(8)
                 for k in range(width))
    return count, masked


def count_errors(m, flag, error, error_count, *, between):
    """Count bad messages: set the sticky ``error`` and add one to ``error_count``
    (saturating) for each message in which ``flag`` is high in one cycle or more.

    ``between`` is high while the engine waits for a message's first beat (its state
    between messages): a flag then belongs to the message that starts in that cycle, and
    a message's later flags count no more.
    """
    seen = Signal()                   # this message has been counted
    counted = Signal()
    m.d.comb += counted.eq(flag & (between | ~seen))
    with m.If(between):
        m.d.sync += seen.eq(flag)
    with m.Elif(flag):
        m.d.sync += seen.eq(1)
    with m.If(counted):
        m.d.sync += error.eq(1)
        with m.If(error_count != (1 << len(error_count)) - 1):
            m.d.sync += error_count.eq(error_count + 1)
    return counted


class StreamEngine(wiring.Component):
    """Base of the NIC engines: streams ``i`` and ``o`` of ``beat_layout(4 * lanes)``, plus
    the engine's own ``ports``, after checking ``lanes`` and ``max_values`` (the largest
    value count a message may declare; a larger one is a bad message, dropped whole)."""

    def __init__(self, lanes, ports, max_values=DEFAULT_MAX_VALUES):
        check_lanes(lanes)
        if isinstance(max_values, bool) or not isinstance(max_values, int) \
                or not 1 <= max_values < 1 << 32:
            raise ValueError(f"Largest message must be 1..2**32-1 values, not {max_values!r}")
        self._lanes, self._max_values = lanes, max_values
        beat = beat_layout(4 * lanes)
        super().__init__({"i": In(stream.Signature(beat)), "o": Out(stream.Signature(beat)),
                          **ports})

    lanes = property(lambda self: self._lanes, doc="Float32 values per beat.")
    max_values = property(lambda self: self._max_values,
                          doc="The largest value count a message may declare.")
