"""The compiled codecs against their golden models: the INCEPTIONN-style codec
(codnn.distributed.fast_codec) and the Rice codec (codnn.distributed.fast_rice) give the
same message bytes for every value class, bound (and rounding), the same values back, and
the same verdict (values or CorruptMessage) on cut, padded, retagged and bit-flipped
messages (the Rice codec's with their CRC made right, so that its bit stream's own checks
are reached)."""

import zlib

import numpy as np
import pytest

from codnn.distributed import fast_codec, fast_rice
from codnn.golden import inceptionn as golden
from codnn.golden import rice as golden_rice
from codnn.golden.inceptionn import BOUND_BITS, CorruptMessage

SEED = 20261125


#: Values at the INCEPTIONN-style codec's class boundaries.
EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.99999994, 2.0 ** -7, 2.0 ** -15,
         2.0 ** -16, 1e-45, -2.0 ** -8)


def codec_values(rng, n, edges=EDGES, top=0.5):
    """float32 over every bit pattern (all exponents, NaN, Inf, subnormals, -0.0) mixed
    with gradient-like values up to ``10**top``, the ``edges`` first."""
    patterns = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    gradients = (rng.standard_normal(n) * 10.0 ** rng.uniform(-6, top, n)).astype(np.float32)
    x = np.where(rng.random(n) < 0.3, patterns, gradients)
    edges = np.array(edges, np.float32)
    x[:min(n, len(edges))] = edges[:n]
    return x


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000, 40_001])
def test_same_bytes_and_values_as_golden(n):
    rng = np.random.default_rng(SEED + n)
    print(f"seed {SEED + n}")
    x = codec_values(rng, n)
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
    message = golden.compress(codec_values(rng, 21), 10)
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


#: Values at the Rice codec's edges: its step at 2**-10, its largest coded magnitude.
RICE_EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 2.0 ** -10, 63.99, 64.0,
              -2.0 ** -11, 3 * 2.0 ** -11)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 8_001])
def test_rice_same_bytes_and_values_as_golden(n):
    rng = np.random.default_rng(SEED + n)
    print(f"seed {SEED + n}")
    x = codec_values(rng, n, RICE_EDGES, top=2)
    for b in (7, 10, 15):
        for rounding in golden_rice.ROUNDINGS:
            seed = 0xFFFF_FFFF - n % 7                # the counter wraps in the message
            message = golden_rice.compress(x, b, rounding, seed)
            assert fast_rice.compress(x, b, rounding, seed) == message, (b, rounding)
            assert np.array_equal(fast_rice.decompress(message).view(np.uint32),
                                  golden_rice.decompress(message).view(np.uint32)), \
                (b, rounding)


def _rice_verdict(codec, message):
    try:
        return codec.decompress(message).view(np.uint32).tolist()
    except CorruptMessage:
        return "corrupt"


def test_rice_same_verdict_on_broken_messages():
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    message = golden_rice.compress(codec_values(rng, 40, RICE_EDGES, top=2), 10)
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
    verdicts = [(_rice_verdict(golden_rice, m), _rice_verdict(fast_rice, m)) for m in broken]
    assert all(a == b for a, b in verdicts)
    assert sum(a == "corrupt" for a, _ in verdicts) > 100            # both kinds reached
    assert sum(a != "corrupt" for a, _ in verdicts) > 100


def test_rice_bad_arguments():
    with pytest.raises(ValueError, match="7..15"):
        fast_rice.compress(np.zeros(3, np.float32), 6)
    with pytest.raises(ValueError, match="Rounding"):
        fast_rice.compress(np.zeros(3, np.float32), 10, "down")
    with pytest.raises(CorruptMessage, match="shorter than its header"):
        fast_rice.decompress(b"\0")
    with pytest.raises(CorruptMessage, match="more than the 3 allowed"):
        fast_rice.decompress(golden_rice.compress(np.zeros(4, np.float32), 10), max_values=3)
