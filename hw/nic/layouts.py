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
from amaranth.lib import data
from amaranth.utils import ceil_log2

from codnn.hw.common.trees import balanced

__all__ = ["LANES", "DEFAULT_MAX_VALUES", "check_lanes", "beat_layout", "frame_beat_layout",
           "chunk_layout", "beat_bytes"]

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


def frame_beat_layout(nbytes):
    """An Ethernet frame's beat of ``nbytes`` bytes: ``beat_layout`` and ``user``, which
    flags a bad frame (a MAC's bad FCS) on its last beat, or (a frame buffer's range)
    every beat of a range sent with the flag."""
    return data.StructLayout({**beat_layout(nbytes).members, "user": unsigned(1)})


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
