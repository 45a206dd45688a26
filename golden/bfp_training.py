"""A training step in FAST's block floating point, as a training engine must compute it
(docs/semantics.md section 11): the forward pass keeping what the backward pass needs,
softmax cross-entropy's gradient, the backward pass (input gradients through the
transposed weights, weight gradients over blocks of output positions), and SGD with
momentum and weight decay on float32 master weights.

Every product's operands are rounded stochastically to blocks of 16 along that product's
sum (section 8's conversion; six tensor kinds, each with its own seed), each block pair's
dot product is exact, and the block products are accumulated in float32 in a fixed
order. ``train_step`` is the reference of one step; ``evaluate`` classifies with the
forward pass rounded to nearest."""

from dataclasses import dataclass, field

import numpy as np

from .block_float import EXPONENT_MIN, GROUP, choose_mantissa, threshold, to_block_float
from .term_quant import ungroup

__all__ = ["Conv", "Dense", "ReLU", "MaxPool", "Flatten", "WidthPolicy", "TrainingSettings",
           "TrainingState", "TrainingError", "WIDTHS", "check_network", "initial_state",
           "train_step", "evaluate", "loss_gradient", "bit_ops_per_mac", "block_term",
           "sgd_update"]

#: Mantissa widths a training program may take (FAST's).
WIDTHS = range(2, 9)
#: Largest mini-batch.
MAX_BATCH = 4096
#: ``fl32(log2(e))`` and the loss gradient's table ``T[i] = fl32(2**(i / 256))``.
LOG2E = np.float32(1.4426950408889634)
EXP2_TABLE = np.exp2(np.arange(256) / 256.0).astype(np.float32)
#: The loss gradient's exponent floor, in 1/256ths: ``e_j >= 2**-100``.
EXP_FLOOR = -100 * 256


class TrainingError(ValueError):
    """A network, setting or batch that a training program cannot take."""


@dataclass(frozen=True)
class Conv:
    """``filters`` x ``channels`` x ``kernel`` x ``kernel``, stride and padding on every
    side, a bias."""
    filters: int
    channels: int
    kernel: int
    stride: int = 1
    padding: int = 0


@dataclass(frozen=True)
class Dense:
    """``filters`` x ``channels``, a bias."""
    filters: int
    channels: int


@dataclass(frozen=True)
class ReLU:
    pass


@dataclass(frozen=True)
class MaxPool:
    """A ``size`` x ``size`` window, stride ``size``."""
    size: int


@dataclass(frozen=True)
class Flatten:
    pass


@dataclass(frozen=True)
class WidthPolicy:
    """FAST's choice of widths (section 8) for a run of ``steps`` steps: every ``every``
    steps, each tensor the narrowest of ``choices`` whose next step improves it by at most
    ``a - b*step/steps - b*layer/layers``."""
    steps: int
    a: float = 0.12
    b: float = 0.05
    every: int = 16
    choices: tuple = (2, 4, 6, 8)

    def check(self):
        if not (self.steps >= 1 and self.every >= 1 and self.choices
                and all(m in WIDTHS for m in self.choices)
                and all(b == a + 2 for a, b in zip(self.choices, self.choices[1:]))):
            raise TrainingError(f"a width policy needs steps and every of at least 1 and "
                                f"widths in 2..8 rising by 2, not {self}")


