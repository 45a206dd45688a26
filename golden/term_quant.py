"""Term quantization and term revealing (docs/semantics.md section 3).

Values are sign-magnitude integers with ``mag_bits`` magnitude bits. A value's terms are
the nonzero signed digits of its magnitude in an encoding (``binary``, ``naf`` or
``booth``), times its sign; digit ``e`` is worth ``2**e``, for ``e`` in ``0..mag_bits``
(NAF and Booth may use one digit past the top magnitude bit).

Term revealing keeps, in each group of ``g`` values, the ``alpha`` terms with the largest
exponents, ties at the waterline going to the lowest index in the group: the greedy
"take the largest next term" of docs/semantics.md, since a value's terms have distinct exponents.
It is computed level by level from the top exponent on bit masks of each value's digits:
every term above the waterline stays, and at the waterline exponent the first values (by
index) get the budget that is left.

Cost model: a term pair (one weight term times one data term) is one exponent addition;
a group of a dot product costs ``sum_j terms(w_j) * terms(x_j)`` pairs, at most
``alpha * beta``. In lockstep every group takes exactly ``alpha * beta`` tMAC cycles; the
parallel-MAC baseline takes ``g`` cycles (one product per cycle).
"""

import functools

import numpy as np

__all__ = ["ENCODINGS", "quantize", "digit_table", "terms", "digits", "reveal",
           "truncate", "kept_digits", "group_terms", "lockstep_pairs", "group", "ungroup",
           "term_counts", "term_pairs", "tmac_cycles", "pmac_cycles", "max_terms",
           "unfillable_budget"]

ENCODINGS = ("binary", "naf", "booth")

#: Chunk of values processed at once (bounds the memory of the level-by-level arrays).
_CHUNK = 1 << 20


def _check_mag_bits(mag_bits):
    if not isinstance(mag_bits, int) or isinstance(mag_bits, bool) or not 1 <= mag_bits <= 15:
        raise ValueError(f"Magnitude width must be an integer in 1..15, not {mag_bits!r}")


def _check_encoding(encoding):
    if encoding not in ENCODINGS:
        raise ValueError(f"Encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}")


def quantize(x, scale, mag_bits=7):
    """``sign(x) * min(floor(|x| / scale + 0.5), 2**mag_bits - 1)`` as int64.

    Raises
    ------
    ValueError
        If ``scale`` is not a positive finite number or ``x`` holds NaN or infinity.
    """
    _check_mag_bits(mag_bits)
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"Scale must be a positive finite number, not {scale!r}")
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("Values to quantize must be finite (found NaN or infinity)")
    magnitude = np.minimum(np.floor(np.abs(x) / scale + 0.5), (1 << mag_bits) - 1)
    return (np.sign(x) * magnitude).astype(np.int64)


@functools.cache
def digit_table(mag_bits, encoding):
    """Signed digits of every magnitude: int8 array ``(2**mag_bits, mag_bits + 1)``,
    column ``e`` the digit of ``2**e`` (-1, 0 or +1)."""
    _check_mag_bits(mag_bits)
    _check_encoding(encoding)
    v = np.arange(1 << mag_bits, dtype=np.int64)
    bits = (v[:, None] >> np.arange(mag_bits + 1)) & 1          # b_mag_bits is 0
    if encoding == "binary":
        table = bits
    elif encoding == "booth":
        previous = np.concatenate([np.zeros_like(bits[:, :1]), bits[:, :-1]], axis=1)
        table = previous - bits                                  # d_i = b_{i-1} - b_i
    else:                                                        # non-adjacent form
        table = np.zeros_like(bits)
        rest = v.copy()
        for e in range(mag_bits + 1):
            odd = (rest & 1).astype(bool)
            d = np.where(odd, 2 - (rest & 3), 0)                 # +1 if rest = 1 mod 4
            table[:, e] = d
            rest = (rest - d) >> 1
        assert not rest.any()
    table = table.astype(np.int8)
    table.flags.writeable = False
    return table


def max_terms(mag_bits=7, encoding="naf"):
    """The most terms any magnitude of ``mag_bits`` bits has in ``encoding`` (binary: 7 at
    7 bits; NAF and Booth: 4)."""
    return int((digit_table(mag_bits, encoding) != 0).sum(axis=1).max())


def unfillable_budget(g, alpha, encoding="naf", mag_bits=7):
    """Why a TQ array's weight-term budget has slots no group can fill, or None: ``alpha``
    above the most terms a group of ``g`` values has (``g * max_terms``). Such slots cost
    a cycle each a vector and change nothing. (A ``beta`` above ``max_terms`` costs
    nothing: it keeps every data term.)"""
    most = max_terms(mag_bits, encoding)
    if alpha > g * most:
        return (f"budget {alpha}: a group of {g} values has at most {g * most} terms in "
                f"{encoding} ({most} a value)")
    return None


