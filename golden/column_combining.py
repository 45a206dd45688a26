"""Column combining: packing a sparse layer into fewer array columns (docs/semantics.md section 1).

A layer is a filter matrix ``F`` (``N x C``: rows are filters, columns input channels). Up to
``alpha`` sparse columns are combined into one group (one array column fed by ``alpha`` data
streams); a group may hold at most ``int(gamma * N)`` conflicts, a conflict being a second
nonzero of a row inside the group. Grouping is the authors' greedy algorithm, run on
sections of 256 columns; conflict pruning then keeps the largest-magnitude weight of every
(row, group).

The packed form: ``P[r, g]`` the kept weight (0 if none), ``idx[r, g]`` its column's
position inside group ``g`` (0 for an empty cell), ``groups[g]`` the original column
indices. Then ``y[r] = sum_g P[r, g] * x[groups[g][idx[r, g]]]`` equals the conflict-pruned
dense product exactly.

**(ours)**: the packed form keeps all ``N`` rows (an all-zero row yields an all-zero packed
row), so packing efficiency is ``nonzeros / (N * groups)`` and tiles count all rows.

Cost: grouping a section of ``m`` nonzero columns and ``N`` rows takes ``O(m^2 N)`` for the
first conflict matrix, then ``O(m N + m^2)`` per merge (only the merged group's row and
column of the matrices change).
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["SECTION", "PackedLayer", "group_columns", "pack", "tiles", "dense_tiles",
           "conv_weight_matrix", "expand_groups", "collapse_groups", "im2col",
           "output_size", "output_shape", "padding_sides", "padding_value"]

#: Columns per independently grouped section.
SECTION = 256


@dataclass(frozen=True)
class PackedLayer:
    """A column-combined layer.

    Attributes
    ----------
    P : numpy.ndarray, shape (N, G)
        Kept weight of each (row, group), 0 where none.
    idx : numpy.ndarray of int, shape (N, G)
        Position inside the group of the column each weight came from (0 where empty).
    groups : tuple of tuple of int
        Original column indices of each group, in merge order.
    alpha, gamma : the packing parameters.
    columns : int
        Columns of the original layer (``C``).
    pruned : int
        Nonzero weights removed by conflict pruning.
    """

    P: np.ndarray
    idx: np.ndarray
    groups: tuple
    alpha: int
    gamma: float
    columns: int
    pruned: int

    @property
    def rows(self):
        return self.P.shape[0]

    @property
    def nonzeros(self):
        return int(np.count_nonzero(self.P))

    @property
    def efficiency(self):
        """Packing efficiency: nonzeros / (rows x groups); 0 for an empty layer."""
        cells = self.P.size
        return self.nonzeros / cells if cells else 0.0

    def channel_matrix(self):
        """Original column index of every cell (``groups[g][idx[r, g]]``), shape (N, G)."""
        table = _group_table(self.groups, self.alpha)
        return np.take_along_axis(table[None, :, :].repeat(self.rows, 0),
                                  self.idx[:, :, None], axis=2)[:, :, 0]

    def dense(self):
        """The conflict-pruned layer as an ``N x C`` matrix."""
        out = np.zeros((self.rows, self.columns), dtype=self.P.dtype)
        rows, cols = np.nonzero(self.P)
        out[rows, self.channel_matrix()[rows, cols]] = self.P[rows, cols]
        return out

    def to_arrays(self):
        """The packed layer as plain arrays: ``P``, ``idx``, ``groups`` (``G x alpha``
        column indices, -1 padded) and ``meta`` (``[alpha, gamma, columns, pruned]``)."""
        return {"P": self.P, "idx": self.idx, "groups": _group_table(self.groups, self.alpha),
                "meta": np.array([self.alpha, self.gamma, self.columns, self.pruned],
                                 dtype=np.float64)}

    @classmethod
    def from_arrays(cls, arrays):
        """Rebuild a packed layer from ``to_arrays``'s arrays.

        Raises
        ------
        ValueError
            If the arrays are missing or inconsistent.
        """
        try:
            P, idx, table, meta = (np.asarray(arrays[k]) for k in ("P", "idx", "groups",
                                                                   "meta"))
        except KeyError as missing:
            raise ValueError(f"packed layer lacks its {missing.args[0]!r} array") from None
        if P.ndim != 2 or idx.shape != P.shape or table.ndim != 2 or meta.shape != (4,) \
                or table.shape[0] != P.shape[1]:
            raise ValueError(f"packed layer arrays do not match: P {P.shape}, idx "
                             f"{idx.shape}, groups {table.shape}, meta {meta.shape}")
        alpha, gamma, columns, pruned = int(meta[0]), float(meta[1]), int(meta[2]), int(meta[3])
        groups = tuple(tuple(int(c) for c in row if c >= 0) for row in table)
        if table.shape[1] != alpha or (idx.size and (idx.min() < 0 or idx.max() >= alpha)) \
                or any(not g or max(g) >= columns for g in groups):
            raise ValueError("packed layer groups or selects are out of range")
        return cls(P=P, idx=idx.astype(np.int64), groups=groups, alpha=alpha, gamma=gamma,
                   columns=columns, pruned=pruned)

    def matmul(self, x):
        """``y = P (*) x`` through the packed form; ``x`` has shape ``(C,)`` or ``(C, T)``."""
        x = np.asarray(x)
        gathered = x[self.channel_matrix()]           # (N, G) or (N, G, T)
        weights = self.P if x.ndim == 1 else self.P[:, :, None]
        return (weights * gathered).sum(axis=1)


def _check_matrix(F):
    F = np.asarray(F)
    if F.ndim != 2:
        raise ValueError(f"Filter matrix must be 2-dimensional (N x C), not shape {F.shape}")
    if not (np.issubdtype(F.dtype, np.number) and not np.issubdtype(F.dtype, np.complexfloating)):
        raise TypeError(f"Filter matrix must be real numbers, not {F.dtype}")
    if np.issubdtype(F.dtype, np.floating) and not np.isfinite(F).all():
        raise ValueError("Filter matrix holds NaN or infinite weights")
    return F


def _check_params(alpha, gamma):
    if not isinstance(alpha, (int, np.integer)) or isinstance(alpha, bool) or alpha < 1:
        raise TypeError(f"Alpha must be a positive integer, not {alpha!r}")
    if not isinstance(gamma, (int, float, np.floating, np.integer)) or isinstance(gamma, bool) \
            or not 0 <= gamma < float("inf"):
        raise ValueError(f"Gamma must be a non-negative number, not {gamma!r}")


def _group_section(mask, alpha, max_conflicts):
    """Greedy grouping of one section; ``mask`` is N x S booleans. Returns local groups."""
    nonzero_cols = np.flatnonzero(mask.any(axis=0))
    D = mask[:, nonzero_cols].T.astype(np.int64)           # groups x rows, one column each
    m = len(nonzero_cols)
    groups = [[int(j)] for j in nonzero_cols]
    if m < 2 or alpha < 2:
        return groups
    inf = np.iinfo(np.int64).max
    # Conflicts of a union: sum_r max(0, D[a,r] + D[b,r] - 1); for 0/1 columns, shared rows.
    OV = D @ D.T
    # Rows empty in both groups.
    E = (1 - D) @ (1 - D).T
    sizes = np.ones(m, dtype=np.int64)
    active = np.ones(m, dtype=bool)
    np.fill_diagonal(OV, inf)
    while True:
        feasible = ((OV <= max_conflicts) & (sizes[:, None] + sizes[None, :] <= alpha)
                    & active[:, None] & active[None, :])
        has_partner = feasible.any(axis=0)
        if not has_partner.any():
            break
        c1 = int(np.argmax(has_partner))                     # lowest group with a partner
        candidates = np.where(feasible[:, c1], E[:, c1], inf)
        c2 = int(np.argmin(candidates))                      # fewest empty rows, lowest index
        groups[c1].extend(groups[c2])
        D[c1] += D[c2]
        sizes[c1] += sizes[c2]
        active[c2] = False
        OV[c2, :] = OV[:, c2] = inf
        row = np.maximum(D[c1][None, :] + D - 1, 0).sum(axis=1)
        empty = ((D[c1][None, :] + D) == 0).sum(axis=1)
        row[~active] = inf
        row[c1] = inf
        OV[c1, :] = OV[:, c1] = row
        E[c1, :] = E[:, c1] = empty
    return [groups[g] for g in np.flatnonzero(active)]


def group_columns(F, alpha, gamma):
    """Return the groups (lists of original column indices) of ``F``, section by section.

    Raises
    ------
    TypeError, ValueError
        On a malformed matrix or invalid ``alpha``/``gamma``.
    """
    F = _check_matrix(F)
    _check_params(alpha, gamma)
    mask = F != 0
    max_conflicts = int(gamma * F.shape[0])
    groups = []
    for start in range(0, F.shape[1], SECTION):
        local = _group_section(mask[:, start:start + SECTION], int(alpha), max_conflicts)
        groups.extend([start + j for j in group] for group in local)
    return groups


def _group_table(groups, alpha):
    """Groups as a G x alpha array of column indices, padded with -1."""
    table = np.full((len(groups), max(alpha, 1)), -1, dtype=np.int64)
    for g, group in enumerate(groups):
        table[g, :len(group)] = group
    return table


def _check_groups(groups, alpha, columns):
    seen = set()
    for group in groups:
        if not 1 <= len(group) <= alpha or any(not 0 <= c < columns for c in group) \
                or seen.intersection(group) or len(set(group)) != len(group):
            raise ValueError(f"groups must hold 1..{alpha} distinct columns of 0..{columns - 1}"
                             f", each column in one group at most; {list(group)} does not fit")
        seen.update(group)
    return [list(map(int, group)) for group in groups]


def pack(F, alpha, gamma, groups=None):
    """Group the columns of ``F``, conflict-prune, and return the ``PackedLayer``.

    With ``groups`` (the fixed-groups mode, for retrained weights of a layer packed
    before), the columns keep those groups and only conflict pruning runs; a nonzero in a
    column of no group counts as pruned.

    Parameters
    ----------
    F : array_like, shape (N, C)
        Filter matrix (float or integer weights; zeros are pruned weights).
    alpha : int
        Most original columns per group.
    gamma : float
        Allowed conflicts per row on average: a group holds at most ``int(gamma * N)``.
    groups : sequence of sequence of int, optional
        Fixed groups of original column indices.

    Raises
    ------
    TypeError
        If ``alpha`` is not a positive integer or ``F`` is not real numbers.
    ValueError
        If ``F`` is not 2-D or holds NaN/Inf, ``gamma`` is negative, or ``groups`` are not
        disjoint groups of at most ``alpha`` columns of ``F``.
    """
    F = _check_matrix(F)
    if groups is None:
        groups = group_columns(F, alpha, gamma)
    else:
        _check_params(alpha, gamma)
        groups = _check_groups(groups, alpha, F.shape[1])
    table = _group_table(groups, alpha)                          # G x alpha
    # Within each group, sort columns ascending so argmax's first hit is the lowest index.
    order = np.argsort(np.where(table < 0, np.iinfo(np.int64).max, table), axis=1,
                       kind="stable")
    sorted_cols = np.take_along_axis(table, order, axis=1)
    values = np.where(sorted_cols[None] >= 0, F[:, np.maximum(sorted_cols, 0)], 0)  # N x G x a
    best = np.argmax(np.abs(values), axis=2)                     # N x G
    P = np.take_along_axis(values, best[:, :, None], axis=2)[:, :, 0]
    idx = np.take_along_axis(np.broadcast_to(order, values.shape), best[:, :, None],
                             axis=2)[:, :, 0]
    idx = np.where(P != 0, idx, 0)
    pruned = int(np.count_nonzero(F)) - int(np.count_nonzero(P))
    return PackedLayer(P=P, idx=idx.astype(np.int64), groups=tuple(map(tuple, groups)),
                       alpha=int(alpha), gamma=float(gamma), columns=F.shape[1],
                       pruned=pruned)


def _ceil_div(a, b):
    return -(-a // b)


def tiles(packed, rows, cols):
    """Tiles a ``rows x cols`` array needs for a packed layer."""
    return _ceil_div(packed.rows, rows) * _ceil_div(len(packed.groups), cols)


def dense_tiles(shape, rows, cols):
    """Tiles a ``rows x cols`` array needs for a dense ``N x C`` layer."""
    return _ceil_div(shape[0], rows) * _ceil_div(shape[1], cols)


def conv_weight_matrix(weights):
    """Flatten conv weights ``(C_out, C_in, k, k)`` to ``F`` (``C_out x C_in*k*k``), column
    order ``(c, ky, kx)`` as ``im2col`` produces."""
    weights = np.asarray(weights)
    if weights.ndim != 4 or weights.shape[2] != weights.shape[3]:
        raise ValueError(f"Conv weights must have shape (C_out, C_in, k, k), not {weights.shape}")
    return weights.reshape(weights.shape[0], -1)


def expand_groups(weights, groups):
    """A grouped (or depthwise) convolution's weights ``N x C/groups x k x k`` as one over
    all ``C`` input channels, zero outside each filter's group: the same convolution,
    whose filter matrix column combining packs (columns of different groups never
    conflict). ``groups`` must divide ``N``."""
    weights = np.asarray(weights)
    filters, per_group = weights.shape[:2]
    full = np.zeros((filters, per_group * groups, *weights.shape[2:]), weights.dtype)
    per_filter = filters // groups
    for g in range(groups):
        full[g * per_filter:(g + 1) * per_filter, g * per_group:(g + 1) * per_group] = \
            weights[g * per_filter:(g + 1) * per_filter]
    return full


def collapse_groups(full, groups):
    """``expand_groups``' inverse: each filter's part over its own group of ``full``'s
    ``N x C x k x k`` (what lies outside is dropped)."""
    full = np.asarray(full)
    filters, channels = full.shape[:2]
    per_filter, per_group = filters // groups, channels // groups
    return np.concatenate([full[g * per_filter:(g + 1) * per_filter,
                                g * per_group:(g + 1) * per_group] for g in range(groups)])


def _side(value):
    if not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"A padding must be an integer >= 0, not {value!r}")
    return int(value)


def padding_sides(padding):
    """A window's padding per axis, ``((top, bottom), (left, right))``: one integer pads
    every side alike; a pair ``(before, after)`` pads ``before`` rows above and columns
    left of the map and ``after`` below and right of it (an exporter's SAME padding,
    ``ceil_mode``); four, ``(top, left, bottom, right)`` (ONNX's order), each side its
    own.

    Raises
    ------
    ValueError
        If a side is not an integer >= 0, or the padding is none of these forms.
    """
    sides = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,)
    if len(sides) not in (1, 2, 4):
        raise ValueError(f"A padding is one integer, (before, after) or (top, left, "
                         f"bottom, right), not {padding!r}")
    if len(sides) == 1:
        sides = sides * 4
    elif len(sides) == 2:
        sides = (sides[0], sides[0], sides[1], sides[1])
    top, left, bottom, right = sides
    return (_side(top), _side(bottom)), (_side(left), _side(right))


def padding_value(top, left, bottom, right):
    """The shortest form of a padding that ``padding_sides`` reads back as these sides:
    one integer, ``(before, after)``, or the four."""
    if top == left == bottom == right:
        return top
    return (top, bottom) if (top, bottom) == (left, right) else (top, left, bottom, right)


def output_size(size, k, stride=1, padding=0):
    """Output positions along one axis of ``size`` for a ``k``-wide window:
    ``(size + before + after - k) // stride + 1``, ``padding`` that axis's ``(before,
    after)`` or one integer for both."""
    before, after = padding if isinstance(padding, (tuple, list)) else (padding, padding)
    return (size + _side(before) + _side(after) - k) // stride + 1


def output_shape(h, w, k, stride=1, padding=0):
    """``(H_out, W_out)`` of a ``k x k`` window over an ``h x w`` map, ``padding`` as
    ``padding_sides`` reads it."""
    rows, cols = padding_sides(padding)
    return output_size(h, k, stride, rows), output_size(w, k, stride, cols)


def im2col(x, k, stride=1, padding=0):
    """Unfold a feature map ``(C_in, H, W)`` into ``(C_in*k*k, H_out*W_out)`` columns, or a
    batch ``(B, C_in, H, W)`` into ``(C_in*k*k, B*H_out*W_out)`` (image-major, then row-major
    positions). Rows are ordered ``(c, ky, kx)``, as ``conv_weight_matrix`` orders columns.

    ``(H_out, W_out) = output_shape(H, W, k, stride, padding)``; zero padding, as
    ``padding_sides`` reads ``padding``.

    Raises
    ------
    ValueError
        If the shapes or parameters do not give at least one output position.
    """
    x = np.asarray(x)
    if x.ndim not in (3, 4):
        raise ValueError(f"Feature map must have shape (C_in, H, W) or (B, C_in, H, W), "
                         f"not {x.shape}")
    for name, value in (("Kernel size", k), ("Stride", stride)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
    (top, bottom), (left, right) = padding_sides(padding)
    batch = x if x.ndim == 4 else x[None]
    b, c, h, w = batch.shape
    h_out, w_out = output_shape(h, w, k, stride, padding)
    if h_out < 1 or w_out < 1:
        raise ValueError(f"A {k}x{k} kernel does not fit a {h}x{w} map with padding {padding}")
    padded = np.pad(batch, ((0, 0), (0, 0), (top, bottom), (left, right)))
    ky, kx = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    oy, ox = np.meshgrid(np.arange(h_out) * stride, np.arange(w_out) * stride, indexing="ij")
    rows = (ky.reshape(-1, 1) + oy.reshape(1, -1))               # k*k x positions
    cols = (kx.reshape(-1, 1) + ox.reshape(1, -1))
    patches = padded[:, :, rows, cols]                           # B x C_in x k*k x positions
    return patches.transpose(1, 2, 0, 3).reshape(c * k * k, b * h_out * w_out)
