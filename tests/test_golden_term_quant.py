"""codnn.golden.term_quant against docs/semantics.md section 3 and a literal, slow
term-revealing loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codnn.golden.term_quant import (
    ENCODINGS,
    digit_table,
    group,
    group_terms,
    kept_digits,
    lockstep_pairs,
    pmac_cycles,
    quantize,
    reveal,
    term_counts,
    term_pairs,
    terms,
    tmac_cycles,
    truncate,
    ungroup,
)
from codnn.golden.column_combining import PackedLayer, pack
from codnn.golden.tq_array import packed_tq_products, reveal_packed, run_tq_layer, tq_products


def greedy_reveal(group_values, alpha, encoding, mag_bits=7):
    """docs/semantics.md's loop, one term at a time."""
    pending = [terms(v, mag_bits, encoding) for v in group_values]
    out = [0] * len(group_values)
    for _ in range(alpha):
        heads = [(p[0][1], -j) for j, p in enumerate(pending) if p]
        if not heads:
            break
        _, negative_j = max(heads)
        sign, exponent = pending[-negative_j].pop(0)
        out[-negative_j] += sign << exponent
    return out


@pytest.mark.parametrize("encoding,values,alpha,expected", [
    ("binary", (67, 10, 81), 4, (64, 8, 80)),
    ("binary", (64, 3, 14), 4, (64, 2, 12)),
    ("binary", (-67, 10, -81), 4, (-64, 8, -80)),
    ("naf", (64, 3, 14), 4, (64, 4, 14)),
])
def test_spec_vectors(encoding, values, alpha, expected):
    assert reveal(np.array([values]), alpha, encoding).tolist() == [list(expected)]


@pytest.mark.parametrize("value,expected", [
    (27, [(1, 5), (-1, 2), (-1, 0)]), (119, [(1, 7), (-1, 3), (-1, 0)]),
    (31, [(1, 5), (-1, 0)]), (6, [(1, 3), (-1, 1)]),
    (85, [(1, 6), (1, 4), (1, 2), (1, 0)]), (127, [(1, 7), (-1, 0)]),
])
def test_naf_vectors(value, expected):
    assert terms(value, 7, "naf") == expected


def test_binary_and_booth_terms():
    assert terms(27, 7, "binary") == [(1, 4), (1, 3), (1, 1), (1, 0)]
    assert terms(1, 7, "booth") == [(1, 1), (-1, 0)]        # isolated ones take two terms
    assert terms(-6, 7, "naf") == [(-1, 3), (1, 1)]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("mag_bits", [1, 4, 7, 10])
def test_every_encoding_represents_every_magnitude(encoding, mag_bits):
    table = digit_table(mag_bits, encoding).astype(np.int64)
    assert np.array_equal(table @ (1 << np.arange(mag_bits + 1)), np.arange(1 << mag_bits))
    if encoding == "naf":     # no two adjacent nonzero digits, so minimal
        assert not np.any((table[:, 1:] != 0) & (table[:, :-1] != 0))


def test_naf_is_never_longer_than_binary():
    v = np.arange(128)
    assert np.all(term_counts(v, encoding="naf") <= term_counts(v, encoding="binary"))
    assert term_counts(np.array([0, 127, -127]), encoding="naf").tolist() == [0, 2, 2]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-127, 127), min_size=1, max_size=9), st.integers(1, 20),
       st.sampled_from(ENCODINGS))
def test_reveal_equals_the_greedy_loop(values, alpha, encoding):
    assert reveal(np.array([values]), alpha, encoding)[0].tolist() == \
        greedy_reveal(values, alpha, encoding)


