"""codnn.golden.inceptionn against docs/semantics.md section 4 and a literal, one-value-at-a-time
codec."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codnn.golden.inceptionn import (
    CorruptMessage,
    classify,
    compress,
    compressed_size,
    decompress,
    received_values,
)

SPEC_VALUES = [1.5, 0.3, -0.01, 0.0005, -0.2, 0.004, -3.0, 0.0]
SPEC_BLOCK = "1b360000c03f66268a999904000040c0"


def literal_encode(bits, b):
    """docs/semantics.md's table for one float32 (as its 32 bits): (tag, payload bytes)."""
    s, e, sig = bits >> 31, (bits >> 23) & 0xFF, (bits & 0x7FFFFF) | 0x800000
    if e >= 127:
        return 3, struct.pack("<I", bits)
    if e < 127 - b:
        return 0, b""
    if e < 134 - b:
        return 1, bytes([s << 7 | sig >> (150 - e - b)])
    return 2, struct.pack("<H", s << 15 | sig >> (135 - e))


def literal_compress(bit_patterns, b):
    out = struct.pack("<I", len(bit_patterns))
    for start in range(0, len(bit_patterns), 8):
        coded = [literal_encode(v, b) for v in bit_patterns[start:start + 8]]
        word = sum(tag << 2 * i for i, (tag, _) in enumerate(coded))
        out += struct.pack("<H", word) + b"".join(payload for _, payload in coded)
    return out


def f32(values):
    return np.array(values, dtype=np.float32)


def test_spec_vector():
    message = compress(f32(SPEC_VALUES), 10)
    assert message.hex() == "08000000" + SPEC_BLOCK
    decoded = decompress(message, 10)
    expected = f32([1.5, 0x2666 / 2**15, -10 / 2**10, 0, -0x1999 / 2**15, 4 / 2**10, -3, 0])
    assert decoded.view(np.uint32).tolist() == expected.view(np.uint32).tolist()


@pytest.mark.parametrize("value, tag, payload", [
    (2.0 ** -10, 1, 1),
    (np.nextafter(np.float32(2.0 ** -10), np.float32(0)), 0, 0),
    (0.125, 2, 4096),
    (0.99999994, 2, 32767),
    (1.0, 3, 0x3F800000),
    (np.inf, 3, 0x7F800000),
])
def test_spec_edges(value, tag, payload):
    tags, payloads = classify(f32([value]), 10)
    assert (int(tags[0]), int(payloads[0])) == (tag, payload)


def test_nan_payloads_and_signed_zero_pass_or_vanish():
    bits = np.array([0x7FC00001, 0xFF800001, 0x80000000, 0x00000001, 0x80000001], np.uint32)
    decoded = decompress(compress(bits.view(np.float32), 12), 12).view(np.uint32)
    # NaNs (with their payloads) are sent raw; -0.0 and denormals decode to +0.0.
    assert decoded.tolist() == [0x7FC00001, 0xFF800001, 0, 0, 0]


@pytest.mark.parametrize("b", range(7, 16))
def test_matches_literal_codec_on_every_class_edge(b):
    # Every exponent, with the smallest, a middle and the largest significand, both signs.
    exponents = np.arange(256, dtype=np.uint32)
    mantissas = np.array([0, 0x2AAAAA, 0x7FFFFF], dtype=np.uint32)
    bits = (exponents[:, None, None] << 23 | mantissas[None, :, None]
            | np.array([0, 1 << 31], np.uint32)[None, None, :]).reshape(-1)
    message = compress(bits.view(np.float32), b)
    assert message == literal_compress(bits.tolist(), b)
    decoded = decompress(message, b)
    finite = np.isfinite(bits.view(np.float32))
    x, y = bits.view(np.float32)[finite], decoded[finite]
    small = np.abs(x) < 1
    assert np.all(np.abs(x[small].astype(np.float64) - y[small]) < 2.0 ** -b)
    assert np.array_equal(x[~small].view(np.uint32), y[~small].view(np.uint32))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=40), st.integers(7, 15))
