"""Synthetic layers with the structure of trained ones, and a small network with every
step kind, for tests and demos.

Trained filters are not uniformly sparse: some input channels and some filters carry much
more weight than others. ``structured_layer`` draws ``w[r, c] = s_r * t_c * z`` with
log-normal row and channel scales and Gaussian ``z``, then magnitude-prunes it, so the
surviving nonzeros cluster in strong rows and columns as in a pruned network.
"""

import dataclasses

import numpy as np

from .column_combining import pack
from .joint_optimization import magnitude_prune
from .network import Add, ArrayLayer, Concat, Flatten, IntegerNetwork, Pool

__all__ = ["structured_layer", "quantize_symmetric", "random_layer", "residual_network",
           "pooled_network", "padded_network", "projection_network", "bottleneck_network",
           "concat_network"]


def structured_layer(rng, rows, cols, sparsity, spread=0.8):
    """A float ``rows x cols`` layer, magnitude-pruned to ``sparsity`` (fraction of zeros)."""
    if not 0 <= sparsity < 1:
        raise ValueError(f"Sparsity must lie in [0, 1), not {sparsity!r}")
    w = (rng.lognormal(0, spread, (rows, 1)) * rng.lognormal(0, spread, (1, cols))
         * rng.standard_normal((rows, cols)))
    return np.where(magnitude_prune(w, sparsity), w, 0.0)


def quantize_symmetric(w, bits):
    """Round to integers in ``-(2**(bits-1)-1) .. 2**(bits-1)-1`` with one scale per tensor;
    return ``(q, scale)``. Nonzero weights that round to zero are kept at +-1 so the
    sparsity pattern survives."""
    w = np.asarray(w, dtype=np.float64)
    top = (1 << (bits - 1)) - 1
    peak = np.abs(w).max()
    scale = peak / top if peak > 0 else 1.0
    q = np.clip(np.round(w / scale), -top, top).astype(np.int64)
    q = np.where((q == 0) & (w != 0), np.sign(w).astype(np.int64), q)
    return q, scale


def random_layer(rng, name, source, output, filters, columns, *, shift, kernel=0, stride=1,
                 padding=0, alpha=2, tq=None, multiplier=None):
    """An ``ArrayLayer`` of random 8-bit weights, 60 % of them zero, packed with ``alpha``
    (gamma 0.5), and random biases."""
    weights = rng.integers(-127, 128, (filters, columns))
    weights[rng.random(weights.shape) < 0.6] = 0
    return ArrayLayer(name, source, output, pack(weights, alpha, 0.5),
                      rng.integers(-2000, 2000, filters), shift, kernel=kernel,
                      stride=stride, padding=padding, tq=tq, multiplier=multiplier)


def residual_network(rng, *, alpha=2, tq=None, requant="shift"):
    """An integer network with every step kind: 3 x 8 x 8 -> 3 x 3 conv (a shift per
    output channel, 31 the largest) -> 3 x 3 conv
    (``tq``: term-quantized) -> residual add -> 2 x 2 max pool -> 1 x 1 conv -> global
    average -> flatten -> dense logits, layers packed with ``alpha``. With ``requant``
    ``"multiplier"`` the output stages multiply before they shift, by a multiplier per
    channel in the first and last convolutions (0, 1, 2 and 65535 among them; shifts 8
    to 47), by one in the second."""
    def layer(*args, **kwargs):
        return random_layer(rng, *args, alpha=alpha, **kwargs)
    if requant == "multiplier":
        first = {"shift": np.array([24, 8, 10, 24, 22, 23, 22, 9]),
                 "multiplier": np.array([65535, 1, 0, 40000, 32768, 12345, 50000, 2])}
        second = {"shift": 24, "multiplier": 45000}
        third = {"shift": np.array([23, 47, 23, 40, 9, 23]),
                 "multiplier": np.array([30001, 65535, 30001, 65535, 1, 30001])}
    else:
        first = {"shift": np.array([9, 8, 10, 9, 7, 11, 9, 31])}
        second, third = {"shift": 11}, {"shift": 8}
    steps = (
        layer("conv_a", "x", "a", 8, 3 * 9, **first, kernel=3, padding=1),
        layer("conv_b", "a", "b", 8, 8 * 9, **second, kernel=3, padding=1, tq=tq),
        Add("add", "b", "a", "s", ma=40000, mb=30000),
        Pool("pool", "s", "p", "max", kernel=2, stride=2),
        layer("conv_c", "p", "c", 6, 8, **third, kernel=1),
        Pool("gap", "c", "g", "avg", kernel=0),
        Flatten("flat", "g", "f"),
        layer("fc", "f", "y", 10, 6, shift=None),
    )
    return IntegerNetwork(steps, "x", "y", (3, 8, 8), 1.0, 1.0)