def _check_values(values, mag_bits):
    values = np.asarray(values)
    if values.dtype.kind not in "iu" and values.size and not np.all(np.mod(values, 1) == 0):
        raise ValueError("Values must be integers (quantize them first)")
    values = values.astype(np.int64)
    top = (1 << mag_bits) - 1
    if values.size and np.abs(values).max() > top:
        worst = values.flat[np.abs(values).argmax()]
        raise ValueError(f"Values must lie in -{top}..{top} ({mag_bits} magnitude bits), "
                         f"found {int(worst)}")
    return values


def digits(values, mag_bits=7, encoding="naf"):
    """Signed digits of each value (sign applied): int8 array ``values.shape + (mag_bits+1,)``."""
    values = _check_values(values, mag_bits)
    return digit_table(mag_bits, encoding)[np.abs(values)] * np.sign(values)[..., None].astype(
        np.int8)


def terms(value, mag_bits=7, encoding="naf"):
    """Terms of one value as ``[(sign, exponent), ...]`` by descending exponent."""
    d = digits(np.array([value]), mag_bits, encoding)[0]
    return [(int(d[e]), e) for e in range(mag_bits, -1, -1) if d[e]]


@functools.cache
def _masks(mag_bits, encoding):
    """Per magnitude: bit masks of its +1 and -1 digits (int32 arrays)."""
    table = digit_table(mag_bits, encoding).astype(np.int32)
    weights = 1 << np.arange(mag_bits + 1, dtype=np.int32)
    return (table == 1) @ weights, (table == -1) @ weights


def _reveal_groups(values, alpha, mag_bits, encoding):
    """Keep the top ``alpha`` terms of each row of ``values`` (an ``(N, g)`` group block),
    level by level from the top exponent: every term there fits while the budget lasts,
    the lowest indices first."""
    plus, minus = _masks(mag_bits, encoding)
    magnitude = np.abs(values)
    plus, minus = plus[magnitude], minus[magnitude]
    present = plus | minus
    kept = np.zeros_like(present)
    left = np.full(len(values), alpha, dtype=np.int32)
    for e in range(mag_bits, -1, -1):
        bit = (present >> e) & 1
        if not bit.any():
            continue
        rank = np.cumsum(bit, axis=1, dtype=np.int32) - bit   # lower-index terms at e
        keep = bit & (rank < left[:, None])
        kept |= keep << e
        left -= keep.sum(axis=1, dtype=np.int32)
    counts = np.zeros(kept.shape, dtype=np.int64)
    for e in range(mag_bits + 1):
        counts += (kept >> e) & 1
    return np.sign(values) * ((kept & plus) - (kept & minus)), counts


def _check_budget(alpha, what="Budget"):
    if not isinstance(alpha, (int, np.integer)) or isinstance(alpha, bool) or alpha < 1:
        raise ValueError(f"{what} must be a positive integer, not {alpha!r}")


