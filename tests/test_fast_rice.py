"""The compiled Rice codec (codnn.distributed.fast_rice) against golden.rice: the same
message bytes for every value class, bound and rounding, the same values back, and the
same verdict on broken messages (their CRC made right, so the bit stream's own checks
are reached)."""

import zlib

import numpy as np
import pytest

from codnn.distributed import fast_rice
from codnn.golden import rice as golden
from codnn.golden.inceptionn import CorruptMessage

SEED = 20261128


def _values(rng, n):
    """Every float32 bit pattern mixed with gradient-like values of every scale."""
    patterns = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    gradients = (rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 2, n)).astype(np.float32)
    x = np.where(rng.random(n) < 0.2, patterns, gradients)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 2.0 ** -10, 63.99, 64.0,
                      -2.0 ** -11, 3 * 2.0 ** -11], np.float32)
    x[:min(n, len(edges))] = edges[:n]
    return x


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 40_001])
def test_same_bytes_and_values_as_golden(n):
    rng = np.random.default_rng(SEED + n)
    print(f"seed {SEED + n}")
    x = _values(rng, n)
    for b in (7, 10, 15):
        for rounding in golden.ROUNDINGS:
            seed = 0xFFFF_FFFF - n % 7                # the counter wraps in the message
            message = golden.compress(x, b, rounding, seed)
            assert fast_rice.compress(x, b, rounding, seed) == message, (b, rounding)
            assert np.array_equal(fast_rice.decompress(message).view(np.uint32),
                                  golden.decompress(message).view(np.uint32)), (b, rounding)


def _verdict(codec, message):
    try:
        return codec.decompress(message).view(np.uint32).tolist()
    except CorruptMessage:
        return "corrupt"


def test_same_verdict_on_broken_messages():
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    message = golden.compress(_values(rng, 40), 10)
    body = message[:-4]
    broken = [message[:k] for k in range(len(message))] + [message + b"\0"]
    for _ in range(1500):                      # bit flips, the CRC made right again
        flipped = bytearray(body)
        for _ in range(rng.integers(1, 3)):
            at = int(rng.integers(5, len(flipped)))
            flipped[at] ^= 1 << int(rng.integers(0, 8))
        if rng.random() < 0.1:
            flipped += bytes([int(rng.integers(0, 256))])
        broken.append(bytes(flipped) + zlib.crc32(bytes(flipped)).to_bytes(4, "little"))
    verdicts = [(_verdict(golden, m), _verdict(fast_rice, m)) for m in broken]
    assert all(a == b for a, b in verdicts)
    assert sum(a == "corrupt" for a, _ in verdicts) > 100            # both kinds reached
    assert sum(a != "corrupt" for a, _ in verdicts) > 100


def test_bad_arguments():
    with pytest.raises(ValueError, match="7..15"):
        fast_rice.compress(np.zeros(3, np.float32), 6)
    with pytest.raises(ValueError, match="Rounding"):
        fast_rice.compress(np.zeros(3, np.float32), 10, "down")
    with pytest.raises(CorruptMessage, match="shorter than its header"):
        fast_rice.decompress(b"\0")
    with pytest.raises(CorruptMessage, match="more than the 3 allowed"):
        fast_rice.decompress(golden.compress(np.zeros(4, np.float32), 10), max_values=3)
