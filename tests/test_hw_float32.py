# amaranth: UnusedElaboratable=no
"""Float32Add and Float32Mul on Amaranth's simulator against NumPy's float32 arithmetic,
bit for bit: random operands of every class (zeros of both signs, subnormals, normals,
the largest finite values, infinities, NaNs); for the sum cancellations and exponent
distances at the sticky bit's edges, for the product exponents whose sum lands at
float32's edges (overflow, subnormal results, underflow to zero); ties to even; under
idle cycles and backpressure, one result a cycle without."""

import random

import numpy as np
import pytest

import operator

from codnn.hw.bfp.float32 import CANONICAL_NAN, Float32Add, Float32Mul
from codnn.sim.pysim import run_stream_test

SEED = 20261207


def _bits(x):
    return int(np.float32(x).view(np.uint32))


def _random_operand(rng):
    kind = rng.randrange(8)
    sign = rng.getrandbits(1) << 31
    if kind == 0:
        return sign                                                   # +-0
    if kind == 1:
        return sign | rng.randrange(1, 1 << 23)                       # subnormal
    if kind == 2:
        return sign | (254 << 23) | rng.getrandbits(23)               # near the largest
    if kind == 3:
        return sign | (0xFF << 23) | (rng.randrange(1, 1 << 23) if rng.random() < 0.5
                                      else 0)                          # NaN or inf
    if kind == 4:
        return sign | (rng.randrange(1, 4) << 23) | rng.getrandbits(23)  # smallest normals
    return sign | (rng.randrange(1, 255) << 23) | rng.getrandbits(23)


def _pairs(rng, count):
    pairs = []
    for _ in range(count):
        a = _random_operand(rng)
        form = rng.randrange(5)
        if form == 0:
            b = _random_operand(rng)
        elif form == 1:                            # cancellation: -(a +- a few ulps)
            b = ((a ^ (1 << 31)) + rng.randrange(-3, 4)) & 0xFFFFFFFF
        else:                                      # an exponent distance of 20..30
            exponent = (a >> 23) & 0xFF
            e = max(0, min(254, exponent - rng.randrange(20, 31)))
            b = (rng.getrandbits(1) << 31) | (e << 23) | rng.choice(
                [0, 1, 1 << 22, (1 << 23) - 1, rng.getrandbits(23)])
        pairs.append((a, b) if rng.random() < 0.5 else (b, a))
    return pairs


_EDGES = [
    (_bits(1.0), _bits(2.0 ** -24)),                  # a tie: stays at 1.0 (even)
    (_bits(1.0) + 1, _bits(2.0 ** -24)),              # a tie: rounds up to even
    (_bits(1.0), _bits(2.0 ** -24) + 1),              # just above the tie
    (_bits(3.4028235e38), _bits(3.4028235e38)),       # overflow to inf
    (_bits(3.4028235e38), _bits(2.0 ** 103)),         # half an ulp of the largest: inf
    (_bits(-3.4028235e38), _bits(-(2.0 ** 103))),
    (0x80000000, 0x80000000), (0x80000000, 0), (0, 0x80000000), (0, 0),
    (1, 0x80000001), (1, 1), (0x007FFFFF, 1), (0x007FFFFF, 0x007FFFFF),
    (0x00800000, 0x80000001), (0x7F800000, 0xFF800000), (0x7F800000, 0x7F800000),
    (0xFF800000, _bits(1.0)), (0x7FC00001, _bits(1.0)), (0x7F800001, 0xFF800000),
    (_bits(1.5), _bits(-1.5)), (_bits(2.0 ** 24), _bits(1.0)), (_bits(2.0 ** 24), _bits(3.0)),
]


_PRODUCT_EDGES = [
    (_bits(1.0 + 2.0 ** -23), _bits(1.0 + 2.0 ** -23)),   # 1 + 2 ulp + a bit below half
    (_bits(2.0 ** -75), _bits(2.0 ** -75)),               # 2**-150: a tie, to 0
    (_bits(3 * 2.0 ** -76), _bits(2.0 ** -75)),           # 1.5 * 2**-149: a tie, to 2
    (_bits(2.0 ** 64), _bits(2.0 ** 64)), (_bits(-3.0), _bits(2.0 ** 127)),
    (1, _bits(2.0 ** 23)), (1, _bits(0.5)), (0x007FFFFF, _bits(2.0)),
    (0x007FFFFF, 0x007FFFFF), (0x7F800000, 0), (0x80000000, 0x7F800000),
    (0x80000000, _bits(3.0)), (0x80000000, 0x80000000), (0xFF800000, _bits(-2.0)),
    (0x7FC00000, 0), (_bits(1.5), _bits(1.5)), (0x00800000, _bits(0.5 - 2.0 ** -25)),
]


def _product_pairs(rng, count):
    """Operands whose exponents sum near float32's edges, and any operands."""
    pairs = []
    for _ in range(count):
        if rng.random() < 0.5:
            a, b = _random_operand(rng), _random_operand(rng)
        else:
            ea = rng.randrange(0, 255)
            eb = max(0, min(254, rng.choice((127 - 126, 127 + 127, 127 - 149)) - ea + 127
                            + rng.randrange(-26, 27)))
            a = (rng.getrandbits(1) << 31) | (ea << 23) | rng.getrandbits(23)
            b = (rng.getrandbits(1) << 31) | (eb << 23) | rng.getrandbits(23)
        pairs.append((a, b))
    return pairs


def _expected(operation, a, b):
    with np.errstate(all="ignore"):
        result = operation(np.uint32(a).view(np.float32), np.uint32(b).view(np.float32))
    return CANONICAL_NAN if np.isnan(result) else int(np.float32(result).view(np.uint32))


def _check(unit, operation, pairs, idle, backpressure):
    out, cycles = run_stream_test(unit, [{"a": a, "b": b} for a, b in pairs],
                                  expected_count=len(pairs), rng=random.Random(SEED + 1),
                                  idle=idle, backpressure=backpressure)
    wrong = [(hex(a), hex(b), hex(int(got)), hex(_expected(operation, a, b)))
             for (a, b), got in zip(pairs, out) if int(got) != _expected(operation, a, b)]
    assert not wrong, f"{len(wrong)} wrong results, first: {wrong[:5]}"
    if not idle and not backpressure:
        assert cycles == len(pairs) + unit.latency


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.4)])
def test_sums_equal_numpy_float32(idle, backpressure):
    print(f"seed={SEED}")
    _check(Float32Add(), operator.add, _EDGES + _pairs(random.Random(SEED), 4000), idle,
           backpressure)


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.4)])
def test_products_equal_numpy_float32(idle, backpressure):
    print(f"seed={SEED}")
    pairs = _PRODUCT_EDGES + _product_pairs(random.Random(SEED), 4000)
    results = [_expected(operator.mul, a, b) for a, b in pairs]
    assert sum(0 < r & 0x7FFFFFFF < 1 << 23 for r in results) > 100   # subnormal products
    assert sum(r & 0x7FFFFFFF == 0x7F800000 for r in results) > 100  # overflow, infinities
    _check(Float32Mul(), operator.mul, pairs, idle, backpressure)
