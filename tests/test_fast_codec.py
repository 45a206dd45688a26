"""The compiled INCEPTIONN-style codec (codnn.distributed.fast_codec) against the golden
model: the same message bytes for every value class and bound, the same values back, and
the same verdict (values or CorruptMessage) on cut, padded, retagged and bit-flipped
messages."""

import numpy as np
import pytest

from codnn.distributed import fast_codec
from codnn.golden import inceptionn as golden
from codnn.golden.inceptionn import BOUND_BITS, CorruptMessage

SEED = 20261125


def _values(rng, n):
    """float32 over every bit pattern (all exponents, NaN, Inf, subnormals, -0.0) mixed
    with gradient-like values around each class boundary."""
    patterns = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    gradients = (rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 0.5, n)).astype(np.float32)
    x = np.where(rng.random(n) < 0.3, patterns, gradients)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.99999994, 2.0 ** -7,
                      2.0 ** -15, 2.0 ** -16, 1e-45, -2.0 ** -8], np.float32)
    x[:min(n, len(edges))] = edges[:n]
    return x


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000, 40_001])
def test_same_bytes_and_values_as_golden(n):
    rng = np.random.default_rng(SEED + n)
    print(f"seed {SEED + n}")
    x = _values(rng, n)
    for b in BOUND_BITS:
        message = golden.compress(x, b)
        assert fast_codec.compress(x, b) == message, b
        assert np.array_equal(fast_codec.decompress(message, b).view(np.uint32),
                              golden.decompress(message, b).view(np.uint32)), b


def _verdict(codec, message, b):
    try:
        return codec.decompress(message, b).view(np.uint32).tolist()
    except CorruptMessage:
        return "corrupt"


def test_same_verdict_on_broken_messages():
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    message = golden.compress(_values(rng, 21), 10)
    broken = [message[:k] for k in range(len(message))]              # every cut
    broken += [message + b"\0", message + bytes([0xFF, 0xFF])]       # bytes past the end
    for _ in range(2000):                                            # bit flips
        flipped = bytearray(message)
        for _ in range(rng.integers(1, 4)):
            flipped[rng.integers(0, len(flipped))] ^= 1 << int(rng.integers(0, 8))
        broken.append(bytes(flipped))
    count_only = (3).to_bytes(4, "little") + bytes([0b11000000, 0])  # tag on value 3 of 3
    broken.append(count_only + bytes(4))
    verdicts = [(_verdict(golden, m, 10), _verdict(fast_codec, m, 10)) for m in broken]
    assert all(a == b for a, b in verdicts)
    assert sum(a == "corrupt" for a, _ in verdicts) > 100            # both kinds reached
    assert sum(a != "corrupt" for a, _ in verdicts) > 100


def test_bad_arguments():
    with pytest.raises(TypeError, match="float32"):
        fast_codec.compress(np.zeros(3), 10)
    with pytest.raises(ValueError, match="7..15"):
        fast_codec.compress(np.zeros(3, np.float32), 6)
    with pytest.raises(ValueError, match="7..15"):
        fast_codec.decompress(b"\0\0\0\0", 16)
    with pytest.raises(CorruptMessage, match="no 4-byte count"):
        fast_codec.decompress(b"\0", 10)
