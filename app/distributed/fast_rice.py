"""The Rice-coded error-bounded codec of ``codnn.golden.rice`` (docs/semantics.md section
10) compiled with numba: the same messages, byte for byte, and the same values back.
Golden stays the readable reference; this is what a training job calls.

Compression is one pass over the values, a block of 16 at a time (quantize, pick the
shortest Rice parameter, write the codes through a 64-bit bit buffer); decompression one
pass over the bit stream. The framing (count, settings, CRC-32) is golden's own
(``frame``, ``open_message``). A message golden refuses raises ``CorruptMessage`` here
too.
"""

import numpy as np
from numba import njit

from codnn.golden.fmix32 import FMIX32_C1, FMIX32_C2
from codnn.golden.inceptionn import CorruptMessage, check_bound_bits
from codnn.golden.rice import (
    BLOCK,
    ESCAPE_QUOTIENT,
    MAX_K,
    MAX_MAGNITUDE,
    check_rounding,
    frame,
    max_message_bytes,
    open_message,
    step_bits,
)

__all__ = ["compress", "decompress"]

_ESCAPE_BITS = ESCAPE_QUOTIENT + 32
#: Error codes of the decoder (0: the message parsed).
_CUT, _BAD_K, _RANGE, _PAST_COUNT, _TRAILING = 1, 2, 3, 4, 5


#: ``z`` of a value that escapes (coded ones are below 2**16).
_ESCAPED = np.uint32(0xFFFFFFFF)
#: Values quantized at a time (a whole number of blocks, small enough for the cache).
_CHUNK = 256 * BLOCK


@njit(cache=True)
def _zigzag(bits, first, step, stochastic, seed, z):
    """The zigzagged ``q`` (a step of ``2**step``) of values ``first ..`` into ``z``
    (``_ESCAPED`` for an escape; 0 past the last value), in one branch-free pass that the
    compiler vectorizes (unsigned arithmetic throughout)."""
    u32 = np.uint64(0xFFFFFFFF)
    for j in range(z.size):
        i = first + j
        if i >= bits.size:
            z[j] = 0
            continue
        v = np.uint64(bits[i])
        e = (v >> np.uint64(23)) & np.uint64(0xFF)
        sig = (v & np.uint64(0x7FFFFF)) | np.uint64(0x800000)
        t = np.int64(150 + step) - np.int64(e)             # |x| / 2**step = sig / 2**t
        shift = np.uint64(min(max(t, 0), 63))
        if stochastic:
            h = (np.uint64(seed) + np.uint64(i)) & u32
            h ^= h >> np.uint64(16)
            h = (h * np.uint64(FMIX32_C1)) & u32
            h ^= h >> np.uint64(13)
            h = (h * np.uint64(FMIX32_C2)) & u32
            h ^= h >> np.uint64(16)
            fraction = ((sig << np.uint64(32)) >> shift) & u32
            mag = (sig >> shift) + ((fraction + h) >> np.uint64(32))
        else:
            mag = (sig + ((np.uint64(1) << shift) >> np.uint64(1))) >> shift
        mag = mag if e != 0 else np.uint64(0)
        escape = (e == 0xFF) | (t < 0) | (mag >= MAX_MAGNITUDE)
        negative = (v >> np.uint64(31)) & (mag != 0)
        z[j] = _ESCAPED if escape else np.uint32((mag << np.uint64(1)) - negative)


@njit(cache=True)
def _compress(bits, step, stochastic, seed, out):
    """Write the bit stream of ``bits`` (float32 as uint32, a step of ``2**step``) into
    ``out`` (uint32 words, little-endian bit order); return its length in bits."""
    n = bits.size
    one = np.uint64(1)
    zz = np.zeros(_CHUNK, np.uint32)        # a chunk's z, quantized ahead of its blocks
    z = np.zeros(BLOCK, np.uint64)          # unsigned: numba's signed shifts are slow
    esc = np.zeros(BLOCK, np.bool_)
    codes = np.zeros(2 * BLOCK + 1, np.uint64)      # a block's codes, then written out
    sizes = np.zeros(2 * BLOCK + 1, np.int64)
    pos, acc, fill = 0, np.uint64(0), 0
    for start in range(0, n, BLOCK):
        at = start % _CHUNK
        if at == 0:
            _zigzag(bits, start, step, stochastic, seed, zz)
        zero = True
        for i in range(BLOCK):
            esc[i] = zz[at + i] == _ESCAPED
            z[i] = 0 if esc[i] else zz[at + i]
            zero &= zz[at + i] == 0
        codes[0], sizes[0], m = 0, 1, 1
        if not zero:
            # Past the bit length of the largest coded z every quotient is 0 and each
            # larger k costs more: only k up to that length can be the shortest.
            top = np.uint64(0)
            for i in range(BLOCK):
                if not esc[i]:
                    top = max(top, z[i])
            last = 0
            while top >> np.uint64(last):
                last += 1
            best, best_cost = 0, 1 << 30
            for k in range(min(last, MAX_K) + 1):
                cost = 0
                for i in range(BLOCK):
                    u = z[i] >> np.uint64(k)
                    out_of = esc[i] | (u >= ESCAPE_QUOTIENT)
                    cost += _ESCAPE_BITS if out_of else int(u) + 1 + k
                if cost < best_cost:
                    best, best_cost = k, cost
            codes[0], sizes[0] = 1 | (best << 1), 5
            kb = np.uint64(best)
            for i in range(BLOCK):
                u = z[i] >> kb
                if esc[i] or u >= ESCAPE_QUOTIENT:
                    codes[m], sizes[m] = (1 << ESCAPE_QUOTIENT) - 1, ESCAPE_QUOTIENT
                    codes[m + 1], sizes[m + 1] = bits[start + i], 32
                    m += 2
                else:
                    low = z[i] & ((one << kb) - one)
                    codes[m] = ((one << u) - one) | (low << (u + one))
                    sizes[m] = int(u) + 1 + best
                    m += 1
        for j in range(m):                  # into the bit buffer, 32-bit words out
            acc |= codes[j] << np.uint64(fill)
            fill += sizes[j]
            if fill >= 32:
                out[pos] = np.uint32(acc & np.uint64(0xFFFFFFFF))
                acc >>= np.uint64(32)
                fill -= 32
                pos += 1
    if fill:
        out[pos] = np.uint32(acc)
    return 32 * pos + fill


