"""Error-bounded quantizer with Rice-coded blocks, a gradient codec (docs/semantics.md
section 10).

Each float32 value becomes an integer ``q``: ``|x| / (2 * 2**-b)`` rounded to nearest (the
decoded value within ``2**-b``), or ``|x| / 2**-b`` rounded stochastically by the counter
hash ``fmix32`` (within ``2**-b`` too, and unbiased), the sign kept. Blocks of 16 integers
are Rice-coded with the parameter that makes the block shortest; an all-zero block is
one bit. Non-finite values and those past the quantizer's range are sent whole.
The bit stream is framed by the value count, the settings byte and a CRC-32.
"""

import zlib

import numpy as np

from codnn.golden.fmix32 import fmix32
from codnn.golden.inceptionn import BOUND_BITS, CorruptMessage, check_bound_bits

__all__ = ["ROUNDINGS", "BLOCK", "MAX_K", "ESCAPE_QUOTIENT", "MAX_MAGNITUDE", "HEADER_BYTES",
           "check_rounding", "step_bits", "quantize", "choose_k", "compress", "frame", "seal",
           "open_message", "decompress", "received_values", "max_message_bytes"]

#: Rounding modes (the settings byte's bit 7).
ROUNDINGS = ("nearest", "stochastic")
#: Values per block (one header each).
BLOCK = 16
#: Rice parameters 0..MAX_K. A block's header is a 0 bit for an all-zero block, else a 1
#: bit and ``k`` in 4 bits (15 is not a parameter).
MAX_K = 14
#: A quotient of this many ones (and no terminating zero) escapes to the raw float32.
ESCAPE_QUOTIENT = 15
#: Quantized magnitudes below this are coded; larger ones escape.
MAX_MAGNITUDE = 1 << 15
#: Count (u32), settings byte; a CRC-32 (u32) follows the bit stream.
HEADER_BYTES = 5
_K_BITS, _RAW_BITS = 4, 32
_ESCAPE_BITS = ESCAPE_QUOTIENT + _RAW_BITS
_UNIT = 150                 # |x| = sig * 2**(e - 150) for the 24-bit significand sig


def check_rounding(rounding):
    """Raise ``ValueError`` unless ``rounding`` is one of ``ROUNDINGS``."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"Rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")


def step_bits(bound_bits, rounding):
    """The quantizer's step as a power of two: ``1 - b`` to nearest, ``-b`` stochastic."""
    return -bound_bits if rounding == "stochastic" else 1 - bound_bits


def quantize(x, bound_bits, rounding="nearest", seed=0):
    """``(q, escape)`` of float32 values ``x``: the signed integers (``q * step`` decodes,
    ``step = 2**(1 - b)`` to nearest, ``2**-b`` stochastic) and which values escape
    (non-finite, or ``|q| >= MAX_MAGNITUDE``; their ``q`` is 0). Value ``i`` draws
    ``fmix32((seed + i) mod 2**32)`` when stochastic."""
    check_bound_bits(bound_bits)
    check_rounding(rounding)
    bits = np.ascontiguousarray(x, dtype="<f4").reshape(-1).view(np.uint32).astype(np.int64)
    e = (bits >> 23) & 0xFF
    sig = np.where(e > 0, (bits & 0x7F_FFFF) | 0x80_0000, 0)    # denormals quantize to 0
    stochastic = rounding == "stochastic"
    # |x| / step = sig / 2**shift
    shift = np.where(e > 0, _UNIT + step_bits(bound_bits, rounding) - e, 62)
    big = shift < 0
    s = np.clip(shift, 0, 62)
    if stochastic:
        whole = sig >> s
        fraction = np.where(s >= 56, 0, ((sig << 32) >> np.minimum(s, 55)) & 0xFFFF_FFFF)
        counters = (np.arange(bits.size, dtype=np.int64) + seed) & 0xFFFF_FFFF
        draw = fmix32(counters).astype(np.int64)
        mag = whole + ((fraction + draw) >> 32)
    else:
        half = np.where(s > 0, np.int64(1) << np.maximum(s - 1, 0), 0)
        mag = (sig + half) >> s
    escape = (e == 0xFF) | big | (mag >= MAX_MAGNITUDE)
    mag = np.where(escape, 0, mag)
    return np.where(bits >> 31, -mag, mag), escape


def _zigzag(q):
    return np.where(q < 0, -2 * q - 1, 2 * q)


def _code_lengths(z, escape, k):
    """Bits of each value's Rice code with parameter ``k`` (escapes included)."""
    u = z >> k
    return np.where(escape | (u >= ESCAPE_QUOTIENT), _ESCAPE_BITS, u + 1 + k)


