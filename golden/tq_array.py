"""Functional model of the TQ array (``codnn.hw.tq.array``): a layer run as tiles of tMACs.

A layer's integer weights ``W`` (``N x K``, sign-magnitude range) are cut into groups of
``g`` input channels (``codnn.golden.term_quant.group``: the last group zero-padded); cell
(r, c) of a ``rows x cols`` array holds one group as its term queue: the ``alpha`` terms
term revealing keeps, in reveal order. Tile (i, j) covers output rows ``i*rows ..`` and
groups ``j*cols ..``. A data beat carries, for every array column, the group's ``g`` data
values (zero past ``K``) and every row's partial sum (bias, then the previous column
block's results, as in ``codnn.golden.systolic``). The hardware truncates each data value to its
top ``beta`` terms. Results: ``wrap(psum + sum over groups of revealed(w) . truncated(x),
acc_bits)``.

Cycles: ``codnn.golden.systolic.cycle_model`` with ``beat_cycles = alpha`` (each cell takes a
weight term a cycle, paired with the whole truncated value of the data element it
belongs to: the ``beta`` data terms of a value are summed in one shift-add) and the
edge's ``edge_latency`` (``tq_timing``).
"""

from dataclasses import dataclass, replace

import numpy as np

from codnn.golden.lanes import pack_lanes
from codnn.golden.systolic import wrap
from codnn.golden.term_quant import group, group_terms, reveal, truncate

__all__ = ["term_slot_bits", "TqTile", "make_tq_tiles", "packed_tq_products", "reveal_packed",
           "run_tq_layer", "tq_products", "tq_timing", "weight_row_word", "data_vector_word"]


def tq_timing(alpha, beta, mag_bits):
    """The TQ array's timing as ``codnn.golden.systolic.cycle_model``'s keywords: a vector every
    ``alpha`` cycles (a cell takes one weight term a cycle against the whole truncated
    data value it belongs to), after 4 cycles of data edge (the truncation table), ``alpha
    + 2`` steps from a cell's operands to its group sum, and a weight beat every ``alpha``
    cycles (a term of each queue a cycle). ``beta`` and ``mag_bits`` change the values,
    not the cycles."""
    return {"beat_cycles": alpha, "edge_latency": 4, "product_steps": alpha + 2,
            "weight_cycles": alpha}


def _truncated(X, beta, encoding, mag_bits):
    """Each data value of ``X`` cut to its top ``beta`` terms (looked up in the truncation
    of every value); ``ValueError`` for a value past ``mag_bits``."""
    X = np.asarray(X, dtype=np.int64)
    top = (1 << mag_bits) - 1
    if X.size and np.abs(X).max() > top:
        raise ValueError(f"data must lie in -{top}..{top} for {mag_bits} magnitude bits")
    return truncate(np.arange(-top, top + 1), beta, encoding, mag_bits)[X + top]


def tq_products(W, X, *, g, alpha, beta, encoding="naf", mag_bits=7):
    """``revealed(W) @ truncated(X)``: what the TQ array sums for weights ``W`` (``N x K``)
    and data ``X`` (``K x T``), before partial sums and wrapping."""
    W = np.asarray(W, dtype=np.int64)
    revealed = reveal(group(W, g), alpha, encoding, mag_bits).reshape(W.shape[0], -1)
    return revealed[:, :W.shape[1]] @ _truncated(X, beta, encoding, mag_bits)


def reveal_packed(packed, *, g, budget, encoding="naf", mag_bits=7):
    """A column-combined layer (``codnn.golden.column_combining.PackedLayer``) with term
    revealing on its kept weights (semantics section 3, "Column-combined TQ cells"):
    each row's ``P`` grouped by ``g`` consecutive packed columns, each group revealed to
    ``budget`` terms; selects and groups unchanged."""
    P = np.asarray(packed.P, dtype=np.int64)
    revealed = reveal(group(P, g), budget, encoding, mag_bits).reshape(P.shape[0], -1)
    return replace(packed, P=revealed[:, :P.shape[1]])


def packed_tq_products(packed, X, *, g, budget, beta, encoding="naf", mag_bits=7):
    """What the column-combined TQ array sums for the packed layer ``packed`` and data
    ``X`` (``C x T``, the original columns), before partial sums and wrapping: each cell's
    revealed kept weight (``reveal_packed``) times the truncated data value its select
    names, summed along the row: ``N x T``."""
    revealed = reveal_packed(packed, g=g, budget=budget, encoding=encoding,
                             mag_bits=mag_bits)
    data = _truncated(X, beta, encoding, mag_bits)[revealed.channel_matrix()]  # N x G x T
    return np.einsum("ng,ngt->nt", revealed.P, data)