@njit(cache=True)
def _float_bits(q, scale_bits):
    """The float32 bits of ``q * 2**scale_bits`` (``|q| < 2**15``, a normal result)."""
    if q == 0:
        return 0
    m = abs(q)
    top = 0
    while m >> (top + 1):
        top += 1
    return ((1 << 31) if q < 0 else 0) | ((127 + top + scale_bits) << 23) \
        | ((m << (23 - top)) & 0x7FFFFF)


@njit(cache=True)
def _decompress(raw, count, scale_bits, out):
    """Decode ``count`` values from the bit stream ``raw`` into ``out`` (uint32 bits of
    whole blocks); return an error code."""
    size = raw.size * 8
    at = 0
    blocks = (count + BLOCK - 1) // BLOCK
    for b in range(blocks):
        if at + 1 > size:
            return _CUT
        flag = (raw[at >> 3] >> (at & 7)) & 1
        at += 1
        if not flag:
            continue
        if at + 4 > size:
            return _CUT
        k = 0
        for j in range(4):
            k |= ((raw[(at + j) >> 3] >> ((at + j) & 7)) & 1) << j
        at += 4
        if k > MAX_K:
            return _BAD_K
        for i in range(b * BLOCK, (b + 1) * BLOCK):
            u = 0
            while u < ESCAPE_QUOTIENT:
                if at >= size:
                    return _CUT
                bit = (raw[at >> 3] >> (at & 7)) & 1
                at += 1
                if not bit:
                    break
                u += 1
            width = 32 if u == ESCAPE_QUOTIENT else k
            if at + width > size:
                return _CUT
            field = 0
            for j in range(width):
                field |= np.int64((raw[(at + j) >> 3] >> ((at + j) & 7)) & 1) << j
            at += width
            if u == ESCAPE_QUOTIENT:
                out[i] = field
                continue
            z = (u << k) | field
            q = -((z + 1) >> 1) if z & 1 else z >> 1
            if abs(q) >= MAX_MAGNITUDE:
                return _RANGE
            out[i] = _float_bits(q, scale_bits)
    for i in range(count, blocks * BLOCK):
        if out[i]:
            return _PAST_COUNT
    if size - at >= 8:
        return _TRAILING
    if at < size and raw[at >> 3] >> (at & 7):
        return _TRAILING
    return 0


def compress(x, bound_bits, rounding="nearest", seed=0):
    """``codnn.golden.rice.compress``, compiled: the same bytes."""
    check_bound_bits(bound_bits)
    check_rounding(rounding)
    bits = np.ascontiguousarray(x, dtype="<f4").reshape(-1).view(np.uint32)
    out = np.empty(max_message_bytes(bits.size) // 4 + 1, "<u4")
    used = _compress(bits, step_bits(bound_bits, rounding), rounding == "stochastic",
                     int(seed) & 0xFFFFFFFF, out)
    return frame(bits.size, bound_bits, rounding, out.view(np.uint8)[:-(-used // 8)])


_MESSAGES = {_CUT: "Message cut: a code runs past its bit stream",
             _BAD_K: f"A block has a Rice parameter above {MAX_K}",
             _RANGE: "A value quantized past the coded range",
             _PAST_COUNT: "Nonzero value past the message's count",
             _TRAILING: "Bits past the message's last block"}


def decompress(data, max_values=None):
    """``codnn.golden.rice.decompress``, compiled: the same values, the same refusals."""
    n, bound_bits, rounding, stream = open_message(data, max_values)
    out = np.zeros(-(-n // BLOCK) * BLOCK, np.uint32)
    code = _decompress(np.frombuffer(stream, np.uint8), n, step_bits(bound_bits, rounding),
                       out)
    if code:
        raise CorruptMessage(_MESSAGES[code])
    return out[:n].view(np.float32)
