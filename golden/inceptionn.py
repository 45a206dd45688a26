"""INCEPTIONN-style error-bounded gradient codec (docs/semantics.md section 4).

Every float32 ``x`` (sign ``s``, biased exponent ``e``, significand ``sig = 1.m`` as a
24-bit integer) gets a 2-bit tag and a payload, for an error bound ``2**-b``::

    tag 3  e >= 127              the 32 bits unchanged (|x| >= 1, Inf, NaN)    4 bytes
    tag 0  e < 127-b             nothing; decodes to +0.0                      0 bytes
    tag 1  127-b <= e < 134-b    s<<7  | sig >> (150-e-b)  = floor(|x|*2**b)   1 byte
    tag 2  134-b <= e < 127      s<<15 | sig >> (135-e)    = floor(|x|*2**15)  2 bytes (LE)

so ``|x - decompress(compress(x))| < 2**-b`` for finite ``|x| < 1`` and the rest is exact.
A message is a 4-byte little-endian count ``n``, then ``ceil(n/8)`` blocks; a block is a
16-bit little-endian tag word (value ``i``'s tag in bits ``2i+1..2i``) followed by the
payloads of its 8 values in order; values past ``n`` in the last block have tag 0.

Both directions are vectorized, except one pass over the block lengths in ``decompress``
(a block's position depends on every block before it).
"""

import numpy as np

__all__ = ["BOUND_BITS", "DEFAULT_BOUND_BITS", "BLOCK", "PAYLOAD_BYTES", "MAX_BLOCK_BYTES",
           "RAW_EXPONENT", "SMALL_BITS", "LARGE_BITS", "CorruptMessage",
           "check_bound_bits", "message_bits", "message_count", "classify", "compress",
           "decompress", "received_values", "compressed_size"]

#: The error bounds ``2**-b`` the codec supports: ``b`` in 7..15.
BOUND_BITS = range(7, 16)
DEFAULT_BOUND_BITS = 10
#: Values per block (one 16-bit tag word).
BLOCK = 8
#: Payload bytes of tags 0, 1, 2, 3.
PAYLOAD_BYTES = np.array([0, 1, 2, 4], dtype=np.int64)
#: The largest block: its tag word and ``BLOCK`` raw float32.
MAX_BLOCK_BYTES = 2 + BLOCK * int(PAYLOAD_BYTES[3])
#: The class boundaries. A biased exponent at or above ``RAW_EXPONENT`` (|x| >= 1, Inf,
#: NaN) is sent whole; tag 1 keeps ``SMALL_BITS`` magnitude bits (the exponents
#: ``RAW_EXPONENT - b`` to ``RAW_EXPONENT + SMALL_BITS - b - 1``), tag 2 ``LARGE_BITS``.
RAW_EXPONENT = 127
SMALL_BITS, LARGE_BITS = 7, 15
#: Exponent plus significand position: ``|x| = sig * 2**(e - _UNIT)`` for a 24-bit ``sig``.
_UNIT = RAW_EXPONENT + 23

_HEADER = 4
_PAYLOAD_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFF_FFFF], dtype=np.uint32)
#: Bytes of a block, indexed by its tag word.
_BLOCK_BYTES = 2 + sum(PAYLOAD_BYTES[(np.arange(1 << 16) >> (2 * i)) & 3] for i in range(BLOCK))


class CorruptMessage(ValueError):
    """A compressed message that does not parse: truncated, trailing bytes, bad tags."""


def check_bound_bits(bound_bits):
    """Raise ``ValueError`` unless ``bound_bits`` is an integer in 7..15."""
    if isinstance(bound_bits, bool) or not isinstance(bound_bits, (int, np.integer)) \
            or bound_bits not in BOUND_BITS:
        raise ValueError(f"Error bound bits must be an integer in {BOUND_BITS[0]}.."
                         f"{BOUND_BITS[-1]}, not {bound_bits!r}")


def message_bits(x):
    """The bits (flat uint32, C order) of the float32 values one message carries.

    Raises
    ------
    TypeError
        If ``x`` is not float32.
    ValueError
        If there are 2**32 values or more.
    """
    array = np.asarray(x)
    if array.dtype != np.float32:
        raise TypeError(f"Gradients must be float32, not {array.dtype}")
    if array.size >= 1 << 32:
        raise ValueError(f"A message holds fewer than 2**32 values, not {array.size}")
    return np.ascontiguousarray(array).reshape(-1).view(np.uint32)


def message_count(raw):
    """The value count of a message (``raw``: its bytes as uint8), checked against the
    message's length.

    Raises
    ------
    CorruptMessage
        If there is no 4-byte count, or fewer bytes than the count's tag words need.
    """
    if raw.size < _HEADER:
        raise CorruptMessage(f"Message of {raw.size} bytes has no 4-byte count")
    count = int(raw[:_HEADER].view("<u4")[0])
    if raw.size < compressed_size(count)[0]:
        raise CorruptMessage(f"Message cut at byte {raw.size}: a count of {count} needs at"
                             f" least {compressed_size(count)[0]} bytes")
    return count


