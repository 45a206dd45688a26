"""The Rice-coded error-bounded codec of ``codnn.golden.rice`` (docs/semantics.md section
10) compiled with numba: the same messages, byte for byte, and the same values back.
Golden stays the readable reference; this is what a training job calls.

Compression is one pass over the values, a block of 16 at a time (quantize, pick the
shortest Rice parameter, write the codes through a 64-bit bit buffer); decompression one
pass over the bit stream. The CRC-32 is zlib's. A message golden refuses raises
``CorruptMessage`` here too.
"""

import zlib

import numpy as np
from numba import njit

from codnn.golden.fmix32 import FMIX32_C1, FMIX32_C2
from codnn.golden.inceptionn import CorruptMessage, check_bound_bits
from codnn.golden.rice import (
    BLOCK,
    ESCAPE_QUOTIENT,
    HEADER_BYTES,
    MAX_K,
    MAX_MAGNITUDE,
    ROUNDINGS,
    max_message_bytes,
)

__all__ = ["compress", "decompress"]

_ESCAPE_BITS = ESCAPE_QUOTIENT + 32
#: Error codes of the decoder (0: the message parsed).
_CUT, _BAD_K, _RANGE, _PAST_COUNT, _TRAILING = 1, 2, 3, 4, 5


@njit(cache=True, inline="always")
def _fmix32(h):
    h ^= h >> 16
    h = (h * FMIX32_C1) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * FMIX32_C2) & 0xFFFFFFFF
    return h ^ (h >> 16)


@njit(cache=True, inline="always")
def _quantize(v, bound_bits, stochastic, draw):
    """(q, escape) of one float32 given as its bits."""
    e = (v >> 23) & 0xFF
    if e == 0xFF:
        return 0, True
    if e == 0:
        return 0, False
    sig = (v & 0x7FFFFF) | 0x800000
    t = 150 - e - bound_bits + (0 if stochastic else 1)
    if t < 0:
        return 0, True
    if stochastic:
        mag = sig >> t if t < 62 else 0
        fraction = ((sig << 32) >> t) & 0xFFFFFFFF if t < 56 else 0
        mag += (fraction + draw) >> 32
    else:
        mag = (sig + ((1 << (t - 1)) if t > 0 else 0)) >> t if t < 62 else 0
    if mag >= MAX_MAGNITUDE:
        return 0, True
    return (-mag if v >> 31 else mag), False


@njit(cache=True, inline="always")
def _put(out, state, value, size):
    """Append ``size`` (at most 32) bits of ``value``; ``state`` is [byte, buffer, bits]."""
    state[1] |= value << state[2]
    state[2] += size
    while state[2] >= 8:
        out[state[0]] = state[1] & 0xFF
        state[1] >>= 8
        state[2] -= 8
        state[0] += 1


@njit(cache=True)
def _compress(bits, bound_bits, stochastic, seed, out):
    """Write the bit stream of ``bits`` (float32 as uint32) into ``out``; return its bytes."""
    n = bits.size
    z = np.zeros(BLOCK, np.int64)
    esc = np.zeros(BLOCK, np.bool_)
    state = np.zeros(3, np.int64)
    for start in range(0, n, BLOCK):
        zero = True
        for i in range(BLOCK):
            z[i], esc[i] = 0, False
            if start + i < n:
                draw = _fmix32((seed + start + i) & 0xFFFFFFFF) if stochastic else 0
                q, e = _quantize(np.int64(bits[start + i]), bound_bits, stochastic, draw)
                z[i] = -2 * q - 1 if q < 0 else 2 * q
                esc[i] = e
                zero = zero and q == 0 and not e
        if zero:
            _put(out, state, 0, 1)
            continue
        best, best_cost = 0, 1 << 30
        for k in range(MAX_K + 1):
            cost = 0
            for i in range(BLOCK):
                u = z[i] >> k
                cost += _ESCAPE_BITS if esc[i] or u >= ESCAPE_QUOTIENT else u + 1 + k
            if cost < best_cost:
                best, best_cost = k, cost
        _put(out, state, 1 | (best << 1), 5)
        for i in range(BLOCK):
            u = z[i] >> best
            if esc[i] or u >= ESCAPE_QUOTIENT:
                _put(out, state, (1 << ESCAPE_QUOTIENT) - 1, ESCAPE_QUOTIENT)
                _put(out, state, np.int64(bits[start + i]), 32)
            else:
                low = z[i] & ((1 << best) - 1)
                _put(out, state, ((1 << u) - 1) | (low << (u + 1)), u + 1 + best)
    if state[2]:
        out[state[0]] = state[1] & 0xFF
        state[0] += 1
    return state[0]


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
    """``golden.rice.compress``, compiled: the same bytes."""
    check_bound_bits(bound_bits)
    if rounding not in ROUNDINGS:
        raise ValueError(f"Rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")
    bits = np.ascontiguousarray(x, dtype="<f4").reshape(-1).view(np.uint32)
    out = np.empty(max_message_bytes(bits.size), np.uint8)
    used = _compress(bits, bound_bits, rounding == "stochastic", int(seed) & 0xFFFFFFFF, out)
    settings = bound_bits | (ROUNDINGS.index(rounding) << 7)
    body = np.uint32(bits.size).astype("<u4").tobytes() + bytes([settings]) + out[:used].tobytes()
    return body + np.uint32(zlib.crc32(body)).astype("<u4").tobytes()


_MESSAGES = {_CUT: "Message cut: a code runs past its bit stream",
             _BAD_K: f"A block has a Rice parameter above {MAX_K}",
             _RANGE: "A value quantized past the coded range",
             _PAST_COUNT: "Nonzero value past the message's count",
             _TRAILING: "Bits past the message's last block"}


def decompress(data, max_values=None):
    """``golden.rice.decompress``, compiled: the same values, the same refusals."""
    data = bytes(data)
    if len(data) < HEADER_BYTES + 4:
        raise CorruptMessage(f"Message of {len(data)} bytes is shorter than its header and "
                             f"CRC ({HEADER_BYTES + 4} bytes)")
    body = data[:-4]
    if zlib.crc32(body) != int.from_bytes(data[-4:], "little"):
        raise CorruptMessage("Message fails its CRC-32 (corrupt or cut)")
    n, settings = int.from_bytes(body[:4], "little"), body[4]
    if max_values is not None and n > max_values:
        raise CorruptMessage(f"Message counts {n} values, more than the {max_values} allowed")
    if settings & 0x60:
        raise CorruptMessage(f"Reserved settings bits set: {settings:#04x}")
    bound_bits = settings & 0x1F
    try:
        check_bound_bits(bound_bits)
    except ValueError as exc:
        raise CorruptMessage(str(exc)) from None
    if len(body) - HEADER_BYTES > max_message_bytes(n):
        raise CorruptMessage(f"Message of {len(data)} bytes is longer than {n} values can be")
    scale_bits = -bound_bits if settings >> 7 else 1 - bound_bits
    out = np.zeros(-(-n // BLOCK) * BLOCK, np.uint32)
    code = _decompress(np.frombuffer(body, np.uint8, offset=HEADER_BYTES), n, scale_bits, out)
    if code:
        raise CorruptMessage(_MESSAGES[code])
    return out[:n].view(np.float32)
