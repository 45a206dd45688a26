"""Block floating point with stochastic rounding, after FAST (Zhang, McDanel, Kung, HPCA
2022), as codnn defines it (docs/semantics.md section 8).

A block is ``g`` values along the last axis (16 by default; the last block is padded with
zeros). Inputs are float32. Every nonzero value ``|x| = S * 2**q`` (``S`` its integer
significand, hidden bit included; ``e = floor(log2 |x|)``); the block's shared exponent
``E`` is the largest ``e`` of its nonzero values, at least ``EXPONENT_MIN`` (an all-zero
block has ``E = EXPONENT_MIN``). With ``m`` magnitude bits the step is ``2**(E - m + 1)``,
so the largest value of a block keeps its top ``m`` significant bits. Each magnitude is
first cut to ``NOISE_BITS`` fraction bits below the step, ``A = floor(|x| / step *
2**NOISE_BITS)`` (exact: a shift of ``S``), then rounded::

    nearest:     M = min((A + 2**(NOISE_BITS - 1)) >> NOISE_BITS, 2**m - 1)
    stochastic:  M = min((A + r) >> NOISE_BITS,                   2**m - 1)

with ``r`` the top ``NOISE_BITS`` bits of ``fmix32((seed + i) mod 2**32)``, ``i`` the
value's index in the flattened input (``codnn.golden.fmix32.counter_uniforms``, TernGrad's
stream). The value is ``sign * M * step``. Stochastic rounding is unbiased up to the cut:
of the ``2**NOISE_BITS`` noise values, exactly ``A mod 2**NOISE_BITS`` round up.
"""

import numpy as np

from .fmix32 import counter_uniforms, fmix32
from .term_quant import group, ungroup

__all__ = ["GROUP", "NOISE_BITS", "EXPONENT_MIN", "EXPONENT_MAX", "MANTISSA_BITS",
           "ROUNDINGS", "noise", "to_block_float", "from_block_float", "block_float",
           "block_dot", "relative_improvement", "threshold", "choose_mantissa"]

#: Values per block (FAST's default).
GROUP = 16
#: Fraction bits kept below the step before rounding: the width of the random noise.
NOISE_BITS = 8
#: Range of the shared exponent (8-bit two's complement); float32 values never exceed it.
EXPONENT_MIN, EXPONENT_MAX = -128, 127
#: Mantissa widths (magnitude bits; the sign is separate).
MANTISSA_BITS = range(1, 24)
ROUNDINGS = ("nearest", "stochastic")