def choose_k(z, escape):
    """Each block's Rice parameter: -1 for an all-zero block (no escape), else the ``k``
    in 0..MAX_K that makes the block shortest (the smallest such ``k`` on a tie). ``z``
    and ``escape`` are ``blocks x BLOCK`` (zigzagged magnitudes, escapes)."""
    costs = np.stack([_code_lengths(z, escape, k).sum(axis=1) for k in range(MAX_K + 1)])
    return np.where((z == 0).all(axis=1) & ~escape.any(axis=1), -1, np.argmin(costs, axis=0))


def compress(x, bound_bits, rounding="nearest", seed=0):
    """The message of float32 values ``x`` (see the module docstring and semantics
    section 10): count, settings, the blocks' bit stream (LSB first), CRC-32."""
    x = np.ascontiguousarray(x, dtype="<f4").reshape(-1)
    q, escape = quantize(x, bound_bits, rounding, seed)
    n = x.size
    blocks = -(-n // BLOCK)
    pad = blocks * BLOCK - n
    z = np.concatenate([_zigzag(q), np.zeros(pad, np.int64)]).reshape(blocks, BLOCK)
    esc = np.concatenate([escape, np.zeros(pad, bool)]).reshape(blocks, BLOCK)
    raw = np.concatenate([x.view(np.uint32).astype(np.int64),
                          np.zeros(pad, np.int64)]).reshape(blocks, BLOCK)
    chosen = choose_k(z, esc)
    k = np.maximum(chosen, 0)[:, None]
    u = z >> k
    out = esc | (u >= ESCAPE_QUOTIENT)
    ones = (np.int64(1) << np.minimum(u, ESCAPE_QUOTIENT)) - 1
    value_code = np.where(out, ((1 << ESCAPE_QUOTIENT) - 1) | (raw << ESCAPE_QUOTIENT),
                          ones | ((z & ((np.int64(1) << k) - 1)) << (u + 1)))
    value_len = np.where(out, _ESCAPE_BITS, u + 1 + k)
    value_len[chosen < 0] = 0
    header = np.where(chosen < 0, 0, 1 | (k[:, 0] << 1))
    codes = np.concatenate([header[:, None], value_code], axis=1).reshape(-1)
    lengths = np.concatenate([np.where(chosen < 0, 1, 1 + _K_BITS)[:, None], value_len],
                             axis=1)
    return frame(n, bound_bits, rounding, _pack(codes, lengths.reshape(-1)))


def frame(count, bound_bits, rounding, stream):
    """The message around a bit stream: the count, the settings byte, the stream, the
    CRC-32 of those."""
    settings = bound_bits | (ROUNDINGS.index(rounding) << 7)
    return seal(np.uint32(count).astype("<u4").tobytes() + bytes([settings]) + bytes(stream))


def seal(body):
    """``body`` (a message's count, settings byte and bit stream) with its CRC-32."""
    return bytes(body) + zlib.crc32(body).to_bytes(4, "little")


def _pack(codes, lengths, chunk=1 << 16):
    """Concatenate codes of ``lengths`` bits each, LSB first, into bytes (zero-padded);
    ``chunk`` codes at a time, so that memory follows the message, not its width."""
    parts = []
    for start in range(0, codes.size, chunk):
        size = lengths[start:start + chunk]
        width = int(size.max(initial=0))
        bits = ((codes[start:start + chunk, None] >> np.arange(width)) & 1).astype(np.uint8)
        parts.append(bits[np.arange(width) < size[:, None]])
    return np.packbits(np.concatenate(parts) if parts else np.zeros(0, np.uint8),
                       bitorder="little").tobytes()


def max_message_bytes(count):
    """The longest message of ``count`` values (every value escaping)."""
    blocks = -(-count // BLOCK)
    return HEADER_BYTES + -(-blocks * (1 + _K_BITS + BLOCK * _ESCAPE_BITS) // 8) + 4


class _Bits:
    """Reads a byte string's bits, LSB first (each read looks at the bytes it spans
    only, so a message decodes in time linear in its size)."""

    def __init__(self, data):
        self.data, self.size, self.at = data, 8 * len(data), 0

    def take(self, count):
        if self.at + count > self.size:
            raise CorruptMessage(f"Message cut: its bit stream ends at bit {self.size}, a "
                                 f"code needs bit {self.at + count}")
        first = self.at // 8
        window = int.from_bytes(self.data[first:(self.at + count + 7) // 8], "little")
        field = (window >> (self.at % 8)) & ((1 << count) - 1)
        self.at += count
        return field

    def ones(self, limit):
        """Count ones up to ``limit``; a zero ends the run (and is taken)."""
        for run in range(limit):
            if not self.take(1):
                return run
        return limit

    def rest(self):
        """The bits not read yet, as an integer (0: only zero padding is left)."""
        return int.from_bytes(self.data[self.at // 8:], "little") >> (self.at % 8)


def open_message(data, max_values=None):
    """``(count, bound_bits, rounding, stream)`` of a message whose framing holds: at
    least its header and CRC, the CRC right, no reserved settings bit, a bound in range,
    no more bytes than ``count`` values can take and, with ``max_values``, a count no
    larger. Raises ``CorruptMessage`` otherwise."""
    data = bytes(data)
    if len(data) < HEADER_BYTES + 4:
        raise CorruptMessage(f"Message of {len(data)} bytes is shorter than its header and "
                             f"CRC ({HEADER_BYTES + 4} bytes)")
    body, crc = data[:-4], int.from_bytes(data[-4:], "little")
    if zlib.crc32(body) != crc:
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
    return n, bound_bits, ROUNDINGS[settings >> 7], body[HEADER_BYTES:]


def _decoded(reader, blocks, step):
    """``(index, bits, q)`` of each value of ``blocks`` blocks read from ``reader``, in
    order: the float32 bits the value decodes to and its integer (``None`` for an escape).
    Raises ``CorruptMessage`` at a code the stream cuts and at a parameter of 15."""
    for b in range(blocks):
        first = b * BLOCK
        if not reader.take(1):
            for i in range(first, first + BLOCK):
                yield i, 0, 0
            continue
        k = reader.take(_K_BITS)
        if k > MAX_K:
            raise CorruptMessage(f"Block {b} has the Rice parameter {k} (at most {MAX_K})")
        for i in range(first, first + BLOCK):
            u = reader.ones(ESCAPE_QUOTIENT)
            if u == ESCAPE_QUOTIENT:
                yield i, reader.take(_RAW_BITS), None
                continue
            z = (u << k) | reader.take(k)
            q = -((z + 1) >> 1) if z & 1 else z >> 1
            yield i, int((np.float32(q) * step).view(np.uint32)), q


def _step(bound_bits, rounding):
    return np.float32(2.0 ** step_bits(bound_bits, rounding))


def decompress(data, max_values=None):
    """The float32 values of a message. Raises ``CorruptMessage`` when its framing does
    not hold (``open_message``), a code is cut, a block's parameter is 15 or a value
    past the coded range, a value past its count is nonzero, or bits follow its last
    block."""
    n, bound_bits, rounding, stream = open_message(data, max_values)
    blocks = -(-n // BLOCK)
    reader = _Bits(stream)
    out = np.zeros(blocks * BLOCK, np.uint32)
    for i, bits, q in _decoded(reader, blocks, _step(bound_bits, rounding)):
        if q is not None and abs(q) >= MAX_MAGNITUDE:
            raise CorruptMessage(f"Value {i} quantized to {q}, past the coded range")
        out[i] = bits
    if np.any(out[n:]):
        raise CorruptMessage("Nonzero value past the message's count")
    if (reader.size - reader.at >= 8) or reader.rest():
        raise CorruptMessage("Bits past the message's last block")
    return out[:n].view(np.float32)


def received_values(data, *, max_values):
    """What a streaming decoder gives for any byte string ``data`` taken as one message
    (docs/nic.md, bad input): ``(values, bad)``, ``values`` None for no output.

    A message of fewer than 5 bytes (its count and settings byte), or whose count is above
    ``max_values``, gives no output. Otherwise the stream is the bytes after the settings
    byte up to the message's last 4 (its CRC; none in a message of fewer than 9 bytes),
    and its values decode in order as ``decompress`` decodes them (a value past the coded
    range too) up to the first code the stream cuts or the first block whose parameter is
    15; zeros from there up to the count, and zeros throughout when the settings byte
    names a bound out of 7..15 or a reserved bit. ``bad``: ``decompress`` refuses the
    message (its CRC too, which a decoder checks only after its values)."""
    data = bytes(data)
    if len(data) < HEADER_BYTES:
        return None, True
    count = int.from_bytes(data[:4], "little")
    if count > max_values:
        return None, True
    try:
        decompress(data, max_values)
        bad = False
    except CorruptMessage:
        bad = True
    values = np.zeros(count, np.uint32)
    settings = data[4]
    bound_bits = settings & 0x1F
    if not settings & 0x60 and bound_bits in BOUND_BITS:
        stream = _Bits(data[HEADER_BYTES:max(HEADER_BYTES, len(data) - 4)])
        step = _step(bound_bits, ROUNDINGS[settings >> 7])
        try:
            for i, bits, _ in _decoded(stream, -(-count // BLOCK), step):
                if i < count:
                    values[i] = bits
        except CorruptMessage:
            pass
    return values.view(np.float32), bad
