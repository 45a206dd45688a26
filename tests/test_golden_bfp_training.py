"""The training step of semantics section 11 (codnn.golden.bfp_training): its products
against a slow reference written from the section's words (one output at a time, the
block pairs in the stated order), against PyTorch's float64 autograd where the rounding
is exact, the loss gradient's and the update's test vectors, the non-finite flag, the
seeds, bad input, and a short training run that must learn."""

import math

import numpy as np
import pytest

from codnn.golden.bfp_training import (
    Conv,
    Dense,
    Flatten,
    MaxPool,
    ReLU,
    TrainingError,
    TrainingSettings,
    _array_backward,
    _array_forward,
    _Rounding,
    bit_ops_per_mac,
    check_network,
    evaluate,
    initial_state,
    loss_gradient,
    train_step,
)
from codnn.golden.block_float import to_block_float

SEED = 20261207


def _blocks(arranged, m, seed):
    return to_block_float(arranged, m, rounding="stochastic", seed=seed)


def _seed(step, layer, kind, seed=SEED):
    return (seed + 1000003 * step + 7919 * layer + kind) % (1 << 32)


def _pairs_sum(init, pairs, m, m2):
    """Section 11's accumulation, one output: ``fl32(acc + fl32(P * 2**q))`` per pair."""
    acc = np.float32(init)
    for (Ea, Ma), (Eb, Mb) in pairs:
        P = int(sum(int(a) * int(b) for a, b in zip(Ma, Mb)))
        acc = np.float32(acc + np.float32(math.ldexp(P, int(Ea + Eb - m - m2 + 2))))
    return acc


def _zero_block():
    return (0, np.zeros(16, np.int64))


