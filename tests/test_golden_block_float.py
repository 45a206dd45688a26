"""Block floating point (codnn.golden.block_float) against an independent exact reference in
Python fractions, stochastic rounding against its noise stream, the edges (subnormals,
-0.0, the largest float32, all-zero and padded blocks, counters that wrap) and the FAST
precision policy."""

import math
from fractions import Fraction

import numpy as np
import pytest

from codnn.golden.block_float import (
    EXPONENT_MIN,
    NOISE_BITS,
    block_dot,
    block_float,
    choose_mantissa,
    from_block_float,
    noise,
    relative_improvement,
    threshold,
    to_block_float,
)
from codnn.golden.fmix32 import fmix32

SEED = 20261125


def _reference(x, m, g, noise_values):
    """One row of float32 values, block by block, in exact arithmetic."""
    out = []
    for start in range(0, len(x), g):
        block = [Fraction(float(v)) for v in x[start:start + g]]
        exponents = [math.frexp(float(v))[1] - 1 for v in block if v != 0]
        E = max(exponents + [EXPONENT_MIN])
        step = Fraction(2) ** (E - m + 1)
        for k, v in enumerate(block):
            A = math.floor(abs(v) / step * 2 ** NOISE_BITS)
            M = min((A + noise_values[start + k]) >> NOISE_BITS, 2 ** m - 1)
            out.append(float((M if v >= 0 else -M) * step))
    return np.array(out)


def _edges(rng, n):
    """float32 values over the whole range: every exponent, subnormals, zeros of both
    signs, the largest and smallest magnitudes."""
    x = (rng.choice([-1, 1], n) * rng.uniform(1, 2, n)
         * 2.0 ** rng.integers(-150, 128, n)).astype(np.float32)
    specials = np.array([0.0, -0.0, np.finfo(np.float32).max, -np.finfo(np.float32).max,
                         np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal,
                         1.0, -1.0, 0.75, 1.5], dtype=np.float32)
    x[:len(specials)] = specials
    return x


def test_worked_example():
    # docs/semantics.md section 8: E = 1 (3.0), m = 4, step 1/4
    x = np.array([1.0, 0.75, -0.1, 3.0, 0.0, -0.0, 1e-40, 2.5], dtype=np.float32)
    E, M = to_block_float(x, 4, g=8)
    assert E.tolist() == [1] and M.tolist() == [[4, 3, 0, 12, 0, 0, 0, 10]]
    assert from_block_float(E, M, 4, 8).tolist() == [1.0, 0.75, 0, 3.0, 0, 0, 0, 2.5]


@pytest.mark.parametrize("m, g", [(2, 16), (4, 16), (7, 5), (1, 1), (23, 3)])
def test_nearest_equals_the_exact_reference(m, g):
    rng = np.random.default_rng(SEED + m)
    print(f"seed {SEED + m}")
    for size in (1, g, 3 * g + 1):                     # one value, whole and padded blocks
        x = np.concatenate([_edges(rng, 40 * g), rng.normal(0, 1, size).astype(np.float32)])
        half = [1 << (NOISE_BITS - 1)] * len(x)
        assert np.array_equal(block_float(x, m, g=g), _reference(x, m, g, half))


def test_stochastic_rounding_uses_the_counter_stream():
    rng = np.random.default_rng(SEED)
    x = _edges(rng, 333)
    for seed in (0, 12345, 0xFFFF_FFFF - 100):       # the last wraps past 2**32
        r = noise(seed, len(x))
        expected = fmix32((seed + np.arange(len(x), dtype=np.uint64)) % (1 << 32)) >> 24
        assert np.array_equal(r, expected)
        got = block_float(x, 3, g=16, rounding="stochastic", seed=seed)
        assert np.array_equal(got, _reference(x, 3, 16, r.tolist()))


def test_stochastic_rounding_is_unbiased():
    x = np.full(1 << 16, 1.0 + 5 / 16 + 1 / 64, dtype=np.float32)   # between steps at m=3
    x[::16] = 1.5                                  # the block's largest: E = 0, step 1/4
    values = block_float(x, 3, rounding="stochastic", seed=SEED)
    chosen = np.ones(len(x), bool)
    chosen[::16] = False
    mean = values[chosen].mean()
    # E[value] = 1 + 5/16 + 1/64 exactly (its fraction fits in NOISE_BITS); the standard
    # error of the mean of 61,440 draws in {1.25, 1.5} is below 5e-4.
    assert abs(mean - (1 + 5 / 16 + 1 / 64)) < 2e-3
    assert set(np.unique(values[chosen])) == {1.25, 1.5}
    assert np.array_equal(block_float(x, 3), np.where(chosen, 1.25, 1.5))   # nearest