def classify(x, bound_bits=DEFAULT_BOUND_BITS):
    """Return the tags and payloads (as integers) of float32 values.

    Returns
    -------
    tags : numpy.ndarray of uint8
    payloads : numpy.ndarray of uint32
        The payload as a little-endian integer of ``PAYLOAD_BYTES[tag]`` bytes.
    """
    check_bound_bits(bound_bits)
    bits = message_bits(x)
    exponent = ((bits >> 23) & 0xFF).astype(np.int16)
    sign = bits >> 31
    significand = (bits & 0x7F_FFFF) | 0x80_0000
    small = exponent >= RAW_EXPONENT - bound_bits
    large = exponent >= RAW_EXPONENT + SMALL_BITS - bound_bits
    raw = exponent >= RAW_EXPONENT
    tags = small.view(np.uint8) + large.view(np.uint8) + raw.view(np.uint8)
    # Each class's shift lies in 0..23 inside the class; clipped outside it (masked below).
    shift = np.where(large, _UNIT - LARGE_BITS - exponent, _UNIT - bound_bits - exponent)
    payloads = significand >> np.clip(shift, 0, 31).astype(np.uint32)
    payloads |= sign << np.where(large, LARGE_BITS, SMALL_BITS).astype(np.uint32)
    payloads[~small] = 0
    payloads[raw] = bits[raw]
    return tags, payloads