@dataclass(frozen=True)
class TqTile:
    """One tile: ``queues[r][c]`` is cell (r, c)'s term queue ``[(sign, exp, index)]``;
    ``weights`` the revealed weights ``(rows, cols, g)``; ``groups`` the layer's group
    index of each array column (-1 past the last)."""

    row_block: int
    col_block: int
    queues: list
    weights: np.ndarray
    groups: np.ndarray


def make_tq_tiles(W, *, g, alpha, rows, cols, encoding="naf", mag_bits=7):
    """Cut a quantized layer into TQ tiles, row blocks outer, column blocks inner."""
    grouped = group(np.asarray(W, dtype=np.int64), g)            # N x G x g
    N, G, _ = grouped.shape
    revealed = reveal(grouped, alpha, encoding, mag_bits)
    tiles = []
    for i in range(-(-N // rows)):
        for j in range(-(-G // cols)):
            weights = np.zeros((rows, cols, g), dtype=np.int64)
            queues = [[[] for _ in range(cols)] for _ in range(rows)]
            for r in range(rows):
                for c in range(cols):
                    n, k = i * rows + r, j * cols + c
                    if n < N and k < G:
                        weights[r, c] = revealed[n, k]
                        queues[r][c] = group_terms(grouped[n, k], alpha, encoding, mag_bits)
            groups = np.array([j * cols + c if j * cols + c < G else -1 for c in range(cols)])
            tiles.append(TqTile(i, j, queues, weights, groups))
    return tiles


def run_tq_layer(W, X, *, g, alpha, beta, rows, cols, acc_bits=32, bias=None,
                 encoding="naf", mag_bits=7):
    """Run a layer on the TQ array; return ``(per_tile, acc)``.

    ``per_tile`` lists ``(tile, beats, psum_in, results)`` in stream order, ``beats`` being
    ``(T, cols, g)`` data values; ``acc`` is the ``N x T`` accumulator result.
    """
    W, X = np.asarray(W, dtype=np.int64), np.asarray(X, dtype=np.int64)
    N, T = W.shape[0], X.shape[1]
    bias = np.zeros(N, dtype=np.int64) if bias is None else np.asarray(bias, dtype=np.int64)
    Xg = group(X.T, g)                                           # T x G x g
    Xt = truncate(Xg, beta, encoding, mag_bits)
    acc = np.zeros((N, T), dtype=np.int64)
    per_tile = []
    for tile in make_tq_tiles(W, g=g, alpha=alpha, rows=rows, cols=cols, encoding=encoding,
                              mag_bits=mag_bits):
        r0 = tile.row_block * rows
        n = min(rows, N - r0)
        valid = tile.groups >= 0
        beats = np.zeros((T, cols, g), dtype=np.int64)
        beats[:, valid] = Xg[:, tile.groups[valid]]
        data = np.zeros_like(beats)
        data[:, valid] = Xt[:, tile.groups[valid]]
        if tile.col_block == 0:
            psum = np.zeros((T, rows), dtype=np.int64)
            psum[:, :n] = bias[r0:r0 + n][None, :]
        else:
            psum = per_tile[-1][3]
        results = wrap(psum + np.einsum("rcj,tcj->tr", tile.weights, data), acc_bits)
        per_tile.append((tile, beats, psum, results))
        acc[r0:r0 + n] = results[:, :n].T
    return per_tile, acc


def term_slot_bits(mag_bits, g):
    """Bits of one term slot of a weight beat: exponent, sign, index in the group, valid."""
    return max(1, mag_bits.bit_length()) + max(1, (g - 1).bit_length()) + 2


def weight_row_word(queues, *, alpha, mag_bits, g):
    """A ``weights`` beat of the TQ array (``codnn.hw.tq.array``): one array row's term queues
    (``TqTile.queues[r]``), each as ``alpha`` (exp, neg, idx, valid) slots, empty slots
    zero."""
    e, i = max(1, mag_bits.bit_length()), max(1, (g - 1).bit_length())
    slot_bits = term_slot_bits(mag_bits, g)

    def queue_word(queue):
        slots = [exp | (sign < 0) << e | idx << (e + 1) | 1 << (e + 1 + i)
                 for sign, exp, idx in queue]
        return pack_lanes(slots + [0] * (alpha - len(slots)), slot_bits)
    return pack_lanes([queue_word(q) for q in queues], alpha * slot_bits)


def data_vector_word(values, *, mag_bits):
    """The ``x`` field of a TQ data beat: values (``cols x g``, row-major) in
    sign-magnitude, ``mag_bits + 1`` bits each."""
    return pack_lanes([abs(int(v)) | (v < 0) << mag_bits for v in np.ravel(values)],
                      mag_bits + 1)