def test_forward_equals_the_reference_one_output_at_a_time():
    rng = np.random.default_rng(SEED)
    print("seed", SEED)
    conv = Conv(filters=3, channels=18, kernel=3, stride=2, padding=1)
    x = (rng.standard_normal((2, 18, 5, 6)) * 4).astype(np.float32)
    W = rng.standard_normal((3, 18, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    widths = (5, 6, 7)
    Y, kept = _array_forward(conv, 2, W, b, x, widths, _Rounding(SEED, 4, True))
    Ex, Mx = _blocks(x.transpose(0, 2, 3, 1), 6, _seed(4, 2, 0))
    Ew, Mw = _blocks(W.transpose(0, 2, 3, 1), 5, _seed(4, 2, 1))
    assert Y.shape == (2, 3, 3, 3) and Y.dtype == np.float32
    for n, f, oy, ox in np.ndindex(Y.shape):
        pairs = []
        for cb in range(2):
            for ky in range(3):
                for kx in range(3):
                    y, x_ = oy * 2 + ky - 1, ox * 2 + kx - 1
                    inside = 0 <= y < 5 and 0 <= x_ < 6
                    xb = (Ex[n, y, x_, cb], Mx[n, y, x_, cb]) if inside else _zero_block()
                    pairs.append(((Ew[f, ky, kx, cb], Mw[f, ky, kx, cb]), xb))
        assert Y[n, f, oy, ox].tobytes() == _pairs_sum(b[f], pairs, 5, 6).tobytes()
    # the kept input is kind 0's values
    values = np.ldexp(Mx.astype(float), (Ex - 6 + 1)[..., None]).reshape(2, 5, 6, 32)[..., :18]
    assert np.array_equal(kept, values.transpose(0, 3, 1, 2).astype(np.float32))


def test_backward_equals_the_reference_one_output_at_a_time():
    rng = np.random.default_rng(SEED + 1)
    print("seed", SEED + 1)
    conv = Conv(filters=17, channels=2, kernel=3, stride=2, padding=1)
    N, H, W_ = 2, 6, 5                          # (6 + 2 - 3) % 2 = 1: an uncovered row
    Ho, Wo = 3, 3
    kept = (rng.standard_normal((N, 2, H, W_))).astype(np.float32)
    W = rng.standard_normal((17, 2, 3, 3)).astype(np.float32)
    dY = (rng.standard_normal((N, 17, Ho, Wo)) * 1e-3).astype(np.float32)
    widths = (4, 7, 6)
    mw, ma, mg = widths
    dW, db, dX = _array_backward(conv, 1, W, dY, kept, widths, _Rounding(SEED, 9, True),
                                 False)
    # weight gradient: kind 4's rows against kind 5's, position blocks ascending
    Er, Mr = _blocks(dY.transpose(1, 0, 2, 3).reshape(17, -1), mg, _seed(9, 1, 4))
    im2col = np.zeros((2, 3, 3, N, Ho, Wo), np.float32)
    for c, ky, kx, n, oy, ox in np.ndindex(im2col.shape):
        y, x = oy * 2 + ky - 1, ox * 2 + kx - 1
        if 0 <= y < H and 0 <= x < W_:
            im2col[c, ky, kx, n, oy, ox] = kept[n, c, y, x]
    Ec, Mc = _blocks(im2col.reshape(18, -1), ma, _seed(9, 1, 5))
    for f, r in np.ndindex(17, 18):
        pairs = [((Er[f, k], Mr[f, k]), (Ec[r, k], Mc[r, k])) for k in range(Er.shape[1])]
        assert dW.reshape(17, 18)[f, r] == _pairs_sum(0.0, pairs, mg, ma)
    ones = (0, np.full(16, 1 << (mg - 1)))
    for f in range(17):
        pairs = [((Er[f, k], Mr[f, k]), ones) for k in range(Er.shape[1])]
        assert db[f] == _pairs_sum(0.0, pairs, mg, mg)
    # input gradient: the dilated, padded map against the flipped transposed kernel
    Eg, Mg = _blocks(dY.transpose(0, 2, 3, 1), mg, _seed(9, 1, 2))
    Et, Mt = _blocks(W.transpose(1, 2, 3, 0), mw, _seed(9, 1, 3))
    for n, c, y, x in np.ndindex(dX.shape):
        pairs = []
        for fb in range(2):
            for u in range(3):
                for v in range(3):
                    dy, dx = y + u - 1, x + v - 1          # k - 1 - p = 1 padding
                    oy, ox = dy // 2, dx // 2
                    hit = (dy >= 0 and dx >= 0 and dy % 2 == 0 and dx % 2 == 0
                           and oy < Ho and ox < Wo)
                    gb = (Eg[n, oy, ox, fb], Mg[n, oy, ox, fb]) if hit else _zero_block()
                    pairs.append(((Et[c, 2 - u, 2 - v, fb], Mt[c, 2 - u, 2 - v, fb]), gb))
        assert dX[n, c, y, x].tobytes() == _pairs_sum(0.0, pairs, mw, mg).tobytes()


@pytest.mark.parametrize("stride,padding,size", [(1, 0, 7), (1, 2, 6), (2, 1, 7), (3, 1, 8)])
def test_gradients_equal_float64_autograd_where_rounding_is_exact(stride, padding, size):
    """Quarter-integers in -3..3 round exactly at 8 bits and sum exactly in float32, so the
    step's products must equal torch's float64 convolution and its autograd."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(SEED + stride + padding)
    conv = Conv(filters=5, channels=3, kernel=3, stride=stride, padding=padding)
    x = (rng.integers(-12, 13, (2, 3, size, size)) / 4).astype(np.float32)
    W = (rng.integers(-12, 13, (5, 3, 3, 3)) / 4).astype(np.float32)
    b = (rng.integers(-12, 13, 5) / 4).astype(np.float32)
    rounding, widths = _Rounding(SEED, 0, True), (8, 8, 8)
    Y, kept = _array_forward(conv, 0, W, b, x, widths, rounding)
    assert np.array_equal(kept, x)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tW = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    tY = torch.nn.functional.conv2d(tx, tW, tb, stride=stride, padding=padding)
    assert np.array_equal(Y, tY.detach().numpy())
    dY = (rng.integers(-12, 13, Y.shape) / 4).astype(np.float32)
    tY.backward(torch.tensor(dY, dtype=torch.float64))
    dW, db, dX = _array_backward(conv, 0, W, dY, kept, widths, rounding, False)
    assert np.array_equal(dW, tW.grad.numpy())
    assert np.array_equal(db, tb.grad.numpy())
    assert np.array_equal(dX, tx.grad.numpy())
    assert _array_backward(conv, 0, W, dY, kept, widths, rounding, True)[2] is None


def test_dense_layer_example_and_accumulation_order():
    layers = [Flatten(), Dense(1, 16)]
    state = initial_state(layers, [(np.full((1, 16), 0.5), np.array([0.25]))])
    classes, logits = evaluate(layers, TrainingSettings(), state, np.ones((1, 16, 1, 1)))
    assert logits[0, 0] == np.float32(8.25) and classes[0] == 0
    # 2**25 + 1 - 2**25 in float32 in block order is 0 (the 1 is lost); other orders give 1
    W = np.zeros((1, 48), np.float32)
    W[0, 0], W[0, 16], W[0, 32] = 2.0 ** 25, 1.0, -(2.0 ** 25)
    Y, _ = _array_forward(Dense(1, 48), 0, W, np.zeros(1, np.float32), np.ones((1, 48),
                          np.float32), (8, 8, 8), _Rounding(0, 0, False))
    assert Y[0, 0] == 0
    W[0, 16], W[0, 32] = -(2.0 ** 25), 1.0
    Y, _ = _array_forward(Dense(1, 48), 0, W, np.zeros(1, np.float32), np.ones((1, 48),
                          np.float32), (8, 8, 8), _Rounding(0, 0, False))
    assert Y[0, 0] == 1


def test_loss_gradient_vectors():
    gradient, loss = loss_gradient(np.zeros((2, 2), np.float32), np.array([0, 1]))
    assert np.array_equal(gradient, np.float32([[-0.25, 0.25], [0.25, -0.25]]))
    assert loss == pytest.approx(math.log(2), abs=1e-12)
    # far below the largest logit, e_j is 2**-100, never 0
    gradient, _ = loss_gradient(np.float32([[1e30, 0.0, -1e30]]), np.array([0]))
    assert gradient[0, 0] == 0 and gradient[0, 2] > 0
    rng = np.random.default_rng(SEED)
    z = (rng.standard_normal((64, 10)) * 5).astype(np.float32)
    labels = rng.integers(0, 10, 64)
    gradient, loss = loss_gradient(z, labels)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    exact = (p - np.eye(10)[labels]) / 64
    assert np.abs(gradient - exact).max() < 2 ** -8 / 64      # the table's 1/256 binade
    assert loss == pytest.approx(-np.mean(np.log(p[np.arange(64), labels])), rel=1e-2)


def _tiny():
    layers = [Conv(4, 1, 3, padding=1), ReLU(), MaxPool(2), Flatten(), Dense(10, 64)]
    rng = np.random.default_rng(SEED)
    weights = [(rng.uniform(-0.3, 0.3, (4, 1, 3, 3)), np.zeros(4)),
               (rng.uniform(-0.1, 0.1, (10, 64)), np.zeros(10))]
    return layers, initial_state(layers, weights)


def _digits(count):
    sklearn = pytest.importorskip("sklearn.datasets")
    data = sklearn.load_digits()
    x = (data.images[:count, None] / 16).astype(np.float32)
    return x, data.target[:count]


def test_update_vector_and_unchanged_inputs():
    layers = [Flatten(), Dense(1, 1)]
    state = initial_state(layers, [(np.ones((1, 1)), np.zeros(1))])
    state.momenta = [(np.ones((1, 1), np.float32), np.zeros(1, np.float32))]
    settings = TrainingSettings(lr=0.125, momentum=0.5, decay=0.25, batch=1)
    # one class: the loss gradient is 0, so g = 0 and g' = decay * w = 0.25
    later, report = train_step(layers, settings, state, np.ones((1, 1, 1, 1)),
                               np.array([0]))
    assert not report["nonfinite"] and report["loss"] == 0
    assert later.momenta[0][0][0, 0] == np.float32(0.75)      # 0.5 * 1 + 0.25
    assert later.weights[0][0][0, 0] == np.float32(0.90625)   # 1 - 0.125 * 0.75
    assert state.weights[0][0][0, 0] == 1 and state.step == 0 and later.step == 1


def test_overflow_sets_the_flag_and_keeps_the_weights():
    layers, state = _tiny()
    state.weights[1] = (np.full((10, 64), 3e38, np.float32), state.weights[1][1])
    x, y = _digits(8)
    later, report = train_step(layers, TrainingSettings(batch=8), state, x, y)
    assert report == {"loss": None, "correct": None, "nonfinite": True, "bit_ops": 0,
                      "macs": 0}
    assert later.step == 1 and later.weights is state.weights
    with pytest.raises(TrainingError, match="overflows"):
        evaluate(layers, TrainingSettings(), state, x)


def test_steps_and_seeds_draw_new_noise_and_repeat_exactly():
    layers, state = _tiny()
    x, y = _digits(16)
    settings = TrainingSettings(batch=16, widths=(4, 4, 4), lr=0.1)
    a, _ = train_step(layers, settings, state, x, y)
    b, _ = train_step(layers, settings, state, x, y)
    c, _ = train_step(layers, TrainingSettings(batch=16, widths=(4, 4, 4), lr=0.1, seed=1),
                      state, x, y)
    state.step = 1
    d, _ = train_step(layers, settings, state, x, y)
    assert all(np.array_equal(p, q) for p, q in zip(a.weights[0], b.weights[0]))
    assert not np.array_equal(a.weights[0][0], c.weights[0][0])
    assert not np.array_equal(a.weights[0][0], d.weights[0][0])


def test_a_short_run_learns_digits():
    layers, state = _tiny()
    x, y = _digits(512)
    settings = TrainingSettings(batch=32, widths=(6, 6, 6), lr=0.2, momentum=0.9,
                                decay=1e-4, seed=SEED)
    print("seed", SEED)
    before = (evaluate(layers, settings, state, x[:256])[0] == y[:256]).mean()
    losses = []
    for epoch in range(3):
        for start in range(0, 512, 32):
            state, report = train_step(layers, settings, state, x[start:start + 32],
                                       y[start:start + 32])
            losses.append(report["loss"])
    after = (evaluate(layers, settings, state, x[:256])[0] == y[:256]).mean()
    assert before < 0.3 and after > 0.8 and np.mean(losses[-8:]) < 0.5 * losses[0]


@pytest.mark.parametrize("layers,shape,message", [
    ([Conv(4, 1, 3), ReLU(), Flatten(), Dense(10, 100)], (1, 8, 8), "takes 100"),
    ([Conv(4, 1, 3, padding=3), Flatten()], (1, 8, 8), "padding below"),
    ([Conv(4, 1, 9), Flatten()], (1, 8, 8), "does not fit"),
    ([Conv(4, 1, 3), MaxPool(2)], (1, 8, 8), "ends in logits"),
    ([Conv(4, 1, 3), "softmax"], (1, 8, 8), "no backward pass"),
    ([Flatten()], (1, 8, 8), "ends in logits"),
])
def test_networks_a_program_cannot_express(layers, shape, message):
    with pytest.raises(TrainingError, match=message):
        check_network(layers, shape)


@pytest.mark.parametrize("settings,message", [
    (TrainingSettings(widths=(1, 8, 8)), "widths"),
    (TrainingSettings(widths=(8, 8)), "widths"),
    (TrainingSettings(widths=(8, 8, 9)), "widths"),
    (TrainingSettings(batch=0), "batch"),
    (TrainingSettings(batch=4097), "batch"),
    (TrainingSettings(lr=float("nan")), "lr"),
    (TrainingSettings(momentum=-1), "momentum"),
    (TrainingSettings(seed=1 << 32), "seed"),
])
def test_settings_out_of_range(settings, message):
    layers, state = _tiny()
    with pytest.raises(TrainingError, match=message):
        train_step(layers, settings, state, np.zeros((1, 1, 8, 8)), np.array([0]))


def test_bad_batches_and_weights():
    layers, state = _tiny()
    settings = TrainingSettings(batch=2)
    with pytest.raises(TrainingError, match="exceeds"):
        train_step(layers, settings, state, np.zeros((3, 1, 8, 8)), np.zeros(3, int))
    with pytest.raises(TrainingError, match="labels must lie"):
        train_step(layers, settings, state, np.zeros((1, 1, 8, 8)), np.array([10]))
    with pytest.raises(TrainingError, match="NaN"):
        train_step(layers, settings, state, np.full((1, 1, 8, 8), np.nan), np.array([0]))
    with pytest.raises(TrainingError, match="images must be"):
        train_step(layers, settings, state, np.zeros((1, 8, 8)), np.array([0]))
    with pytest.raises(TrainingError, match="do not fit"):
        initial_state(layers, [(np.zeros((4, 1, 3, 3)), np.zeros(4)),
                               (np.zeros((10, 63)), np.zeros(10))])
    with pytest.raises(TrainingError, match="2 array layers"):
        initial_state(layers, [])


def test_bit_operations():
    assert bit_ops_per_mac((8, 8, 8)) == 192 and bit_ops_per_mac((2, 4, 6)) == 8 + 12 + 24


def test_width_policy_chooses_every_so_many_steps_and_counts_bit_operations():
    from codnn.golden.bfp_training import WidthPolicy
    from codnn.golden.block_float import choose_mantissa, threshold
    layers, state = _tiny()
    x, y = _digits(16)
    policy = WidthPolicy(steps=10, every=2)
    settings = TrainingSettings(batch=16, lr=0.1, policy=policy, seed=SEED)
    first, report = train_step(layers, settings, state, x, y)
    arranged_input = x.transpose(0, 2, 3, 1)
    expected_ma = choose_mantissa(arranged_input, threshold(0, 2, 0, 10, 0.12, 0.05))
    expected_mw = choose_mantissa(state.weights[1][0], threshold(1, 2, 0, 10, 0.12, 0.05))
    assert report["widths"][0][1] == expected_ma and report["widths"][1][0] == expected_mw
    assert first.chosen == [list(w) for w in report["widths"]]
    macs = 16 * (4 * 64 * 9 + 10 * 64)
    assert report["macs"] == macs
    assert report["bit_ops"] == sum(n * (mw * ma + mw * mg + ma * mg) for n, (mw, ma, mg)
                                    in zip((16 * 4 * 64 * 9, 16 * 640), report["widths"]))
    # step 1 holds the choice whatever the tensors; step 2 chooses again
    first.weights = [(w * 0 + np.float32(1), b) for w, b in first.weights]
    second, report2 = train_step(layers, settings, first, x, y)
    assert report2["widths"] == report["widths"]
    third, report3 = train_step(layers, settings, second, x, y)
    assert report3["widths"][1][0] == 2            # all-equal weights: 2 bits are exact
    fixed = train_step(layers, TrainingSettings(batch=16), state, x, y)[1]
    assert fixed["bit_ops"] == 192 * macs and fixed["widths"] == [(8, 8, 8)] * 2
    with pytest.raises(TrainingError, match="policy"):
        train_step(layers, TrainingSettings(policy=WidthPolicy(steps=0)), state, x, y)