def _check(m, g, rounding):
    if not isinstance(m, (int, np.integer)) or m not in MANTISSA_BITS:
        raise ValueError(f"Mantissa width must be an integer in 1..23, not {m!r}")
    if not isinstance(g, (int, np.integer)) or g < 1:
        raise ValueError(f"Block size must be a positive integer, not {g!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"Rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")


def noise(seed, count):
    """The ``NOISE_BITS``-bit random numbers ``r_0 .. r_(count-1)`` of ``seed``."""
    return (counter_uniforms(seed, count) >> np.uint32(24 - NOISE_BITS)).astype(np.int64)


def _float32_parts(x):
    """Sign (bool), significand ``S`` and power ``q`` (``|x| = S * 2**q``), and
    ``floor(log2 |x|)`` of float32 values (zero: ``S = 0``, exponent ``EXPONENT_MIN``)."""
    bits = x.view(np.uint32).astype(np.int64)
    biased, fraction = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    normal = biased > 0
    S = np.where(normal, fraction | (1 << 23), fraction)
    q = np.where(normal, biased - 150, -149)
    top = np.frexp(S.astype(np.float64))[1] - 1            # floor(log2 S), exact
    exponent = np.where(S > 0, q + top, EXPONENT_MIN)
    return (bits >> 31).astype(bool), S, q, exponent


def to_block_float(x, m, *, g=GROUP, rounding="nearest", seed=0):
    """Block floating point of ``x`` (float32, or anything that converts to it exactly).

    Returns ``(E, M)``: the shared exponents (int64, ``x.shape[:-1] + (blocks,)``) and the
    signed mantissas (int64, ``x.shape[:-1] + (blocks, g)``, magnitudes below ``2**m``).

    Raises
    ------
    ValueError
        For NaN or infinite values, a mantissa width outside 1..23, a block size below 1
        or an unknown rounding.
    """
    _check(m, g, rounding)
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError("Values must have a block axis (the last one)")
    x32 = x.astype(np.float32)
    if not np.all(np.isfinite(x32)):
        raise ValueError("Values to convert must be finite (found NaN or infinity)")
    sign, S, q, exponent = _float32_parts(x32)
    r = (noise(seed, x32.size).reshape(x32.shape) if rounding == "stochastic"
         else np.full(x32.shape, 1 << (NOISE_BITS - 1), dtype=np.int64))
    sign, S, q, exponent, r = (group(a, g) for a in (sign, S, q, exponent, r))
    E = np.maximum(np.where(S > 0, exponent, EXPONENT_MIN).max(axis=-1),  # padding: S = 0
                   EXPONENT_MIN)
    M = _round(S, q - (E[..., None] - m + 1), r, m)
    return E, np.where(sign, -M, M)


def _round(S, shift, r, m):
    """The rounding rule: ``A = floor(S * 2**(shift + NOISE_BITS))``, then
    ``min((A + r) >> NOISE_BITS, 2**m - 1)``."""
    shift = shift + NOISE_BITS
    A = np.where(shift >= 0, S << np.clip(shift, 0, 62), S >> np.clip(-shift, 0, 62))
    return np.minimum((A + r) >> NOISE_BITS, (1 << m) - 1)


def block_dot(Ea, Ma, Eb, Mb, m, out_m, counters, stochastic=True):
    """The dot product of blocks ``(Ea, Ma)`` and ``(Eb, Mb)`` (``to_block_float``'s form,
    ``m``-bit mantissas; ``Ma``, ``Mb``: ``n x g``), each rounded to one value of
    ``out_m`` magnitude bits: the BFP MAC unit's result (``codnn.hw.bfp.BlockDot``).

    ``P = sum_j Ma_j Mb_j`` (exact) is worth ``P * 2**q``, ``q = Ea + Eb - 2m + 2``. The
    result is ``(E, M)`` worth ``M * 2**(E - out_m + 1)``: ``E = q + floor(log2 |P|)``
    and ``M`` rounded from ``|P|`` by ``to_block_float``'s rule with the random byte
    ``fmix32(counter) >> 24`` where ``stochastic``, else half; ``P = 0`` gives ``(0, 0)``.

    Raises
    ------
    ValueError
        For widths outside 1..23, exponents outside ``EXPONENT_MIN..EXPONENT_MAX``,
        mantissas of ``2**m`` or more, shapes that differ, or counters outside 32 bits.
    """
    for width in (m, out_m):
        _check(width, 1, "nearest")
    Ea, Eb = np.asarray(Ea, np.int64), np.asarray(Eb, np.int64)
    Ma, Mb = np.asarray(Ma, np.int64), np.asarray(Mb, np.int64)
    if Ma.shape != Mb.shape or Ma.ndim != 2 or Ea.shape != Eb.shape != Ma.shape[:1]:
        raise ValueError(f"Blocks must be n x g with n exponents each, not {Ma.shape}, "
                         f"{Mb.shape}, {Ea.shape}, {Eb.shape}")
    if np.any(np.abs(Ma) >= 1 << m) or np.any(np.abs(Mb) >= 1 << m):
        raise ValueError(f"Mantissas must lie in -{(1 << m) - 1}..{(1 << m) - 1}")
    for E in (Ea, Eb):
        if np.any(E < EXPONENT_MIN) or np.any(E > EXPONENT_MAX):
            raise ValueError(f"Exponents must lie in {EXPONENT_MIN}..{EXPONENT_MAX}")
    r = np.where(stochastic, fmix32(counters).astype(np.int64) >> (32 - NOISE_BITS),
                 1 << (NOISE_BITS - 1))
    P = (Ma * Mb).sum(axis=1)
    S = np.abs(P)
    top = np.frexp(S.astype(np.float64))[1] - 1                 # floor(log2 |P|), exact
    M = np.where(S > 0, _round(S, out_m - 1 - top, r, out_m), 0)
    E = np.where(S > 0, Ea + Eb - 2 * m + 2 + top, 0)
    return E, np.where(P < 0, -M, M)


def from_block_float(E, M, m, size):
    """The float64 values of ``(E, M)`` (``to_block_float``'s), the last axis cut to
    ``size`` (the unpadded length)."""
    E, M = np.asarray(E), np.asarray(M)
    return ungroup(np.ldexp(M.astype(np.float64), (E - m + 1)[..., None]), size)


def block_float(x, m, *, g=GROUP, rounding="nearest", seed=0):
    """``x`` through block floating point and back: the values the blocks hold."""
    x = np.asarray(x)
    E, M = to_block_float(x, m, g=g, rounding=rounding, seed=seed)
    return from_block_float(E, M, m, x.shape[-1])


def relative_improvement(x, m, *, g=GROUP):
    """FAST's precision test: ``sum |bfp(x, m+2) - bfp(x, m)| / sum |bfp(x, m)|`` (nearest
    rounding; 0 when ``bfp(x, m)`` is all zero). The denominator sums magnitudes (codnn's
    choice: a signed sum can cancel to nearly zero)."""
    low, high = block_float(x, m, g=g), block_float(x, m + 2, g=g)
    total = float(np.abs(low).sum())
    return float(np.abs(high - low).sum()) / total if total else 0.0


def threshold(layer, layers, step, steps, a, b):
    """``eps = a - b * step/steps - b * layer/layers``: it falls over training and with
    depth, so later steps and deeper layers take more precision."""
    return a - b * step / steps - b * layer / layers


def choose_mantissa(x, eps, *, widths=(2, 4, 6, 8), g=GROUP):
    """The narrowest width of ``widths`` whose step to the next one improves ``x`` by at
    most ``eps`` (``relative_improvement``), else the widest."""
    for low, high in zip(widths, widths[1:]):
        if high != low + 2:
            raise ValueError(f"Widths must rise by 2, not {widths!r}")
        if relative_improvement(x, low, g=g) <= eps:
            return low
    return widths[-1]
