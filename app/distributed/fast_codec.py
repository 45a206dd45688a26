"""The INCEPTIONN-style codec of ``codnn.golden.inceptionn`` (docs/semantics.md section 4)
compiled with numba: the same messages, byte for byte, and the same values back, at a few
hundred million values per second on one core, where the NumPy golden model does 5-16
million. Golden stays the readable reference; this is what a training job calls.

Compression is one pass over the values, a block (a tag word and its payloads) at a time;
decompression one pass over the message. A message golden refuses (cut short, bytes past
its last block, a nonzero tag past its count) raises ``CorruptMessage`` here too.
"""

import numpy as np
from numba import njit

from codnn.golden.inceptionn import (
    BLOCK,
    LARGE_BITS,
    RAW_EXPONENT,
    SMALL_BITS,
    CorruptMessage,
    check_bound_bits,
    compressed_size,
    message_bits,
    message_count,
)

__all__ = ["compress", "decompress"]

_HEADER = 4
#: Error codes of the decoder (0: the message parsed).
_CUT, _TRAILING, _PAST_COUNT = 1, 2, 3


@njit(cache=True)
def _compress(bits, bound_bits, out):
    """Write the message of ``bits`` (float32 as uint32) into ``out``; return its length."""
    n = bits.size
    small, large = RAW_EXPONENT - bound_bits, RAW_EXPONENT + SMALL_BITS - bound_bits
    for k in range(4):
        out[k] = (n >> (8 * k)) & 0xFF
    pos = _HEADER
    for start in range(0, n, BLOCK):
        word_at = pos
        pos += 2
        word = 0
        for i in range(min(BLOCK, n - start)):
            v = bits[start + i]
            e = (v >> 23) & 0xFF
            sign = v >> 31
            significand = (v & 0x7FFFFF) | 0x800000
            if e >= RAW_EXPONENT:
                word |= 3 << (2 * i)
                for k in range(4):
                    out[pos + k] = (v >> (8 * k)) & 0xFF
                pos += 4
            elif e >= large:
                word |= 2 << (2 * i)
                payload = (sign << LARGE_BITS) | (significand >> (RAW_EXPONENT + 23
                                                                  - LARGE_BITS - e))
                out[pos] = payload & 0xFF
                out[pos + 1] = (payload >> 8) & 0xFF
                pos += 2
            elif e >= small:
                word |= 1 << (2 * i)
                out[pos] = (sign << SMALL_BITS) | (significand >> (RAW_EXPONENT + 23
                                                                   - bound_bits - e))
                pos += 1
        out[word_at] = word & 0xFF
        out[word_at + 1] = word >> 8
    return pos


@njit(cache=True)
def _bits_of(magnitude, scale_bits):
    """float32 bits of ``magnitude * 2**-scale_bits`` (``magnitude`` below 2**15)."""
    if magnitude == 0:
        return 0
    top = 0
    while magnitude >> (top + 1):
        top += 1
    return ((RAW_EXPONENT + top - scale_bits) << 23) | ((magnitude << (23 - top)) & 0x7FFFFF)


@njit(cache=True)
def _decompress(raw, count, bound_bits, out):
    """Decode ``count`` values of ``raw`` into ``out`` (uint32); return an error code."""
    size = raw.size
    pos = _HEADER
    blocks = (count + BLOCK - 1) // BLOCK
    past_count = False
    for block in range(blocks):
        if pos + 2 > size:
            return _CUT
        word = raw[pos] | (raw[pos + 1] << 8)
        pos += 2
        for i in range(BLOCK):
            tag = (word >> (2 * i)) & 3
            j = block * BLOCK + i
            length = 0 if tag == 0 else (1 if tag == 1 else (2 if tag == 2 else 4))
            if pos + length > size:
                return _CUT
            if j >= count:
                past_count = past_count or tag != 0
            elif tag == 0:
                out[j] = 0
            elif tag == 1:
                p = np.uint32(raw[pos])
                out[j] = _bits_of(p & 0x7F, bound_bits) | ((p >> 7) << 31)
            elif tag == 2:
                p = np.uint32(raw[pos]) | (np.uint32(raw[pos + 1]) << 8)
                out[j] = _bits_of(p & 0x7FFF, LARGE_BITS) | ((p >> 15) << 31)
            else:
                out[j] = (np.uint32(raw[pos]) | (np.uint32(raw[pos + 1]) << 8)
                          | (np.uint32(raw[pos + 2]) << 16) | (np.uint32(raw[pos + 3]) << 24))
            pos += length
    if pos < size:
        return _TRAILING
    return _PAST_COUNT if past_count else 0


def compress(x, bound_bits):
    """``codnn.golden.inceptionn.compress(x, bound_bits)``, compiled: the same bytes.

    Raises
    ------
    TypeError
        If ``x`` is not float32.
    ValueError
        If ``bound_bits`` is not in 7..15 or there are 2**32 values or more.
    """
    check_bound_bits(bound_bits)
    bits = message_bits(x)
    out = np.empty(compressed_size(bits.size)[1], np.uint8)
    return out[:_compress(bits, int(bound_bits), out)].tobytes()


def decompress(data, bound_bits):
    """``codnn.golden.inceptionn.decompress(data, bound_bits)``, compiled: the same values.

    Raises
    ------
    CorruptMessage
        Where golden does: a message cut short, bytes past its last block, a nonzero tag
        on a value past its count.
    ValueError
        If ``bound_bits`` is not in 7..15.
    """
    check_bound_bits(bound_bits)
    raw = np.frombuffer(bytes(data), np.uint8)
    count = message_count(raw)
    out = np.empty(count, np.uint32)
    error = _decompress(raw, count, int(bound_bits), out)
    if error:
        raise CorruptMessage({_CUT: f"Message cut at byte {raw.size}",
                              _TRAILING: "Bytes past the last block of the message",
                              _PAST_COUNT: "Nonzero tag on a value past the message's count"
                              }[error])
    return out.view(np.float32)