def test_groups_within_budget_are_unchanged_and_budget_holds():
    rng = np.random.default_rng(5)
    values = rng.integers(-127, 128, size=(5000, 8))
    for alpha in (1, 6, 12, 40):
        out, kept = reveal(values, alpha, "naf", counts=True)
        counts = term_counts(values).sum(axis=1)
        assert np.array_equal(out[counts <= alpha], values[counts <= alpha])
        assert np.array_equal(kept.sum(axis=1), np.minimum(counts, alpha))
        assert np.all(kept <= term_counts(values))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_revealed_values_stay_within_one_digit_past_the_top(encoding):
    values = np.arange(-127, 128)
    for beta in range(1, 9):
        assert np.abs(truncate(values, beta, encoding)).max() <= 128


def test_truncate_keeps_top_terms_per_value():
    assert truncate(np.array([27, -119, 3, 0]), 1, "naf").tolist() == [32, -128, 4, 0]
    assert truncate(np.array([27]), 1, "binary").tolist() == [16]
    out, kept = truncate(np.array([27, 1, 0]), 2, "naf", counts=True)
    assert out.tolist() == [28, 1, 0] and kept.tolist() == [2, 1, 0]


def test_quantize_rounds_half_up_and_saturates():
    x = np.array([0.0, 0.49, 0.5, -1.5, 200.0, -1e9])
    assert quantize(x, 1.0).tolist() == [0, 0, 1, -2, 127, -127]
    assert quantize(np.array([3.0]), 0.5, mag_bits=3).tolist() == [6]


def test_group_pads_with_zeros_and_ungroup_drops_them():
    W = np.arange(1, 11).reshape(2, 5)
    grouped = group(W, 4)
    assert grouped.shape == (2, 2, 4) and grouped[0, 1].tolist() == [5, 0, 0, 0]
    assert np.array_equal(ungroup(grouped, 5), W)


def test_term_pairs_and_cycles():
    W = np.array([[3, 0], [1, 7]])            # naf terms: 3 -> 2, 1 -> 1, 7 -> 2
    X = np.array([[5], [6]])                  # 5 -> 2, 6 -> 2
    assert term_pairs(term_counts(W), term_counts(X)) == 2 * 2 + 1 * 2 + 2 * 2
    assert tmac_cycles(10, 12, 3) == 360 and pmac_cycles(10, 8) == 80


@pytest.mark.parametrize("call,message", [
    (lambda: reveal(np.array([[1, 2]]), 0), "Budget must be a positive integer"),
    (lambda: reveal(np.array([[1, 2]]), 2, "ternary"), "Encoding must be one of"),
    (lambda: reveal(np.array([[128]]), 2), r"Values must lie in -127..127"),
    (lambda: reveal(np.array([[1.5]]), 2), "Values must be integers"),
    (lambda: reveal(np.array(3), 2), "group axis"),
    (lambda: truncate(np.array([3]), 0), "Data term budget must be a positive"),
    (lambda: group(np.ones((2, 3)), 0), "Group size must be a positive integer"),
    (lambda: quantize(np.array([np.nan]), 1.0), "must be finite"),
    (lambda: quantize(np.array([1.0]), 0.0), "Scale must be a positive"),
    (lambda: digit_table(16, "naf"), "Magnitude width must be an integer in 1..15"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_group_terms_follow_the_reveal_order():
    assert group_terms(np.array([67, 10, 81]), 4, "binary") == [
        (1, 6, 0), (1, 6, 2), (1, 4, 2), (1, 3, 1)]
    assert group_terms(np.array([-3, 0]), 8, "naf") == [(-1, 2, 0), (1, 0, 0)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-127, 127), st.integers(-127, 127)), min_size=1,
                max_size=8), st.integers(1, 12), st.integers(1, 4), st.sampled_from(ENCODINGS))
def test_lockstep_pairs_sum_to_the_revealed_dot_product(pairs, alpha, beta, encoding):
    w, x = np.array(pairs).T
    slots = lockstep_pairs(w, x, alpha, beta, encoding)
    assert len(slots) == alpha * beta
    total = sum((-1 if neg else 1) << (ew + ex) for ew, ex, neg in filter(None, slots))
    assert total == int(reveal(w[None], alpha, encoding)[0] @ truncate(x, beta, encoding))