def pooled_network(rng, *, alpha=2):
    """Convolutions each followed by a 2 x 2 max pooling (the network engine fuses them)
    on maps of odd sides: 3 x 11 x 13 -> 3 x 3 conv, padding 1, 10 filters -> pool to 10
    x 5 x 6 (the last row and column dropped) -> 2 x 2 conv over its 40 inputs -> pool to
    6 x 2 x 2 (from 4 x 5) -> flatten -> dense logits."""
    def layer(*args, **kwargs):
        return random_layer(rng, *args, alpha=alpha, **kwargs)
    return IntegerNetwork((
        layer("conv_a", "x", "a", 10, 3 * 9, shift=9, kernel=3, padding=1),
        Pool("pool_a", "a", "p", "max", kernel=2, stride=2),
        layer("conv_b", "p", "b", 6, 10 * 4, shift=np.array([10, 9, 11, 10, 8, 10]),
              kernel=2),
        Pool("pool_b", "b", "q", "max", kernel=2, stride=2),
        Flatten("flat", "q", "f"),
        layer("fc", "f", "y", 10, 6 * 4, shift=None)),
        "x", "y", (3, 11, 13), 1.0, 1.0)


def padded_network(rng, *, alpha=2):
    """Windows padded differently on their sides, as other exporters write them
    (TensorFlow's SAME padding, ``ceil_mode`` pooling): 3 x 10 x 10 -> 3 x 3 conv, stride
    2, padding (0, 1) -> 2 x 2 max pool, stride 2, padding (0, 1) -> 3 x 3 conv, padding
    (top 1, left 0, bottom 0, right 1) -> 2 x 2 average pool, padding (1, 0) -> global
    average -> flatten -> dense logits."""
    def layer(*args, **kwargs):
        return random_layer(rng, *args, alpha=alpha, **kwargs)
    return IntegerNetwork((
        layer("same", "x", "a", 6, 3 * 9, shift=9, kernel=3, stride=2, padding=(0, 1)),
        Pool("ceil_max", "a", "m", "max", kernel=2, stride=2, padding=(0, 1)),
        layer("lower", "m", "b", 5, 6 * 9, shift=10, kernel=3, padding=(1, 0, 0, 1)),
        Pool("ceil_avg", "b", "v", "avg", kernel=2, stride=1, padding=(1, 0)),
        Pool("gap", "v", "g", "avg", kernel=0),
        Flatten("flat", "g", "f"),
        layer("fc", "f", "y", 10, 5, shift=None)),
        "x", "y", (3, 10, 10), 1.0, 1.0)