def test_blocks_of_zeros_and_the_largest_values():
    E, M = to_block_float(np.zeros((2, 20), np.float32), 4)
    assert (E == EXPONENT_MIN).all() and (M == 0).all()
    top = np.finfo(np.float32).max
    E, M = to_block_float(np.array([top, -top, 1.0], np.float32), 8)
    assert E.tolist() == [127] and M.tolist()[0][:3] == [255, -255, 0]
    # rounding up saturates instead of carrying into the exponent
    assert to_block_float(np.array([1.99], np.float32), 2)[1].tolist() == [[3] + [0] * 15]


@pytest.mark.parametrize("args, kwargs, message", [
    (([np.nan], 4), {}, "finite"), (([np.inf], 4), {}, "finite"),
    (([1.0], 0), {}, "Mantissa width"), (([1.0], 24), {}, "Mantissa width"),
    (([1.0], 4), {"g": 0}, "Block size"), (([1.0], 4), {"rounding": "up"}, "Rounding"),
    ((1.0, 4), {}, "block axis"),
])
def test_bad_input(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        to_block_float(np.asarray(args[0], dtype=np.float32), args[1], **kwargs)


def test_precision_policy():
    x = np.random.default_rng(SEED).normal(0, 1, (64, 64)).astype(np.float32)
    r = [relative_improvement(x, m) for m in (2, 4, 6)]
    assert r[0] > r[1] > r[2] > 0
    assert relative_improvement(np.zeros((2, 16)), 2) == 0.0
    assert choose_mantissa(x, 1.0) == 2 and choose_mantissa(x, 0.0) == 8
    assert choose_mantissa(x, (r[0] + r[1]) / 2) == 4
    assert threshold(0, 4, 0, 100, 0.2, 0.1) == pytest.approx(0.2)
    assert threshold(3, 4, 50, 100, 0.2, 0.1) == pytest.approx(0.2 - 0.05 - 0.075)
    with pytest.raises(ValueError, match="rise by 2"):
        choose_mantissa(x, 0.0, widths=(2, 3))


def _dot_reference(ea, ma, eb, mb, m, out_m, r):
    """One block's dot product rounded, in exact arithmetic."""
    q = int(ea) + int(eb) - 2 * m + 2
    P = sum(int(a) * int(b) for a, b in zip(ma, mb))
    if P == 0:
        return 0, 0
    value = Fraction(abs(P)) * Fraction(2) ** q
    E = q + abs(P).bit_length() - 1
    A = math.floor(value / Fraction(2) ** (E - out_m + 1) * 2 ** NOISE_BITS)
    M = min((A + r) >> NOISE_BITS, 2 ** out_m - 1)
    return E, M if P > 0 else -M


@pytest.mark.parametrize("g, m, out_m", [(16, 4, 8), (5, 2, 3), (3, 7, 12), (1, 1, 1)])
def test_block_dot_equals_the_exact_reference(g, m, out_m):
    rng = np.random.default_rng(SEED + g)
    n, top = 300, 2 ** m - 1
    Ma, Mb = rng.integers(-top, top + 1, (n, g)), rng.integers(-top, top + 1, (n, g))
    Ma[0], Mb[0] = top, top                              # the largest sum: saturates
    Ma[1] = 0                                            # nothing
    Ea, Eb = rng.integers(-128, 128, n), rng.integers(-128, 128, n)
    Ea[:2], Eb[:2] = -128, 127
    counters = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    stochastic = rng.integers(0, 2, n).astype(bool)
    E, M = block_dot(Ea, Ma, Eb, Mb, m, out_m, counters, stochastic)
    noise_bytes = fmix32(counters).astype(np.int64) >> 24
    for k in range(n):
        r = int(noise_bytes[k]) if stochastic[k] else 1 << (NOISE_BITS - 1)
        assert (E[k], M[k]) == _dot_reference(Ea[k], Ma[k], Eb[k], Mb[k], m, out_m, r), k


def test_block_dot_worked_example():
    # docs/semantics.md section 8: P = 4, q = -5, so E = -3 and M = 8 (0.125)
    E, M = block_dot([0], [[3, -1]], [1], [[2, 2]], 4, 4, [0], stochastic=False)
    assert (E.tolist(), M.tolist()) == ([-3], [8])


def test_block_dot_bad_input():
    ones = np.ones((1, 4), np.int64)
    with pytest.raises(ValueError, match="Mantissas"):
        block_dot([0], ones * 16, [0], ones, 4, 8, [0])
    with pytest.raises(ValueError, match="Exponents"):
        block_dot([128], ones, [0], ones, 4, 8, [0])
    with pytest.raises(ValueError, match="n x g"):
        block_dot([0], ones, [0], np.ones((1, 3)), 4, 8, [0])
