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
#: The quotient a code's first 16 bits give: their trailing ones, at most
#: ``ESCAPE_QUOTIENT``.
_QUOTIENTS = np.array([min((~v & (v + 1)).bit_length() - 1, ESCAPE_QUOTIENT)
                       for v in range(1 << 16)], np.uint8)
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
def _peek(words, at):
    """The bit stream's 64 bits from bit ``at`` on (``words``: the stream as
    little-endian 64-bit words, zero-padded by two words)."""
    w, r = at >> 6, np.uint64(at & 63)
    # The next word's bits above them, shifted in two steps so that r = 0 shifts by 64.
    return (words[w] >> r) | ((words[w + 1] << np.uint64(1)) << (np.uint64(63) - r))


@njit(cache=True)
def _decompress(words, size, count, scale, out, values):
    """Decode ``count`` values from the bit stream of ``size`` bits in ``words`` into
    ``out`` (uint32 bits of whole blocks; ``values``, the same memory as float32); return
    an error code. The stream's next bits wait in a 64-bit ``window``, read from bit
    ``start`` and read again only when fewer than a code's most bits (``_ESCAPE_BITS``)
    are left in it: a code's quotient is the window's trailing ones (``_QUOTIENTS`` of
    its low 16 bits), its remainder the bits after them, and the window shifts past it."""
    at = start = 0
    window = _peek(words, 0)
    blocks = (count + BLOCK - 1) // BLOCK
    for b in range(blocks):
        if at + 5 > start + 64:
            window, start = _peek(words, at), at
        if at + 1 > size:
            return _CUT
        if not window & np.uint64(1):
            at, window = at + 1, window >> np.uint64(1)
            continue
        if at + 5 > size:
            return _CUT
        k = int((window >> np.uint64(1)) & np.uint64(15))
        at, window = at + 5, window >> np.uint64(5)
        if k > MAX_K:
            return _BAD_K
        kb, mask = np.uint64(k), (np.uint64(1) << np.uint64(k)) - np.uint64(1)
        for i in range(b * BLOCK, (b + 1) * BLOCK):
            if at + _ESCAPE_BITS > start + 64:
                window, start = _peek(words, at), at
            u = int(_QUOTIENTS[window & np.uint64(0xFFFF)])
            if u == ESCAPE_QUOTIENT:
                if at + _ESCAPE_BITS > size:
                    return _CUT
                out[i] = np.uint32((window >> np.uint64(ESCAPE_QUOTIENT)) & np.uint64(0xFFFFFFFF))
                at, window = at + _ESCAPE_BITS, window >> np.uint64(_ESCAPE_BITS)
                continue
            n = u + 1 + k
            if at + n > size:
                return _CUT
            z = (np.uint64(u) << kb) | ((window >> np.uint64(u + 1)) & mask)
            at, window = at + n, window >> np.uint64(n)
            if z >= np.uint64(2 * MAX_MAGNITUDE - 1):      # |q| >= MAX_MAGNITUDE
                return _RANGE
            q = np.int64(z >> np.uint64(1)) ^ -np.int64(z & np.uint64(1))
            values[i] = np.float32(q) * scale      # exact: |q| < 2**15, a normal power
    for i in range(count, blocks * BLOCK):
        if out[i]:
            return _PAST_COUNT
    if size - at >= 8:
        return _TRAILING
    if at < size and _peek(words, at) & ((np.uint64(1) << np.uint64(size - at)) - np.uint64(1)):
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
    padded = np.zeros(-(-len(stream) // 8) + 2, "<u8")
    padded.view(np.uint8)[:len(stream)] = np.frombuffer(stream, np.uint8)
    code = _decompress(padded, 8 * len(stream), n,
                       np.float32(2.0 ** step_bits(bound_bits, rounding)), out,
                       out.view(np.float32))
    if code:
        raise CorruptMessage(_MESSAGES[code])
    return out[:n].view(np.float32)
