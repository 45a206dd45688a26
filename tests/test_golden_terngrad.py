"""codnn.golden.terngrad against docs/semantics.md section 5 and a literal per-element loop."""

import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codnn.golden.fmix32 import counter_uniforms
from codnn.golden.inceptionn import CorruptMessage
from codnn.golden.terngrad import (compress, decompress, message_size, received_values,
                                    tensor_scaler, ternarize)

SEED = 0x12345678


def literal_codes(g, seed, s):
    """docs/semantics.md's rule with exact rationals, one element at a time."""
    u = counter_uniforms(seed, len(g))
    out = []
    for value, draw in zip(g.tolist(), u.tolist()):
        survives = abs(Fraction(value)) * 2**24 > draw * Fraction(float(s))
        out.append(int(np.sign(value)) if survives else 0)
    return out


def test_spec_vector():
    g = np.array([0.3, -1.2, 0.05, 0.9, -0.6, 0.0], np.float32)
    assert counter_uniforms(SEED, 6).tolist() == [0xE37CD1, 0x597457, 0x008028, 0x61BF4F,
                                                  0x45B48B, 0xC18CBF]
    assert ternarize(g, SEED, np.float32(1.2)).tolist() == [0, -1, 1, 1, -1, 0]
    message = compress(g, SEED, np.float32(1.2))
    assert message == np.float32(1.2).tobytes() + struct.pack("<I", 6) + bytes.fromhex("5c03")
    assert compress(g, SEED) == message  # max|g| is 1.2
    assert decompress(message).tolist() == (np.float32(1.2) * np.float32(
        [0, -1, 1, 1, -1, 0])).tolist()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=30),
       st.integers(0, 2**32 - 1), st.floats(0, 2.0 ** 100, width=32))
def test_matches_exact_rational_rule(values, seed, s):
    g = np.array(values, np.float32)
    assert ternarize(g, seed, s).tolist() == literal_codes(g, seed, np.float32(s))


def test_threshold_is_exact_at_ties():
    # |g| * 2**24 == u * s exactly: the element is dropped; one ulp more and it survives.
    u0 = int(counter_uniforms(7, 1)[0])
    s = np.float32(1.0)
    g = np.float32(u0 * 2.0 ** -24)
    assert ternarize(np.array([g]), 7, s).tolist() == [0]
    assert ternarize(np.array([np.nextafter(g, np.float32(1))]), 7, s).tolist() == [1]
    assert ternarize(np.array([-np.nextafter(g, np.float32(1))]), 7, s).tolist() == [-1]


def test_values_beyond_the_scaler_always_survive_and_mean_is_unbiased():
    g = np.full(200_000, 0.25, np.float32)
    t = ternarize(g, 99, np.float32(1.0))
    assert abs(t.mean() - 0.25) < 0.005
    assert ternarize(np.array([3.0, -3.0], np.float32), 1, 1.0).tolist() == [1, -1]


def test_scalers():
    g = np.array([0.5, -2.0, 1.0, 0.0], np.float32)
    assert tensor_scaler(g) == np.float32(2.0)
    assert tensor_scaler(g, clip=2.5) == np.float32(2.5 * np.std(g.astype(np.float64)))
    assert tensor_scaler(np.zeros(0, np.float32)) == 0


@pytest.mark.parametrize("count", [0, 1, 3, 4, 5, 1001])
def test_round_trip_and_sizes(count):
    g = np.random.default_rng(count).normal(0, 1, count).astype(np.float32)
    message = compress(g, 3, clip=2.5)
    assert len(message) == message_size(count)
    s = np.frombuffer(message[:4], np.float32)[0]
    assert decompress(message).tolist() == (ternarize(g, 3, s) * s).astype(np.float32).tolist()


def test_bad_input():
    with pytest.raises(ValueError, match=r"2 NaN/Inf values \(first at index 1: nan\)"):
        compress(np.array([0.0, np.nan, np.inf], np.float32), 1)
    with pytest.raises(TypeError, match="must be float32"):
        compress(np.zeros(2), 1)
    with pytest.raises(ValueError, match="Scaler must be a finite float32 with its sign bit"):
        compress(np.zeros(2, np.float32), 1, scaler=-1.0)
    with pytest.raises(ValueError, match="Seed must lie in"):
        compress(np.zeros(2, np.float32), 2**32)
    with pytest.raises(ValueError, match="Clipping factor"):
        tensor_scaler(np.zeros(2, np.float32), clip=0)


def test_corrupt_messages():
    message = compress(np.array([0.5, -0.5, 1.0, -1.0, 0.1], np.float32), 1, 1.0)
    with pytest.raises(CorruptMessage, match="no 8-byte header"):
        decompress(message[:7])
    with pytest.raises(CorruptMessage, match="a count of 5 needs 10"):
        decompress(message[:-1])
    with pytest.raises(CorruptMessage, match="a count of 5 needs 10"):
        decompress(message + b"\0")
    with pytest.raises(CorruptMessage, match="Code 10"):
        decompress(message[:8] + b"\x02\x00")
    with pytest.raises(CorruptMessage, match="past the message's count"):
        decompress(message[:8] + message[8:9] + b"\x04")
    with pytest.raises(CorruptMessage, match="scaler is nan"):
        decompress(np.float32(np.nan).tobytes() + message[4:])


def test_received_values_of_good_cut_and_garbage_messages():
    rng = np.random.default_rng(71)
    print("seed=71")
    g = rng.normal(0, 1, 23).astype(np.float32)
    message = compress(g, 5, 1.0)                   # 8 + 6 code bytes
    values, bad = received_values(message, max_values=100)
    assert not bad and np.array_equal(values, decompress(message))
    # Cut: every whole code byte's 4 values, then +0.0 up to the count.
    for cut in range(8, len(message)):
        values, bad = received_values(message[:cut], max_values=100)
        kept = 4 * (cut - 8)
        assert bad and values.shape == (23,)
        assert np.array_equal(values[:kept], decompress(message)[:kept])
        assert not values[kept:].any() and not np.signbit(values[kept:]).any()
    assert received_values(message[:7], max_values=100) == (None, True)
    assert received_values(message, max_values=22) == (None, True)
    # Bytes past the codes are dropped; code 10 is +0.0; an unusable scaler zeroes all.
    values, bad = received_values(message + b"\x01", max_values=100)
    assert bad and np.array_equal(values, decompress(message))
    ten = message[:8] + bytes([0b10]) + message[9:]
    values, bad = received_values(ten, max_values=100)
    assert bad and values[0] == 0 and not np.signbit(values[0])
    assert np.array_equal(values[4:], decompress(message)[4:])
    values, bad = received_values(np.float32(-0.0).tobytes() + message[4:], max_values=100)
    assert bad and not values.any() and not np.signbit(values).any()
    # A nonzero code past the count: the values stand, the message is bad.
    stray = message[:-1] + bytes([message[-1] | 0b01 << 6])
    values, bad = received_values(stray, max_values=100)
    assert bad and np.array_equal(values, decompress(message))