def compressed_size(count):
    """Bounds on the bytes of a message of ``count`` values: ``(smallest, largest)``."""
    blocks = -(-count // BLOCK)
    return _HEADER + 2 * blocks, _HEADER + 2 * blocks + 4 * count


def compress(x, bound_bits=DEFAULT_BOUND_BITS):
    """Compress float32 gradients (any shape, flattened in C order) into one message.

    Raises
    ------
    TypeError
        If ``x`` is not float32.
    ValueError
        If ``bound_bits`` is not in 7..15 or there are 2**32 values or more.
    """
    tags, payloads = classify(x, bound_bits)
    count = tags.size
    blocks = -(-count // BLOCK)
    padded = blocks * BLOCK
    tags = np.concatenate([tags, np.zeros(padded - count, np.uint8)]).reshape(blocks, BLOCK)
    payloads = np.concatenate([payloads, np.zeros(padded - count, np.uint32)])
    tag_words = (tags.astype(np.uint32) << (2 * np.arange(BLOCK, dtype=np.uint32))).sum(
        axis=1, dtype=np.uint32)
    # Items in wire order: each block's tag word, then its 8 payloads.
    values = np.concatenate([tag_words[:, None], payloads.reshape(blocks, BLOCK)], axis=1)
    lengths = np.concatenate([np.full((blocks, 1), 2, np.uint8),
                              PAYLOAD_BYTES[tags].astype(np.uint8)], axis=1)
    values, lengths = values.reshape(-1), lengths.reshape(-1)
    ends = _HEADER + np.cumsum(lengths, dtype=np.int64)
    present = lengths > 0
    values, offsets = values[present], ends[present] - lengths[present]
    # An item's bytes past its length are zero, so each item writes all 4 bytes, highest
    # first: a later item's real byte always lands in a later pass than a zero it covers.
    out = np.zeros(int(ends[-1]) + 4 if blocks else _HEADER + 4, np.uint8)
    for k in range(3, -1, -1):
        out[offsets + k] = (values >> np.uint32(8 * k)).astype(np.uint8)
    out[:_HEADER] = np.frombuffer(np.uint32(count).tobytes(), np.uint8)
    return out[:-4].tobytes()


#: Blocks one step of the jump table skips in ``_block_starts``.
_JUMP = 16


def _block_starts(raw, blocks):
    """Byte offset of every block of a message (``raw`` as uint8) and the offset past the last.

    ``step[p]`` is where a block starting at byte ``p`` ends; squaring it four times gives
    the start 16 blocks on, so only ``blocks/16`` steps run in Python.
    """
    size = raw.size
    index = np.int64 if size >= 1 << 30 else np.int32
    padded = np.concatenate([raw, np.zeros(1, np.uint8)]).astype(np.uint32)
    step = np.arange(size, dtype=index)
    step += _BLOCK_BYTES.astype(index)[padded[:-1] | padded[1:] << 8]
    np.minimum(step, size, out=step)
    step = np.concatenate([step, np.array([size], index)])
    jump = step
    for _ in range(_JUMP.bit_length() - 1):
        jump = jump[jump]
    anchors = [_HEADER]
    for _ in range(-(-blocks // _JUMP) - 1):
        anchors.append(int(jump[anchors[-1]]))
    starts = np.empty((len(anchors), _JUMP), index)
    starts[:, 0] = anchors
    for k in range(1, _JUMP):
        starts[:, k] = step[starts[:, k - 1]]
    starts = starts.reshape(-1)[:blocks].astype(np.int64)
    if blocks and starts[-1] + 2 > size:
        cut = int(np.argmax(starts + 2 > size))
        raise CorruptMessage(f"Message cut at byte {size}: block {cut} of {blocks}"
                             " has no tag word")
    last = starts[-1] if blocks else _HEADER
    end = last + (int(_BLOCK_BYTES[raw[last] | raw[last + 1].astype(np.uint32) << 8])
                  if blocks else 0)
    return starts, end


def decompress(data, bound_bits=DEFAULT_BOUND_BITS):
    """Decode one message into a flat float32 array.

    Raises
    ------
    CorruptMessage
        If the message is shorter than its count needs, has bytes past its last block, or
        gives a nonzero tag to a value past the count.
    ValueError
        If ``bound_bits`` is not in 7..15.
    """
    check_bound_bits(bound_bits)
    data = bytes(data)
    raw = np.frombuffer(data, np.uint8)
    count = message_count(raw)
    blocks = -(-count // BLOCK)
    starts, end = _block_starts(raw, blocks)
    if end > len(data):
        raise CorruptMessage(f"Message cut at byte {len(data)}: its blocks need {end} bytes")
    if end < len(data):
        raise CorruptMessage(f"{len(data) - end} bytes past the last of {blocks} blocks")
    tag_words = raw[starts].astype(np.uint32) | raw[starts + 1].astype(np.uint32) << 8
    tags = ((tag_words[:, None] >> (2 * np.arange(BLOCK, dtype=np.uint32))) & 3).astype(np.uint8)
    if tags.reshape(-1)[count:].any():
        raise CorruptMessage("Nonzero tag on a value past the message's count")
    lengths = PAYLOAD_BYTES.astype(np.uint8)[tags]
    offsets = starts[:, None] + 2 + np.cumsum(lengths, axis=1, dtype=np.int64) - lengths
    offsets, tags = offsets.reshape(-1)[:count], tags.reshape(-1)[:count]
    # Read 4 bytes at every offset (past the end reads padding); keep the payload's bytes.
    padded = np.concatenate([raw, np.zeros(4, np.uint8)])
    payloads = np.zeros(count, np.uint32)
    for k in range(4):
        payloads |= padded[offsets + k].astype(np.uint32) << np.uint32(8 * k)
    payloads &= _PAYLOAD_MASK[tags]
    return _decode(tags, payloads, bound_bits)


def received_values(data, bound_bits, *, max_values, group_values=BLOCK):
    """What a decompressor gives for any byte string ``data`` taken as one message
    (docs/nic.md, bad input): ``(values, bad)``, ``values`` None for no output.

    A message of fewer than 4 bytes, or whose count is above ``max_values``, gives no
    output. Otherwise the values of every whole group of ``group_values`` values (the
    engine's ``max(8, lanes)``; a group is whole when all its blocks are) up to the first
    group not whole, then zeros up to the count. ``bad``: the message is not exactly what
    ``decompress`` takes (cut, bytes past its last block, a nonzero tag past its count).

    Raises
    ------
    ValueError
        If ``bound_bits`` is not in 7..15 or ``group_values`` is not a multiple of 8.
    """
    check_bound_bits(bound_bits)
    if group_values <= 0 or group_values % BLOCK:
        raise ValueError(f"A group is a positive multiple of {BLOCK} values, not "
                         f"{group_values!r}")
    raw = np.frombuffer(bytes(data), np.uint8)
    if raw.size < _HEADER:
        return None, True
    count = int(raw[:_HEADER].view("<u4")[0])
    if count > max_values:
        return None, True
    blocks = -(-count // BLOCK)
    tags = np.zeros((blocks, BLOCK), np.uint8)
    payloads = np.zeros((blocks, BLOCK), np.uint32)
    position, whole = _HEADER, 0
    while whole < blocks and position + 2 <= raw.size:
        word = int(raw[position]) | int(raw[position + 1]) << 8
        block_tags = ((word >> (2 * np.arange(BLOCK))) & 3).astype(np.uint8)
        if position + int(_BLOCK_BYTES[word]) > raw.size:
            break
        offset = position + 2
        for k, tag in enumerate(block_tags):
            size = int(PAYLOAD_BYTES[tag])
            payloads[whole, k] = int.from_bytes(raw[offset:offset + size].tobytes(), "little")
            offset += size
        tags[whole], position, whole = block_tags, offset, whole + 1
    complete = whole == blocks
    kept = count if complete else whole // (group_values // BLOCK) * group_values
    values = np.zeros(count, np.float32)
    values[:kept] = _decode(tags.reshape(-1)[:kept], payloads.reshape(-1)[:kept], bound_bits)
    bad = not complete or position != raw.size or bool(tags.reshape(-1)[count:].any())
    return values, bad


def _decode(tags, payloads, bound_bits):
    """Values of tags and payloads: the magnitudes times 2**-b or 2**-15 are exact."""
    small = tags == 1
    magnitude = np.where(small, payloads & ((1 << SMALL_BITS) - 1),
                         payloads & ((1 << LARGE_BITS) - 1)).astype(np.float32)
    magnitude *= np.where(small, np.float32(2.0 ** -bound_bits), np.float32(2.0 ** -LARGE_BITS))
    bits = magnitude.view(np.uint32)
    bits |= (np.where(small, payloads >> SMALL_BITS, payloads >> LARGE_BITS) & 1) << 31
    raw = tags == 3
    bits[raw] = payloads[raw]
    return magnitude
