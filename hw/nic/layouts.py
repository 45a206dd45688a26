"""Stream payloads of the NIC engines and the lane-count check they share.

A *beat* is one AXI4-Stream transfer: ``data`` (``lanes`` float32, byte 0 in bits 7..0),
``keep`` (one bit per byte; the valid bytes of a beat are its lowest ones) and ``last``
(the message's final beat). A *chunk* is what a stage hands the byte packer: up to
``bytes`` bytes, the first ``length`` of them valid (the rest zero), and ``last``.

Value messages (the compressor's input, the decompressor's output) start with a
*descriptor beat*: bytes 0..3 hold the value count ``n`` (little-endian), the rest are zero
and ignored; ``ceil(n / lanes)`` beats of values follow, the last one keeping ``4 * (n mod
lanes)`` bytes (all if that is 0).
"""

import operator

from amaranth.hdl import Cat, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hw.common.trees import balanced

__all__ = ["LANES", "check_lanes", "beat_layout", "chunk_layout", "beat_bytes", "count_errors",
           "StreamEngine"]

#: Lane counts the engines support (float32 values per beat).
LANES = (1, 2, 4, 8, 16)


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
    """The number of bytes a beat keeps, and its data with the bytes it does not keep
    zeroed."""
    width = len(beat.keep)
    count = Signal(range(width + 1), name="kept_bytes")
    m.d.comb += count.eq(balanced(beat.keep, operator.add))
    masked = Cat(beat.data[8 * k:8 * (k + 1)] & beat.keep[k].replicate(8) for k in range(width))
    return count, masked


def count_errors(m, flag, error, error_count):
    """Each cycle ``flag`` is high: set the sticky ``error`` and count in ``error_count``
    (saturating)."""
    with m.If(flag):
        m.d.sync += error.eq(1)
        with m.If(error_count != (1 << len(error_count)) - 1):
            m.d.sync += error_count.eq(error_count + 1)


class StreamEngine(wiring.Component):
    """Base of the NIC engines: streams ``i`` and ``o`` of ``beat_layout(4 * lanes)``, plus
    the engine's own ``ports``, after checking ``lanes``."""

    def __init__(self, lanes, ports):
        check_lanes(lanes)
        self._lanes = lanes
        beat = beat_layout(4 * lanes)
        super().__init__({"i": In(stream.Signature(beat)), "o": Out(stream.Signature(beat)),
                          **ports})

    lanes = property(lambda self: self._lanes, doc="Float32 values per beat.")
