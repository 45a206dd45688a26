"""Integers <-> payload words, lane 0 in the least significant bits: the bit layout of
every stream beat (``amaranth.lib.data.ArrayLayout``), shared by testbenches and the host
driver."""

__all__ = ["pack_lanes", "unpack_lanes"]


def pack_lanes(values, width):
    """Pack integers (two's complement, ``width`` bits each) into one payload integer."""
    mask = (1 << width) - 1
    word = 0
    for lane, value in enumerate(values):
        word |= (int(value) & mask) << (lane * width)
    return word


def unpack_lanes(word, width, lanes):
    """Split a payload integer into ``lanes`` unsigned integers of ``width`` bits."""
    mask = (1 << width) - 1
    return [(word >> (lane * width)) & mask for lane in range(lanes)]