def test_kept_digits_add_up_to_the_revealed_values():
    rng = np.random.default_rng(9)
    values = rng.integers(-127, 128, size=(300, 6))
    for encoding in ENCODINGS:
        kept = kept_digits(values, 7, encoding).astype(np.int64)
        assert np.array_equal(kept @ (1 << np.arange(8)), reveal(values, 7, encoding))


@pytest.mark.parametrize("rows,cols,g", [(1, 1, 1), (3, 2, 4), (4, 5, 3)])
def test_tq_layer_equals_revealed_dense_product(rows, cols, g):
    rng = np.random.default_rng(rows * 10 + cols)
    W = rng.integers(-127, 128, (7, 22))
    X = rng.integers(-127, 128, (22, 5))
    bias = rng.integers(-1000, 1000, 7)
    per_tile, acc = run_tq_layer(W, X, g=g, alpha=6, beta=2, rows=rows, cols=cols,
                                 bias=bias)
    revealed = ungroup(reveal(group(W, g), 6), 22)
    assert np.array_equal(acc, revealed @ truncate(X, 2) + bias[:, None])
    assert len(per_tile) == -(-7 // rows) * -(-(-(-22 // g)) // cols)
    tile = per_tile[0][0]
    assert tile.queues[0][0] == group_terms(W[0, :g], 6)


def test_column_combined_tq_cells_spec_vector():
    # docs/semantics.md section 3, "Column-combined TQ cells": one row, two packed columns
    # (kept weights 3 and 5, selecting original columns 1 and 2), g 2, budget 3, beta 1.
    packed = PackedLayer(P=np.array([[3, 5]]), idx=np.array([[1, 0]]),
                         groups=((0, 1), (2,)), alpha=2, gamma=0.0, columns=3, pruned=0)
    assert reveal_packed(packed, g=2, budget=3).P.tolist() == [[3, 4]]
    X = np.array([[9], [7], [2]])
    assert packed_tq_products(packed, X, g=2, budget=3, beta=1).tolist() == [[32]]


@pytest.mark.parametrize("alpha,gamma,g,budget,beta", [
    (4, 0.5, 4, 6, 2), (2, 0.0, 3, 5, 1), (8, 1.0, 8, 12, 3), (1, 0.0, 4, 6, 2)])
def test_column_combined_tq_cells_reduce_to_each_array(alpha, gamma, g, budget, beta):
    # The combined array's sum is the revealed packed layer's dense matrix times the
    # truncated data; with every term kept it is column combining's exact sum, and
    # without combining (alpha 1) the TQ array's (tq_products) on the layer without its
    # empty columns, which packing drops.
    seed = 20261207 + alpha
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    W = rng.integers(-127, 128, (9, 30)) * (rng.random((9, 30)) < 0.3)
    X = rng.integers(-127, 128, (30, 6))
    packed = pack(W, alpha, gamma)
    got = packed_tq_products(packed, X, g=g, budget=budget, beta=beta)
    revealed = reveal_packed(packed, g=g, budget=budget)
    np.testing.assert_array_equal(got, revealed.dense() @ truncate(X, beta))
    np.testing.assert_array_equal(revealed.idx, packed.idx)
    kept = packed_tq_products(packed, X, g=g, budget=g * 4, beta=4)       # NAF: <= 4 terms
    np.testing.assert_array_equal(kept, packed.dense() @ X)
    if alpha == 1:
        kept_columns = [column for (column,) in packed.groups]
        assert len(kept_columns) < W.shape[1]                           # some were empty
        np.testing.assert_array_equal(got, tq_products(
            W[:, kept_columns], X[kept_columns], g=g, alpha=budget, beta=beta))
    else:
        assert not np.array_equal(got, revealed.dense() @ X)            # beta truncates
