"""codnn.golden.column_combining and codnn.golden.joint_optimization against
docs/semantics.md section 1."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codnn.golden.column_combining import (
    SECTION,
    conv_weight_matrix,
    dense_tiles,
    group_columns,
    im2col,
    pack,
    tiles,
)
from codnn.golden.joint_optimization import (
    joint_prune,
    magnitude_prune,
    pack_to_rate,
    prune_rate,
    prune_steps,
)
from codnn.golden.workloads import structured_layer

SPEC_F = np.array([[-0.3, 0, -0.2, 0], [0, -0.7, 0, -0.8], [0, 0.1, -1.2, 0],
                   [0.9, 0, 0.4, 0.7]])


def test_spec_vector():
    packed = pack(SPEC_F, alpha=2, gamma=0.25)
    assert packed.groups == ((0, 1), (2, 3))
    assert packed.P.tolist() == [[-0.3, -0.2], [-0.7, -0.8], [0.1, -1.2], [0.9, 0.7]]
    assert packed.idx.tolist() == [[0, 0], [1, 1], [1, 0], [0, 1]]
    assert packed.pruned == 1                      # 0.4 loses to 0.7 in row 3, group 1
    assert packed.efficiency == 1.0


def test_all_zero_columns_take_no_group():
    F = np.zeros((3, 5))
    F[0, 1], F[2, 4] = 1.0, 2.0
    packed = pack(F, alpha=4, gamma=0)
    assert packed.groups == ((1, 4),)


def test_alpha_one_is_the_dense_layout():
    F = np.arange(12.0).reshape(3, 4)
    packed = pack(F, alpha=1, gamma=0.5)
    assert packed.groups == ((0,), (1,), (2,), (3,))
    assert np.array_equal(packed.dense(), F)


def test_conflict_tie_keeps_the_lowest_column():
    F = np.array([[0.5, -0.5]])
    packed = pack(F, alpha=2, gamma=1)
    assert packed.groups == ((0, 1),) and packed.P.tolist() == [[0.5]]
    assert packed.idx.tolist() == [[0]]


def test_sections_are_grouped_independently():
    # Two columns with disjoint rows merge when in one section, not across sections.
    F = np.zeros((2, SECTION + 1))
    F[0, SECTION - 2], F[1, SECTION - 1], F[1, SECTION] = 1.0, 1.0, 1.0
    assert group_columns(F, 2, 0) == [[SECTION - 2, SECTION - 1], [SECTION]]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 40), st.sampled_from([1, 2, 3, 4, 8]),
       st.sampled_from([0.0, 0.25, 0.5, 1.75]), st.floats(0.3, 0.95), st.integers(0, 2**16))
def test_packing_laws(n, c, alpha, gamma, sparsity, seed):
    rng = np.random.default_rng(seed)
    F = np.where(rng.random((n, c)) < sparsity, 0, rng.integers(-9, 10, (n, c)))
    packed = pack(F, alpha, gamma)
    limit = int(gamma * n)
    # every nonzero column is in exactly one group, of at most alpha columns
    members = sorted(j for g in packed.groups for j in g)
    assert members == sorted(np.flatnonzero((F != 0).any(axis=0)).tolist())
    assert all(len(g) <= alpha for g in packed.groups)
    for g in packed.groups:
        counts = (F[:, list(g)] != 0).sum(axis=1)
        assert np.maximum(counts - 1, 0).sum() <= limit
    # the packed product equals the pruned dense product, and pruning only removes weights
    x = rng.integers(-5, 6, size=c)
    pruned = packed.dense()
    assert np.array_equal(packed.matmul(x), pruned @ x)
    assert np.all((pruned == 0) | (pruned == F))
    assert int(np.count_nonzero(F)) - int(np.count_nonzero(pruned)) == packed.pruned
    assert len(packed.groups) >= -(-len(members) // alpha)


def test_tiles_and_realistic_reduction():
    rng = np.random.default_rng(3)
    F = structured_layer(rng, 128, 1152, 0.8)
    packed = pack(F, 8, 0.5)
    ratio = tiles(packed, 32, 32) / dense_tiles(F.shape, 32, 32)
    assert ratio <= 0.35, ratio
    assert dense_tiles((64, 100), 32, 32) == 2 * 4


def test_im2col_matches_direct_convolution():
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, (3, 6, 7))
    w = rng.integers(-2, 3, (5, 3, 3, 3))
    stride, padding = 2, 1
    cols = im2col(x, 3, stride, padding)
    y = (conv_weight_matrix(w) @ cols)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    h_out, w_out = (6 + 2 - 3) // 2 + 1, (7 + 2 - 3) // 2 + 1
    direct = np.zeros((5, h_out, w_out), dtype=np.int64)
    for o in range(5):
        for i in range(h_out):
            for j in range(w_out):
                patch = padded[:, i * stride:i * stride + 3, j * stride:j * stride + 3]
                direct[o, i, j] = (patch * w[o]).sum()
    assert np.array_equal(y.reshape(5, h_out, w_out), direct)


@pytest.mark.parametrize("alpha", [0, -1, 1.5, True])
def test_bad_alpha(alpha):
    with pytest.raises(TypeError, match="Alpha must be a positive integer"):
        pack(SPEC_F, alpha, 0.5)


def test_bad_gamma_and_matrices():
    with pytest.raises(ValueError, match="Gamma must be a non-negative number"):
        pack(SPEC_F, 2, -0.1)
    with pytest.raises(ValueError, match="must be 2-dimensional"):
        pack(np.zeros(4), 2, 0.5)
    with pytest.raises(ValueError, match="NaN or infinite"):
        pack(np.array([[np.nan, 1.0]]), 2, 0.5)
    with pytest.raises(TypeError, match="must be real numbers"):
        pack(np.array([["a"]]), 2, 0.5)
    with pytest.raises(ValueError, match="does not fit"):
        im2col(np.zeros((1, 2, 2)), 3)


def test_prune_schedule():
    assert prune_steps(300) == [0, 16, 33, 50, 66, 83, 100, 116, 133, 150]
    assert prune_rate(1) == pytest.approx(0.8 * (1 - 0.9 ** 3))
    assert prune_rate(10) == pytest.approx(0.8)
    assert prune_rate(3, 0.9, points=3) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="Prune point"):
        prune_rate(0)
    with pytest.raises(ValueError, match="points"):
        prune_rate(1, points=0)
    with pytest.raises(ValueError, match="Total steps"):
        prune_steps(0)


def test_magnitude_prune_exact_count():
    w = np.array([[3.0, -1.0], [1.0, 0.5]])
    mask = magnitude_prune(w, 0.5)
    assert mask.tolist() == [[True, False], [True, False]]   # tie at |1|: earlier pruned


def test_joint_prune_masks_match_packing():
    rng = np.random.default_rng(5)
    layers = {"a": rng.standard_normal((16, 40)), "b": rng.standard_normal((8, 24))}
    masks, packed = joint_prune(layers, 10, {"a": 8, "b": 4}, 0.5)
    for name, layer in layers.items():
        alpha = {"a": 8, "b": 4}[name]
        kept = masks[name].mean()
        assert kept <= 1 - prune_rate(10) * (1 - 1 / alpha) + 1e-9
        assert np.array_equal(np.where(masks[name], layer, 0), packed[name].dense())


def test_final_rate_scales_the_ramp():
    assert prune_rate(9, final_rate=0.5) == pytest.approx(0.5 * (1 - 0.1 ** 3))
    with pytest.raises(ValueError, match="Final prune rate"):
        prune_rate(3, final_rate=1.0)


@pytest.mark.parametrize("rate", [0.5, 0.8, 0.9])
def test_pack_to_rate_lands_on_the_rate(rate):
    """Magnitude and conflict pruning together leave ``rate`` zeros (to within one weight
    per bisection step's resolution), where plain magnitude pruning to ``rate`` overshoots."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((24, 60))
    packed = pack_to_rate(w, rate, 8, 0.5)
    sparsity = 1 - packed.nonzeros / w.size
    assert rate - 0.01 <= sparsity <= rate + 1e-9
    plain = pack(np.where(magnitude_prune(w, rate), w, 0), 8, 0.5)
    assert 1 - plain.nonzeros / w.size > sparsity
    # A later point keeps these groups when regrouping alone would overshoot its rate.
    later = rate + 0.02
    again = pack_to_rate(packed.dense(), later, 8, 0.5, groups=packed.groups)
    again_sparsity = 1 - again.nonzeros / w.size
    if 1 - pack(packed.dense(), 8, 0.5).nonzeros / w.size > later:
        assert again.groups == packed.groups
        assert again_sparsity == pytest.approx(later, abs=1 / w.size)
    else:
        assert later - 0.01 <= again_sparsity <= later + 1e-9
