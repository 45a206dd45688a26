"""The counter-based hash ``fmix32`` (docs/semantics.md section 5) and the random stream
built on it.

``fmix32`` is MurmurHash3's 32-bit finalizer::

    h ^= h >> 16; h *= 0x85EBCA6B; h ^= h >> 13; h *= 0xC2B2AE35; h ^= h >> 16   (mod 2**32)

TernGrad draws its random numbers from it, indexed by element: ``u_i = fmix32((seed + i) mod
2**32) >> 8`` (24 bits), so an engine with any number of lanes produces the same stream.
"""

import numpy as np

__all__ = ["FMIX32_C1", "FMIX32_C2", "fmix32", "counter_uniforms"]

#: First multiplier of the finalizer.
FMIX32_C1 = 0x85EBCA6B
#: Second multiplier of the finalizer.
FMIX32_C2 = 0xC2B2AE35

_MASK32 = np.uint64(0xFFFF_FFFF)


def _as_uint32(values, what):
    array = np.asarray(values)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{what} must be integers, not {array.dtype}")
    if array.size and (array.min() < 0 or array.max() > 0xFFFF_FFFF):
        raise ValueError(f"{what} must lie in 0..2**32-1")
    return array.astype(np.uint64)


def fmix32(values):
    """Apply ``fmix32`` element-wise.

    Parameters
    ----------
    values : int or array_like of int
        Unsigned 32-bit inputs.

    Returns
    -------
    numpy.ndarray of uint32
        Same shape as ``values``.

    Raises
    ------
    TypeError
        If ``values`` are not integers.
    ValueError
        If a value lies outside 0..2**32-1.
    """
    h = _as_uint32(values, "fmix32 inputs")
    # Products of two 32-bit numbers fit in uint64, so masking after each one is exact.
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(FMIX32_C1)) & _MASK32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(FMIX32_C2)) & _MASK32
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32)


def counter_uniforms(seed, count, start=0):
    """Return the 24-bit random numbers ``u_start .. u_(start+count-1)`` of a seed.

    ``u_i = fmix32((seed + i) mod 2**32) >> 8``.

    Raises
    ------
    ValueError
        If ``seed`` is outside 0..2**32-1 or ``count``/``start`` is negative.
    """
    seed = int(_as_uint32(seed, "Seed"))
    if count < 0 or start < 0:
        raise ValueError(f"Count and start must be non-negative, not {count!r} and {start!r}")
    counters = (np.arange(start, start + count, dtype=np.uint64) + np.uint64(seed)) & _MASK32
    return (fmix32(counters) >> np.uint32(8)).astype(np.uint32)