def projection_network(rng, *, alpha=2):
    """ResNet's two kinds of block as ``codnn.model.quantize`` writes them, each branch
    ending without an output stage (its accumulators go to the add): 3 x 8 x 8 -> 3 x 3
    conv -> (3 x 3 conv, stride 2) + (1 x 1 conv, stride 2: the projection) -> add -> (3 x
    3 conv -> 3 x 3 conv) + the identity -> add -> global average -> flatten -> dense
    logits."""
    def layer(*args, **kwargs):
        return random_layer(rng, *args, alpha=alpha, **kwargs)
    return IntegerNetwork((
        layer("stem", "x", "s", 4, 3 * 9, shift=9, kernel=3, padding=1),
        layer("body_a", "s", "a", 6, 4 * 9, shift=None, kernel=3, stride=2, padding=1),
        layer("projection", "s", "p", 6, 4, shift=None, kernel=1, stride=2),
        Add("join_a", "a", "p", "j", ma=500, mb=1200),
        layer("body_b", "j", "b", 6, 6 * 9, shift=8, kernel=3, padding=1),
        layer("body_c", "b", "c", 6, 6 * 9, shift=None, kernel=3, padding=1),
        Add("join_b", "c", "j", "k", ma=1500, mb=70000),
        Pool("gap", "k", "g", "avg", kernel=0),
        Flatten("flat", "g", "f"),
        layer("fc", "f", "y", 10, 6, shift=None)),
        "x", "y", (3, 8, 8), 1.0, 1.0)


def bottleneck_network(rng, *, alpha=2):
    """MobileNet-v2's linear bottlenecks as ``codnn.model.quantize`` writes them: 3 x 6 x 6
    -> 3 x 3 stem -> (1 x 1 expand, 3 x 3, 1 x 1 project to accumulators) + the stem ->
    add without ReLU (signed, offset binary) -> (1 x 1 expand reading signed codes, 3 x 3,
    1 x 1 project to signed codes) + the first add -> add of two signed operands -> 3 x 3,
    padded with the code 128 -> global average -> flatten -> dense logits."""
    def layer(*args, **kwargs):
        return random_layer(rng, *args, alpha=alpha, **kwargs)
    return IntegerNetwork((
        layer("stem", "x", "s", 6, 3 * 9, shift=8, kernel=3, padding=1),
        layer("expand_a", "s", "e", 10, 6, shift=7, kernel=1),
        layer("spatial_a", "e", "d", 10, 10 * 9, shift=8, kernel=3, padding=1),
        layer("project_a", "d", "p", 6, 10, shift=None, kernel=1),
        Add("join_a", "p", "s", "j", ma=3000, mb=40_000, signed_out=True),
        layer("expand_b", "j", "f", 10, 6, shift=9, kernel=1),
        layer("spatial_b", "f", "g", 10, 10 * 9, shift=8, kernel=3, padding=1),
        layer("project_b", "g", "q", 6, 10, shift=np.array([4, 5, 6, 5, 4, 6]), kernel=1),
        Add("join_b", "q", "j", "k", ma=60_000, mb=50_000, signed_a=True, signed_b=True,
            signed_out=True),
        dataclasses.replace(layer("head", "k", "h", 8, 6 * 9, shift=8, kernel=3, padding=1),
                            pad=128),
        Pool("gap", "h", "v", "avg", kernel=0),
        Flatten("flat", "v", "w"),
        layer("fc", "w", "y", 10, 8, shift=None)),
        "x", "y", (3, 6, 6), 1.0, 1.0)


def concat_network(rng, first_filters, *, alpha=2):
    """An integer network with a channel concatenation: two branches of a 2 x 4 x 4
    input (a 3 x 3 convolution of ``first_filters`` filters, a 1 x 1 of 3) side by side,
    max pooled, flattened, dense logits."""
    def layer(*args, **kwargs):
        return random_layer(rng, *args, alpha=alpha, **kwargs)
    return IntegerNetwork((
        layer("branch_a", "x", "a", first_filters, 2 * 9, shift=9, kernel=3, padding=1),
        layer("branch_b", "x", "b", 3, 2, shift=7, kernel=1),
        Concat("cat", "a", ("b",), "c", (50000, 70000)),
        Pool("pool", "c", "p", "max", kernel=2, stride=2),
        Flatten("flat", "p", "f"),
        layer("fc", "f", "y", 5, (first_filters + 3) * 4, shift=None)),
        "x", "y", (2, 4, 4), 1.0, 1.0)