def reveal(values, alpha, encoding="naf", mag_bits=7, *, counts=False):
    """Term revealing: each group (the last axis, ``g`` values) keeps its ``alpha`` largest
    terms; returns the revealed values (int64, same shape) and, with ``counts``, the
    number of terms each value kept.

    A value keeps a prefix of its terms (largest first), so a revealed value can reach
    ``+-2**mag_bits`` with NAF or Booth (127 -> +128 -1 -> 128).

    Raises
    ------
    ValueError
        For a budget below 1, an unknown encoding, or values that are not integers in
        ``-(2**mag_bits - 1) .. 2**mag_bits - 1``.
    """
    _check_budget(alpha)
    _check_mag_bits(mag_bits)
    _check_encoding(encoding)
    values = _check_values(values, mag_bits)
    if values.ndim == 0:
        raise ValueError("Values must have a group axis (the last one)")
    flat = values.reshape(-1, values.shape[-1])
    out = np.empty(flat.shape, dtype=np.int64)
    kept = np.empty(flat.shape, dtype=np.int64)
    step = max(1, _CHUNK // max(1, flat.shape[1]))
    for start in range(0, len(flat), step):
        out[start:start + step], kept[start:start + step] = _reveal_groups(
            flat[start:start + step], alpha, mag_bits, encoding)
    out, kept = out.reshape(values.shape), kept.reshape(values.shape)
    return (out, kept) if counts else out


def truncate(values, beta, encoding="naf", mag_bits=7, *, counts=False):
    """Each value keeps its top ``beta`` terms (term revealing with groups of one); with
    ``counts``, also the number of terms each kept."""
    _check_budget(beta, "Data term budget")
    out, kept = reveal(np.asarray(values)[..., None], beta, encoding, mag_bits, counts=True)
    return (out[..., 0], kept[..., 0]) if counts else out[..., 0]


def kept_digits(values, alpha, encoding="naf", mag_bits=7):
    """Signed digits (int8, ``values.shape + (mag_bits + 1,)``) of the terms each value
    keeps when its group (the last axis) is revealed with budget ``alpha``."""
    d = digits(values, mag_bits, encoding)
    kept = reveal(values, alpha, encoding, mag_bits, counts=True)[1]
    present = d != 0
    above = np.cumsum(present[..., ::-1], axis=-1)[..., ::-1] - present   # terms above e
    return np.where(present & (above < kept[..., None]), d, 0).astype(np.int8)


def group_terms(values, alpha, encoding="naf", mag_bits=7):
    """The terms one group (a 1-D array of ``g`` values) keeps under budget ``alpha``, in
    the order term revealing takes them (exponent descending, lowest index first), as
    ``[(sign, exponent, index), ...]``: a tMAC's weight term queue."""
    values = _check_values(values, mag_bits)
    kept = reveal(values[None, :], alpha, encoding, mag_bits, counts=True)[1][0]
    chosen = [(sign, e, j) for j, v in enumerate(values)
              for sign, e in terms(int(v), mag_bits, encoding)[:kept[j]]]
    return sorted(chosen, key=lambda t: (-t[1], t[2]))


def lockstep_pairs(weights, data, alpha, beta, encoding="naf", mag_bits=7):
    """The term pairs a tMAC processes for one group in lockstep: ``alpha * beta`` slots,
    weight term ``i`` (of ``group_terms(weights, alpha)``) against data term ``k`` (of the
    top ``beta`` terms of the data value it belongs to), ``i`` outer. Each slot is
    ``(weight_exponent, data_exponent, negative)`` or None when either term is missing.
    The pairs sum to ``dot(reveal(weights), truncate(data))`` exactly."""
    data = _check_values(data, mag_bits)
    w_terms = group_terms(weights, alpha, encoding, mag_bits)
    x_terms = [terms(int(x), mag_bits, encoding)[:beta] for x in data]
    slots = []
    for i in range(alpha):
        for k in range(beta):
            if i < len(w_terms) and k < len(x_terms[w_terms[i][2]]):
                sw, ew, j = w_terms[i]
                sx, ex = x_terms[j][k]
                slots.append((ew, ex, sw * sx < 0))
            else:
                slots.append(None)
    return slots


def group(matrix, g):
    """Cut the last axis of ``matrix`` (the dot-product axis) into groups of ``g``:
    ``(..., K)`` -> ``(..., ceil(K/g), g)``. When ``g`` does not divide ``K`` the last
    group is padded with zeros (zeros have no terms, so they cost nothing and change no
    result); ``ungroup`` drops the padding."""
    if not isinstance(g, int) or isinstance(g, bool) or g < 1:
        raise ValueError(f"Group size must be a positive integer, not {g!r}")
    matrix = np.asarray(matrix)
    K = matrix.shape[-1]
    pad = -K % g
    if pad:
        matrix = np.concatenate([matrix, np.zeros(matrix.shape[:-1] + (pad,), matrix.dtype)],
                                axis=-1)
    return matrix.reshape(matrix.shape[:-1] + ((K + pad) // g, g))


def ungroup(grouped, K):
    """Inverse of ``group``: ``(..., n, g)`` -> ``(..., K)``."""
    grouped = np.asarray(grouped)
    return grouped.reshape(grouped.shape[:-2] + (-1,))[..., :K]


def term_counts(values, encoding="naf", mag_bits=7):
    """Number of terms of each value (int64, same shape)."""
    return (digits(values, mag_bits, encoding) != 0).sum(axis=-1).astype(np.int64)


def term_pairs(weight_terms, data_terms):
    """Term-pair multiplications of a matrix product ``W @ X`` from the term counts of its
    operands (``(M, K)`` and ``(K, T)``): the sum over every product ``w[m,k] * x[k,t]``
    of ``terms(w) * terms(x)``."""
    return int(np.asarray(weight_terms, dtype=np.int64).sum(axis=0)
               @ np.asarray(data_terms, dtype=np.int64).sum(axis=1))


def tmac_cycles(groups, alpha, beta):
    """tMAC cycles in lockstep for ``groups`` groups: ``alpha * beta`` each."""
    return groups * alpha * beta


def pmac_cycles(groups, g):
    """Parallel-MAC cycles for ``groups`` groups of ``g``: one product per cycle."""
    return groups * g