def test_random_bit_patterns_match_literal_codec(patterns, b):
    bits = np.array(patterns, dtype=np.uint32)
    message = compress(bits.view(np.float32), b)
    assert message == literal_compress(patterns, b)
    low, high = compressed_size(len(patterns))
    assert low <= len(message) <= high


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-4, 4, width=32), max_size=50), st.integers(7, 15))
def test_round_trip_error_bound(values, b):
    x = f32(values)
    y = decompress(compress(x, b), b)
    small = np.abs(x) < 1
    assert np.all(np.abs(x[small].astype(np.float64) - y[small]) < 2.0 ** -b)
    assert np.array_equal(x[~small], y[~small])


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 4099])
def test_message_lengths(count):
    x = np.random.default_rng(count).normal(0, 0.2, count).astype(np.float32)
    message = compress(x)
    assert int.from_bytes(message[:4], "little") == count
    assert message == literal_compress(x.view(np.uint32).tolist(), 10)
    assert decompress(message).shape == (count,)


def test_corrupt_messages():
    message = compress(f32(SPEC_VALUES * 3), 10)
    with pytest.raises(CorruptMessage, match="no 4-byte count"):
        decompress(message[:3])
    with pytest.raises(CorruptMessage, match="cut at byte"):
        decompress(message[:-1])
    with pytest.raises(CorruptMessage, match="has no tag word"):
        decompress(message[:20])
    with pytest.raises(CorruptMessage, match="1 bytes past the last"):
        decompress(message + b"\0")
    # Count 7 where the block holds 8 values: the eighth has a nonzero tag.
    with pytest.raises(CorruptMessage, match="past the message's count"):
        decompress(compress(f32([1.0] * 8))[:0] + struct.pack("<I", 7)
                   + compress(f32([1.0] * 8))[4:])
    with pytest.raises(CorruptMessage, match="cut at byte"):
        decompress(struct.pack("<I", 2**32 - 1))


def test_bad_parameters():
    with pytest.raises(ValueError, match="must be an integer in 7..15, not 6"):
        compress(f32([0.5]), 6)
    with pytest.raises(ValueError, match="must be an integer in 7..15, not 16"):
        decompress(compress(f32([0.5])), 16)
    with pytest.raises(ValueError, match="not True"):
        compress(f32([0.5]), True)
    with pytest.raises(TypeError, match="must be float32, not float64"):
        compress(np.zeros(3))


@pytest.mark.parametrize("group", [8, 16])
def test_received_values_of_good_cut_and_garbage_messages(group):
    rng = np.random.default_rng(73)
    print("seed=73")
    x = (rng.normal(0, 0.1, 37) * rng.choice([1e-4, 1, 30], 37)).astype(np.float32)
    message = compress(x, 10)
    whole = decompress(message, 10)
    values, bad = received_values(message, 10, max_values=100, group_values=group)
    assert not bad and np.array_equal(values, whole)
    # Block k ends where the message of its first 8k + 8 values does (but the count).
    ends = [len(compress(x[:min(37, 8 * k + 8)], 10)) for k in range(5)]
    for cut in range(4, len(message)):
        values, bad = received_values(message[:cut], 10, max_values=100, group_values=group)
        blocks = sum(end <= cut for end in ends)
        kept = blocks // (group // 8) * group
        assert bad and values.shape == (37,)
        assert np.array_equal(values[:kept], whole[:kept])
        assert not values[kept:].any() and not np.signbit(values[kept:]).any()
    assert received_values(message[:3], 10, max_values=100) == (None, True)
    assert received_values(message, 10, max_values=36) == (None, True)
    values, bad = received_values(message + b"\x00", 10, max_values=100)
    assert bad and np.array_equal(values, whole)
    eight = compress(f32([1.0] * 8))
    values, bad = received_values(struct.pack("<I", 7) + eight[4:], 10, max_values=100)
    assert bad and np.array_equal(values, f32([1.0] * 7))
    with pytest.raises(ValueError, match="multiple of 8 values, not 12"):
        received_values(message, 10, max_values=100, group_values=12)