@dataclass(frozen=True)
class TrainingSettings:
    """Mantissa widths ``(mw, ma, mg)`` (or FAST's ``policy``), SGD's float32 rate,
    momentum and decay, the mini-batch and the noise seed."""
    widths: tuple = (8, 8, 8)
    lr: float = 0.01
    momentum: float = 0.9
    decay: float = 0.0
    batch: int = 64
    seed: int = 0
    policy: WidthPolicy = None

    def check(self):
        if len(self.widths) != 3 or any(m not in WIDTHS for m in self.widths):
            raise TrainingError(f"widths must be three mantissa widths in 2..8 (weights, "
                                f"activations, gradients), not {self.widths!r}")
        if self.policy is not None:
            self.policy.check()
        for name in ("lr", "momentum", "decay"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise TrainingError(f"{name} must be a finite number >= 0, not {value!r}")
        if not 1 <= self.batch <= MAX_BATCH:
            raise TrainingError(f"batch must lie in 1..{MAX_BATCH}, not {self.batch}")
        if not 0 <= self.seed < 1 << 32:
            raise TrainingError(f"seed must be a 32-bit unsigned integer, not {self.seed}")


@dataclass
class TrainingState:
    """Master weights ``[(W, b), ...]`` and momenta of the array layers (float32), the
    number of steps taken, and the widths ``(mw, ma, mg)`` a policy chose last per array
    layer (None: the settings' widths)."""
    weights: list
    momenta: list = field(default=None)
    step: int = 0
    chosen: list = None

    def __post_init__(self):
        if self.momenta is None:
            self.momenta = [tuple(np.zeros_like(a) for a in pair) for pair in self.weights]


def _array_layers(layers):
    return [layer for layer in layers if isinstance(layer, (Conv, Dense))]


def check_network(layers, input_shape):
    """The shape after each layer of a chain on ``input_shape`` (``C x H x W``); a
    ``TrainingError`` naming the first layer that does not fit."""
    shape = tuple(input_shape)
    shapes = []
    for k, layer in enumerate(layers):
        where = f"layer {k} ({type(layer).__name__})"
        if isinstance(layer, Conv):
            if len(shape) != 3 or shape[0] != layer.channels:
                raise TrainingError(f"{where} takes {layer.channels} channels, not {shape}")
            if not (layer.kernel >= 1 and layer.stride >= 1
                    and 0 <= layer.padding < layer.kernel):
                raise TrainingError(f"{where}: kernel and stride must be at least 1 and "
                                    f"the padding below the kernel")
            size = [(n + 2 * layer.padding - layer.kernel) // layer.stride + 1
                    for n in shape[1:]]
            if min(size) < 1:
                raise TrainingError(f"{where}: a {layer.kernel} x {layer.kernel} kernel "
                                    f"does not fit a {shape[1]} x {shape[2]} map")
            shape = (layer.filters, *size)
        elif isinstance(layer, Dense):
            if len(shape) != 1 or shape[0] != layer.channels:
                raise TrainingError(f"{where} takes {layer.channels} features, not {shape}")
            shape = (layer.filters,)
        elif isinstance(layer, MaxPool):
            if len(shape) != 3 or layer.size < 1 or min(shape[1:]) < layer.size:
                raise TrainingError(f"{where}: a {layer.size} x {layer.size} window on "
                                    f"{shape}")
            shape = (shape[0], shape[1] // layer.size, shape[2] // layer.size)
        elif isinstance(layer, Flatten):
            shape = (int(np.prod(shape)),)
        elif not isinstance(layer, ReLU):
            raise TrainingError(f"{where}: a training program has no backward pass for it "
                                f"(conv, dense, relu, maxpool and flatten only)")
        shapes.append(shape)
    if not shapes or shapes[-1] != (shapes[-1][0],) or not _array_layers(layers):
        raise TrainingError("a training program ends in logits: a vector of class scores")
    return shapes


def initial_state(layers, weights):
    """A state of float32 master weights ``[(W, b), ...]`` (one pair per array layer, in
    its shape), zero momenta, step 0."""
    arrays = _array_layers(layers)
    if len(weights) != len(arrays):
        raise TrainingError(f"{len(arrays)} array layers need as many weight pairs, "
                            f"not {len(weights)}")
    pairs = []
    for layer, (W, b) in zip(arrays, weights):
        shape = ((layer.filters, layer.channels, layer.kernel, layer.kernel)
                 if isinstance(layer, Conv) else (layer.filters, layer.channels))
        W, b = np.asarray(W, np.float32), np.asarray(b, np.float32)
        if W.shape != shape or b.shape != (layer.filters,):
            raise TrainingError(f"weights {W.shape} and bias {b.shape} do not fit {layer}")
        if not (np.all(np.isfinite(W)) and np.all(np.isfinite(b))):
            raise TrainingError("initial weights must be finite")
        pairs.append((W.copy(), b.copy()))
    return TrainingState(pairs)


class _NonFinite(Exception):
    """A value of the step is an infinity or NaN (section 11's ``nonfinite``)."""


def _finite(x):
    if not np.all(np.isfinite(x)):
        raise _NonFinite
    return x


@dataclass(frozen=True)
class _Rounding:
    """How a step rounds: stochastic with step ``step``'s seeds, or to nearest."""
    seed: int
    step: int
    stochastic: bool

    def blocks(self, arranged, m, layer, kind):
        """``(E, M)`` of ``arranged`` (blocks along its last axis)."""
        seed = (self.seed + 1000003 * self.step + 7919 * layer + kind) % (1 << 32)
        return to_block_float(_finite(arranged), m, g=GROUP, seed=seed,
                              rounding="stochastic" if self.stochastic else "nearest")


def _value(E, M, m, size):
    """The float32 values of blocks ``(E, M)`` (exact: at most 8 bits, above 2**-136)."""
    return ungroup(np.ldexp(M.astype(np.float64), (E - m + 1)[..., None]),
                   size).astype(np.float32)


def _term(P, q):
    """``fl32(P * 2**q)`` (``P`` exact integers as float64; overflow gives an infinity)."""
    with np.errstate(over="ignore"):
        return np.ldexp(P, q).astype(np.float32)


def _add_blocks(acc, P, q):
    """``acc = fl32(acc + fl32(P * 2**q))``: one block pair's exact dot product added."""
    with np.errstate(over="ignore", invalid="ignore"):     # overflow: inf, then flagged
        return acc + _term(P, q)


def block_term(Ea, Ma, Eb, Mb, m, m2):
    """One block pair's term of section 11's sums, ``fl32(P * 2**(Ea + Eb - m - m2 +
    2))`` with ``P = sum_j Ma_j * Mb_j`` exact (``Ma``, ``Mb``: ``... x g`` mantissas of
    widths ``m`` and ``m2``; ``Ea``, ``Eb``: their exponents); float32, the shape of
    ``Ea``."""
    P = (np.asarray(Ma, np.int64) * np.asarray(Mb, np.int64)).sum(axis=-1)
    return _term(P.astype(np.float64), np.asarray(Ea) + np.asarray(Eb) + 2 - m - m2)


def _block_conv(maps, kernel, widths, stride, out_size, init):
    """Section 11's block convolution. ``maps = (E, M)``: ``N x Hp x Wp x B`` blocks of the
    padded (dilated) input; ``kernel = (E, M)``: ``F x k x k x B``. Returns ``N x Ho x Wo
    x F`` float32, pairs taken over blocks, then kernel rows, then kernel columns."""
    (Ex, Mx), (Ew, Mw) = maps, kernel
    F, k = Mw.shape[0], Mw.shape[1]
    N, (Ho, Wo) = Mx.shape[0], out_size
    acc = np.broadcast_to(np.asarray(init, np.float32), (N * Ho * Wo, F)).copy()
    offset = 2 - widths[0] - widths[1]
    for b in range(Mx.shape[3]):
        for ky in range(k):
            rows = slice(ky, ky + stride * (Ho - 1) + 1, stride)
            for kx in range(k):
                cols = slice(kx, kx + stride * (Wo - 1) + 1, stride)
                x = Mx[:, rows, cols, b].reshape(-1, GROUP).astype(np.float64)
                P = x @ Mw[:, ky, kx, b].T.astype(np.float64)
                q = Ex[:, rows, cols, b].reshape(-1, 1) + Ew[None, :, ky, kx, b] + offset
                acc = _add_blocks(acc, P, q)
    return acc.reshape(N, Ho, Wo, F)


def _block_rows(a, b, widths):
    """``out[r, s]`` from row blocks ``a = (E, M)`` (``R x B``) and ``b`` (``S x B``),
    over the blocks in order, from ``+0.0``: the weight gradient's sum."""
    (Ea, Ma), (Eb, Mb) = a, b
    acc = np.zeros((Ma.shape[0], Mb.shape[0]), np.float32)
    offset = 2 - widths[0] - widths[1]
    for k in range(Ma.shape[1]):
        P = Ma[:, k].astype(np.float64) @ Mb[:, k].T.astype(np.float64)
        acc = _add_blocks(acc, P, Ea[:, k, None] + Eb[None, :, k] + offset)
    return acc


def _pad_blocks(E, M, before, after, dilation=1):
    """Blocks ``N x H x W x B`` spread ``dilation`` apart and padded with zero blocks."""
    N, H, W, B = E.shape
    size = [(n - 1) * dilation + 1 + before + extra for n, extra in zip((H, W), after)]
    Ep = np.full((N, *size, B), EXPONENT_MIN, np.int64)
    Mp = np.zeros((N, *size, B, GROUP), np.int64)
    rows = slice(before, before + (H - 1) * dilation + 1, dilation)
    cols = slice(before, before + (W - 1) * dilation + 1, dilation)
    Ep[:, rows, cols], Mp[:, rows, cols] = E, M
    return Ep, Mp


def _as_conv(layer):
    """A dense layer as a 1 x 1 convolution over a 1 x 1 map."""
    return layer if isinstance(layer, Conv) else Conv(layer.filters, layer.channels, 1)


def _im2col_positions(x, conv, out_size):
    """``(C*k*k) x (N*Ho*Wo)``: row ``(c, ky, kx)``, column ``(n, oy, ox)`` (kind 5's
    arrangement; zeros outside the map)."""
    N, C = x.shape[:2]
    k, s, p = conv.kernel, conv.stride, conv.padding
    Ho, Wo = out_size
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    cols = np.empty((C, k, k, N, Ho, Wo), np.float32)
    for ky in range(k):
        for kx in range(k):
            window = xp[:, :, ky:ky + s * (Ho - 1) + 1:s, kx:kx + s * (Wo - 1) + 1:s]
            cols[:, ky, kx] = window.transpose(1, 0, 2, 3)
    return cols.reshape(C * k * k, N * Ho * Wo)


def _maps(x, channels):
    """An activation or gradient as ``N x C x H x W`` (a vector as a 1 x 1 map)."""
    return x.reshape(x.shape[0], channels, *(x.shape[2:] or (1, 1)))


def _arranged(layer, kind, tensor):
    """Kinds 0, 1 and 2's arrangements (blocks along channels) of the layer's input, its
    weights and its output gradient."""
    conv = _as_conv(layer)
    if kind == 1:
        return tensor.reshape(conv.filters, conv.channels, conv.kernel,
                              conv.kernel).transpose(0, 2, 3, 1)
    return _maps(tensor, conv.filters if kind == 2 else conv.channels).transpose(0, 2, 3, 1)


def _array_forward(layer, index, W, b, x, widths, rounding):
    """The forward product: ``(Y, X^)`` (``X^`` the rounded input, kept)."""
    mw, ma, _ = widths
    conv = _as_conv(layer)
    x4 = _maps(x, conv.channels)
    p, C = conv.padding, conv.channels
    Ex, Mx = rounding.blocks(_arranged(layer, 0, x), ma, index, 0)
    kept = _value(Ex, Mx, ma, C).transpose(0, 3, 1, 2)
    kernel = rounding.blocks(_arranged(layer, 1, W), mw, index, 1)
    out = [(n + 2 * p - conv.kernel) // conv.stride + 1 for n in x4.shape[2:]]
    Y = _block_conv(_pad_blocks(Ex, Mx, p, (p, p)), kernel, (ma, mw), conv.stride, out, b)
    Y = Y.transpose(0, 3, 1, 2)
    return (Y if isinstance(layer, Conv) else Y[:, :, 0, 0]), kept.reshape(x.shape)


def _array_backward(layer, index, W, dY, kept, widths, rounding, first):
    """``(dW, db, dX)`` of an array layer (``dX`` None for layer 0)."""
    mw, ma, mg = widths
    conv = _as_conv(layer)
    k, s, p, C, F = conv.kernel, conv.stride, conv.padding, conv.channels, conv.filters
    dY4, x4 = _maps(dY, F), _maps(kept, C)
    out_size = dY4.shape[2:]
    rows = rounding.blocks(dY4.transpose(1, 0, 2, 3).reshape(F, -1), mg, index, 4)
    cols = rounding.blocks(_im2col_positions(x4, conv, out_size), ma, index, 5)
    dW = _finite(_block_rows(rows, cols, (mg, ma)).reshape(W.shape))
    ones = (np.zeros((1, rows[0].shape[1]), np.int64),
            np.full((1, rows[0].shape[1], GROUP), 1 << (mg - 1), np.int64))
    db = _finite(_block_rows(rows, ones, (mg, mg))[:, 0])
    if first:
        return dW, db, None
    Eg, Mg = rounding.blocks(_arranged(layer, 2, dY), mg, index, 2)
    W4 = W.reshape(F, C, k, k)
    Et, Mt = rounding.blocks(W4.transpose(1, 2, 3, 0), mw, index, 3)
    flipped = (Et[:, ::-1, ::-1], Mt[:, ::-1, ::-1])
    H, Wd = x4.shape[2:]
    extra = [n + 2 * p - k - (o - 1) * s for n, o in zip((H, Wd), out_size)]
    padded = _pad_blocks(Eg, Mg, k - 1 - p, [k - 1 - p + e for e in extra], dilation=s)
    dX = _block_conv(padded, flipped, (mg, mw), 1, (H, Wd), 0.0).transpose(0, 3, 1, 2)
    return dW, db, _finite(dX).reshape(kept.shape)


def _pool_forward(x, size):
    """``(out, choice)``: each window's largest value, the first in row-major order on a
    tie, and its index in the window."""
    N, C, H, W = x.shape
    Ho, Wo = H // size, W // size
    windows = (x[:, :, :Ho * size, :Wo * size].reshape(N, C, Ho, size, Wo, size)
               .transpose(0, 1, 2, 4, 3, 5).reshape(N, C, Ho, Wo, size * size))
    choice = windows.argmax(axis=-1)
    return np.take_along_axis(windows, choice[..., None], -1)[..., 0], choice


def _pool_backward(dY, choice, size, shape):
    N, C, Ho, Wo = dY.shape
    windows = np.zeros((N, C, Ho, Wo, size * size), np.float32)
    np.put_along_axis(windows, choice[..., None], dY[..., None], -1)
    dX = np.zeros(shape, np.float32)
    dX[:, :, :Ho * size, :Wo * size] = (windows.reshape(N, C, Ho, Wo, size, size)
                                        .transpose(0, 1, 2, 4, 3, 5)
                                        .reshape(N, C, Ho * size, Wo * size))
    return dX


def _choose(policy, step, widths, layer, index, kind, tensor, layers):
    """Under ``policy``, at a step it chooses, the width of kind ``kind``'s tensor (0
    input, 1 weights, 2 output gradient) of array layer ``index``, set in ``widths``."""
    if policy is None or step % policy.every:
        return
    eps = threshold(index, layers, min(step, policy.steps), policy.steps, policy.a,
                    policy.b)
    slot = {1: 0, 0: 1, 2: 2}[kind]
    widths[index][slot] = choose_mantissa(_finite(_arranged(layer, kind, tensor)), eps,
                                          widths=policy.choices)


def _forward(layers, state, x, widths, rounding, policy=None):
    """The forward pass: the logits and what each layer keeps (``widths``, a list of
    per-layer ``[mw, ma, mg]``, takes ``policy``'s choices)."""
    kept, a, count = [], 0, len(_array_layers(layers))
    for layer in layers:
        if isinstance(layer, (Conv, Dense)):
            W, b = state.weights[a]
            for kind, tensor in ((0, x), (1, W)):
                _choose(policy, state.step, widths, layer, a, kind, tensor, count)
            x, saved = _array_forward(layer, a, W, b, x, widths[a], rounding)
            a += 1
        elif isinstance(layer, ReLU):
            saved = x > 0
            x = np.where(saved, x, np.float32(0))
        elif isinstance(layer, MaxPool):
            saved = x.shape
            x, choice = _pool_forward(x, layer.size)
            saved = (saved, choice)
        else:
            saved = x.shape
            x = x.reshape(x.shape[0], -1)
        kept.append(saved)
    return _finite(x), kept


def loss_gradient(logits, labels):
    """Section 11's softmax cross-entropy: ``(gradient, loss)``; the gradient float32
    (already divided by the batch), the loss a float64 mean for the host."""
    z = np.asarray(logits, np.float32)
    d = z - z.max(axis=1, keepdims=True)
    t = np.maximum(np.rint((d * LOG2E).astype(np.float32) * np.float32(256)), EXP_FLOOR)
    t = t.astype(np.int64)
    e = np.ldexp(EXP2_TABLE[t & 255], t >> 8).astype(np.float32)
    S = np.zeros(len(z), np.float32)
    for j in range(z.shape[1]):
        S = S + e[:, j]
    p = e / S[:, None]
    onehot = np.zeros_like(p)
    onehot[np.arange(len(z)), labels] = 1
    gradient = (p - onehot) / np.float32(len(z))
    rows = np.arange(len(z))
    loss = float(np.mean(np.log(S.astype(np.float64))
                         - np.log(e[rows, labels].astype(np.float64))))
    return gradient.astype(np.float32), loss


def _check_batch(layers, images, labels=None, classes=None):
    images = np.asarray(images)
    if images.ndim != 4 or not np.issubdtype(images.dtype, np.floating):
        raise TrainingError(f"images must be float N x C x H x W, not {images.dtype} "
                            f"{images.shape}")
    if not np.all(np.isfinite(images)):
        raise TrainingError("images hold NaN or infinite values")
    shapes = check_network(layers, images.shape[1:])
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != images.shape[:1] or not np.issubdtype(labels.dtype, np.integer):
            raise TrainingError(f"labels must be {len(images)} integers, not "
                                f"{labels.dtype} {labels.shape}")
        if labels.min() < 0 or labels.max() >= shapes[-1][0]:
            raise TrainingError(f"labels must lie in 0..{shapes[-1][0] - 1}")
    return images.astype(np.float32), labels


def train_step(layers, settings, state, images, labels):
    """One training step on a mini-batch. Returns ``(state, report)``: the new state (the
    old one is left as it was) and ``{"loss", "correct", "nonfinite", "macs", "bit_ops",
    "widths"}`` (``loss`` None and the weights unchanged when ``nonfinite``)."""
    settings.check()
    images, labels = _check_batch(layers, images, labels)
    if len(images) > settings.batch:
        raise TrainingError(f"a mini-batch of {len(images)} images exceeds the program's "
                            f"batch of {settings.batch}")
    rounding = _Rounding(settings.seed, state.step, True)
    arrays = _array_layers(layers)
    widths = _widths(settings, state, len(arrays))
    later = TrainingState(state.weights, state.momenta, state.step + 1, state.chosen)
    try:
        logits, kept = _forward(layers, state, images, widths, rounding, settings.policy)
        gradient, loss = loss_gradient(logits, labels)
        grads, a = [None] * len(arrays), len(arrays)
        for layer, saved in zip(reversed(layers), reversed(kept)):
            if isinstance(layer, (Conv, Dense)):
                a -= 1
                _choose(settings.policy, state.step, widths, layer, a, 2, gradient,
                        len(arrays))
                dW, db, gradient = _array_backward(layer, a, state.weights[a][0], gradient,
                                                   saved, widths[a], rounding, a == 0)
                grads[a] = (dW, db)
                if a == 0:
                    break                     # nothing before layer 0 has weights
            elif isinstance(layer, ReLU):
                gradient = np.where(saved, gradient, np.float32(0))
            elif isinstance(layer, MaxPool):
                gradient = _pool_backward(gradient, saved[1], layer.size, saved[0])
            else:
                gradient = gradient.reshape(saved)
        weights, momenta = _update(settings, state, grads)
    except _NonFinite:
        return later, {"loss": None, "correct": None, "nonfinite": True, "bit_ops": 0,
                       "macs": 0}
    correct = int((logits.argmax(axis=1) == labels).sum())
    macs = [len(images) * _macs(layer, shape) for layer, shape in
            zip(layers, check_network(layers, images.shape[1:]))
            if isinstance(layer, (Conv, Dense))]
    return (TrainingState(weights, momenta, state.step + 1,
                          None if settings.policy is None else widths),
            {"loss": loss, "correct": correct, "nonfinite": False, "macs": sum(macs),
             "bit_ops": sum(n * bit_ops_per_mac(w) for n, w in zip(macs, widths)),
             "widths": [tuple(w) for w in widths]})


def _widths(settings, state, count):
    """This step's ``[mw, ma, mg]`` per array layer: the policy's last choice, else the
    settings'."""
    source = state.chosen if state.chosen is not None else [settings.widths] * count
    return [list(w) for w in source]


def _macs(layer, out_shape):
    """Forward multiply-accumulates of an array layer per image."""
    conv = _as_conv(layer)
    return int(np.prod(out_shape)) * conv.channels * conv.kernel ** 2


def sgd_update(w, v, g, lr, momentum, decay):
    """Section 11's update of float32 weights ``w`` with momenta ``v`` and gradients
    ``g``: ``(w', v')``, ``v' = fl32(fl32(momentum * v) + fl32(g + fl32(decay * w)))``,
    ``w' = fl32(w - fl32(lr * v'))`` (an overflow gives an infinity)."""
    lr, momentum, decay = (np.float32(x) for x in (lr, momentum, decay))
    w, v, g = (np.asarray(x, np.float32) for x in (w, v, g))
    with np.errstate(over="ignore", invalid="ignore"):
        v = momentum * v + (g + decay * w)
        return w - lr * v, v


def _update(settings, state, grads):
    """SGD with momentum and weight decay, in float32, on every ``W`` then ``b``."""
    weights, momenta = [], []
    for params, moments, gradients in zip(state.weights, state.momenta, grads):
        pairs = []
        for w, v, g in zip(params, moments, gradients):
            w, v = sgd_update(w, v, g, settings.lr, settings.momentum, settings.decay)
            pairs.append((_finite(w), _finite(v)))
        weights.append(tuple(w for w, _ in pairs))
        momenta.append(tuple(v for _, v in pairs))
    return weights, momenta


def evaluate(layers, settings, state, images):
    """``(classes, logits)``: the forward pass rounded to nearest, the first largest
    logit's class. ``TrainingError`` if a value overflows."""
    images, _ = _check_batch(layers, images)
    try:
        logits, _ = _forward(layers, state, images,
                             _widths(settings, state, len(_array_layers(layers))),
                             _Rounding(0, 0, False))
    except _NonFinite:
        raise TrainingError("the forward pass overflows float32 (a non-finite "
                            "value)") from None
    return logits.argmax(axis=1), logits


def bit_ops_per_mac(widths):
    """FAST's bit operations per forward multiply-accumulate of a training step."""
    mw, ma, mg = widths
    return mw * ma + mw * mg + ma * mg
