"""codnn.golden.fmix32 against docs/semantics.md section 5 and an independent scalar
implementation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codnn.golden.fmix32 import counter_uniforms, fmix32


def scalar_fmix32(h):
    """MurmurHash3's finalizer on one Python int, written out step by step."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) % 2**32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) % 2**32
    h ^= h >> 16
    return h


def test_spec_vector_seed_0x12345678():
    u = counter_uniforms(0x12345678, 6)
    assert [int(x) for x in u] == [0xE37CD1, 0x597457, 0x008028, 0x61BF4F, 0x45B48B, 0xC18CBF]


def test_zero_is_a_fixed_point():
    assert int(fmix32(0)) == 0


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=50))
def test_vectorized_equals_scalar(values):
    assert [int(x) for x in fmix32(values)] == [scalar_fmix32(v) for v in values]


def test_shape_and_dtype_are_kept():
    out = fmix32(np.arange(12, dtype=np.uint32).reshape(3, 4))
    assert out.shape == (3, 4) and out.dtype == np.uint32


def test_counter_wraps_modulo_2_32():
    u = counter_uniforms(2**32 - 2, 4)
    expected = [scalar_fmix32(c) >> 8 for c in (2**32 - 2, 2**32 - 1, 0, 1)]
    assert [int(x) for x in u] == expected


def test_counter_start_offsets_the_stream():
    whole = counter_uniforms(7, 10)
    assert np.array_equal(counter_uniforms(7, 4, start=6), whole[6:])
    assert counter_uniforms(7, 0).size == 0


@pytest.mark.parametrize("bad", [-1, 2**32])
def test_out_of_range_inputs_raise(bad):
    with pytest.raises(ValueError, match=r"must lie in 0\.\.2\*\*32-1"):
        fmix32([bad])


@pytest.mark.parametrize("bad", [[1.5], [True]])
def test_non_integer_inputs_raise(bad):
    with pytest.raises(TypeError, match="must be integers"):
        fmix32(bad)


def test_negative_count_raises():
    with pytest.raises(ValueError, match="non-negative"):
        counter_uniforms(1, -1)


def test_bad_seed_raises():
    with pytest.raises(ValueError, match="Seed must lie"):
        counter_uniforms(2**32, 1)
