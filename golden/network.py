"""Integer reference of a whole network on the column-combined array (docs/semantics.md
section 7): the truth that every array run of a network must equal.

A network is a list of steps over named tensors, batch first (``B x C x H x W`` feature
maps, ``B x F`` vectors). Activations are unsigned ``out_bits``-bit integers (the array's
data), each with a float scale that the quantizer chose (``codnn.model.quantize``); the
steps themselves are integer only:

- ``ArrayLayer``: a convolution (im2col, columns ``(c, ky, kx)``) or a dense layer, run on
  the array as a packed layer: ``acc = wrap(F @ X + bias, acc_bits)`` with ``F`` the
  packed layer's (conflict-pruned) integer weights (on the TQ array: ``F`` term-revealed
  per group and ``X`` truncated to ``beta`` terms per value); with ``shift`` the array's
  output stage ``clamp(acc >> shift, 0, 2**out_bits - 1)`` gives the next activation (ReLU and
  requantization at once), without it the accumulators leave as they are (logits).
- ``Pool`` (host): max, or average rounded half up (``(sum + n // 2) // n``), over
  ``kernel x kernel`` windows; ``kernel == 0`` is the global average.
- ``Flatten`` (host): ``B x C x H x W`` to ``B x (C*H*W)``, channel-major like ONNX.
- ``Add`` (host): ``clamp((a * ma + b * mb + 2**(FRACTION-1)) >> FRACTION, 0, 2**out_bits-1)``
  with fixed-point multipliers ``ma``, ``mb`` that bring both inputs to the output's scale
  (a residual add followed by its ReLU); without the ReLU (a linear bottleneck) the
  output, and any operand so made, is a signed value in offset binary.

Signed activations (a layer without an activation whose output a layer reads, an add
without a ReLU) are stored in offset binary, ``code = value + 2**(out_bits-1)``: the
column-combined array still takes unsigned data, and a layer that reads such a tensor
there has ``2**(out_bits-1) * sum(F[n])`` taken off its bias (the TQ array, whose data
are sign-magnitude, takes the values themselves, ``code - 2**(out_bits-1)``, before
truncation, and its bias keeps nothing for the offset); a layer that writes one has
``2**(out_bits-1) << shift`` added to its bias, so its output stage's clamp saturates the
signed value.

Throughput: vectorized over the batch; LeNet-5 runs at thousands of images per second on
one core.
"""

from dataclasses import dataclass

import numpy as np

from .column_combining import PackedLayer, im2col, output_shape, padding_sides
from .systolic import output_stage, wrap
from .tq_array import packed_tq_products, tq_products

__all__ = ["FRACTION", "TermQuantization", "ArrayLayer", "Pool", "Flatten", "Add", "Concat",
           "IntegerNetwork", "batch_first", "conv_columns", "pool", "residual_add",
           "signed_value", "signed_code"]

#: Fraction bits of ``Add``'s multipliers.
FRACTION = 16


@dataclass(frozen=True)
class TermQuantization:
    """The TQ array's arithmetic (semantics section 3): weights revealed ``alpha`` terms per
    group of ``g`` input channels, each data value truncated to its top ``beta`` terms."""

    g: int
    alpha: int
    beta: int
    encoding: str = "naf"
    mag_bits: int = 7


@dataclass(frozen=True)
class ArrayLayer:
    """A convolution (``kernel >= 1``) or dense layer (``kernel == 0``) on the array.

    ``packed`` holds integer weights (``N x C*k*k`` or ``N x F`` before packing); ``bias``
    the ``N`` integers that enter as the first partial sums; ``shift`` the output stage's
    shift (one, or an array of one per output channel), or ``None`` for raw accumulators;
    ``multiplier`` the output stage's requantization multiplier before the shift (one, or
    one per output channel; ``None``: 1, the shift-only stage the arrays build);
    ``tq`` the TQ array's arithmetic, or ``None`` for the column-combined array's exact
    products; ``pad`` the code a padded position carries (0; the offset-binary zero,
    ``2**(out_bits-1)``, for a layer that reads signed codes); ``pool``: its codes
    max-pooled 2 x 2, stride 2 (the network engine's fused pooling: a convolution with an
    output stage and the max pooling after it, as one step); ``residual``: an ``Add``
    whose operand ``a`` is this layer's accumulators (no output stage) and whose
    ``other`` is read as the layer writes, its result the layer's output (the network
    engine's fused add: a residual branch's last layer and the add after it, as one
    step)."""

    name: str
    source: str
    output: str
    packed: PackedLayer
    bias: np.ndarray
    shift: int | np.ndarray | None
    kernel: int = 0
    stride: int = 1
    padding: int = 0
    tq: TermQuantization | None = None
    pad: int = 0
    multiplier: int | np.ndarray | None = None
    pool: bool = False
    residual: "Add | None" = None

    def columns(self, x):
        """The array's input vectors for ``x``: ``(C', T)`` and the output's shape after
        the batch (``(N, H_out, W_out)`` or ``(N,)``). The column-combined array takes the
        codes; the TQ array, whose data are sign-magnitude, the values ``code - pad``."""
        x = np.asarray(x)
        data_offset = self.pad if self.tq is None else 0
        if self.kernel == 0:
            if x.ndim != 2 or x.shape[1] != self.packed.columns:
                raise ValueError(f"{self.name}: expects B x {self.packed.columns} inputs, "
                                 f"not {x.shape}")
            return x.T.astype(np.int64) - self.pad + data_offset, (self.packed.rows,)
        if x.ndim != 4 or x.shape[1] * self.kernel ** 2 != self.packed.columns:
            raise ValueError(f"{self.name}: expects B x {self.packed.columns // self.kernel**2}"
                             f" x H x W inputs, not {x.shape}")
        X, positions = conv_columns(x.astype(np.int64) - self.pad, self.kernel, self.stride,
                                    self.padding)
        return X + data_offset, (self.packed.rows, *positions)

    def accumulate(self, X, acc_bits):
        """``wrap(F @ X + bias)``, shape ``(N, T)``, as the array computes it (on the TQ
        array, ``F`` revealed and ``X`` truncated; with ``tq`` and a packing that combines
        columns, ``packed.alpha > 1``, the column-combined TQ array's sum,
        ``packed_tq_products``: semantics section 3)."""
        X = np.asarray(X, dtype=np.int64)
        tq = self.tq
        if tq is None:
            products = self.packed.dense().astype(np.int64) @ X
        elif self.packed.alpha > 1:
            products = packed_tq_products(self.packed, X, g=tq.g, budget=tq.alpha,
                                          beta=tq.beta, encoding=tq.encoding,
                                          mag_bits=tq.mag_bits)
        else:
            products = tq_products(self.packed.dense(), X, g=tq.g, alpha=tq.alpha,
                                   beta=tq.beta, encoding=tq.encoding, mag_bits=tq.mag_bits)
        return wrap(products + self.bias[:, None], acc_bits)

    def finish(self, acc, batch, shape, out_bits):
        """The output tensor, batch first, from the accumulators ``(N, T)`` of ``batch``
        inputs (``shape`` as ``columns`` gives it): the output stage's, or ``acc``."""
        y = acc if self.shift is None else output_stage(
            acc, self.shift, out_bits, 1 if self.multiplier is None else self.multiplier)
        y = batch_first(y, batch, shape)
        return pool(y, "max", 2, 2, 0, False, integer=True) if self.pool else y

    def run(self, x, *, acc_bits, out_bits):
        X, shape = self.columns(x)
        return self.finish(self.accumulate(X, acc_bits), np.asarray(x).shape[0], shape,
                           out_bits)


@dataclass(frozen=True)
class Pool:
    """Max or average pooling on the host; ``kernel == 0``: global average."""

    name: str
    source: str
    output: str
    kind: str                   # "max" or "avg"
    kernel: int = 0
    stride: int = 1
    padding: int = 0
    count_pad: bool = False     # an average counts padded positions

    def run(self, x, **_):
        return pool(x, self.kind, self.kernel, self.stride, self.padding, self.count_pad,
                    integer=True)


@dataclass(frozen=True)
class Flatten:
    name: str
    source: str
    output: str

    def run(self, x, **_):
        x = np.asarray(x)
        return x.reshape(x.shape[0], -1)


@dataclass(frozen=True)
class Add:
    """``clamp((a * ma + b * mb + 2**(FRACTION-1)) >> FRACTION, 0, 2**out_bits - 1)``; a
    ``signed`` operand or output is offset binary (``signed_value``, ``signed_code``: no
    ReLU after the add, a linear bottleneck)."""

    name: str
    source: str
    other: str
    output: str
    ma: int
    mb: int
    signed_a: bool = False
    signed_b: bool = False
    signed_out: bool = False

    def combine(self, a, b, out_bits):
        """The add of operands ``a``, ``b`` (as stored)."""
        return residual_add(a, b, self, out_bits)


@dataclass(frozen=True)
class Concat:
    """Maps of equal size side by side along the channels, ``source`` first, then
    ``others``; part ``i`` requantized to the output's scale, ``clamp((x_i * m_i +
    2**(FRACTION-1)) >> FRACTION, 0, 2**out_bits - 1)`` with ``multipliers[i]``."""

    name: str
    source: str
    others: tuple
    output: str
    multipliers: tuple


def residual_add(a, b, step, out_bits):
    """``Add``'s result for operands ``a``, ``b`` as stored (codes, or accumulators) and
    ``step``'s ``ma``, ``mb``, ``signed_a``, ``signed_b``, ``signed_out``."""
    a = signed_value(a, out_bits) if step.signed_a else np.asarray(a, np.int64)
    b = signed_value(b, out_bits) if step.signed_b else np.asarray(b, np.int64)
    total = (a * step.ma + b * step.mb + (1 << (FRACTION - 1))) >> FRACTION
    if step.signed_out:
        return signed_code(total, out_bits)
    return np.clip(total, 0, (1 << out_bits) - 1)


def signed_value(code, out_bits):
    """The value of an offset-binary activation code: ``code - 2**(out_bits-1)``."""
    return np.asarray(code, np.int64) - (1 << (out_bits - 1))


def signed_code(value, out_bits):
    """The offset-binary code of a signed value, saturated: ``clamp(value, -2**(out_bits-1),
    2**(out_bits-1) - 1) + 2**(out_bits-1)``."""
    half = 1 << (out_bits - 1)
    return np.clip(np.asarray(value, np.int64), -half, half - 1) + half


def conv_columns(x, kernel, stride, padding):
    """A convolution's input vectors for a batch ``B x C x H x W`` (``im2col``) and its
    output map's ``(H_out, W_out)``."""
    return (im2col(x, kernel, stride, padding),
            output_shape(x.shape[2], x.shape[3], kernel, stride, padding))


def batch_first(y, batch, shape):
    """A layer's ``(N, B * positions)`` results as a tensor ``B x shape``."""
    return np.moveaxis(y.reshape(shape[0], batch, *shape[1:]), 1, 0)


def pool(x, kind, kernel, stride, padding, count_pad, *, integer):
    """Pool ``B x C x H x W`` maps; ``kernel == 0`` averages each whole map. Integer
    averages round half up; padding never wins a max (the maps are non-negative)."""
    x = np.asarray(x)
    if kernel == 0:
        n = x.shape[2] * x.shape[3]
        if integer:
            return (x.astype(np.int64).sum(axis=(2, 3), keepdims=True) + n // 2) // n
        return x.mean(axis=(2, 3), keepdims=True)
    b, c, h, w = x.shape
    cols, (h_out, w_out) = conv_columns(x.reshape(b * c, 1, h, w), kernel, stride,
                                        padding)                       # k*k x (b*c*pos)
    if kind == "max":
        out = cols.max(axis=0)
    else:
        if count_pad or padding_sides(padding) == ((0, 0), (0, 0)):
            n = np.full(cols.shape[1], kernel * kernel)
        else:
            n = im2col(np.ones((1, 1, h, w)), kernel, stride, padding).sum(axis=0)
            n = np.tile(n.astype(np.int64), b * c)
        total = cols.astype(np.int64 if integer else np.float64).sum(axis=0)
        out = (total + n // 2) // n if integer else total / n
    return out.reshape(b, c, h_out, w_out)


@dataclass(frozen=True)
class IntegerNetwork:
    """A quantized network: ``steps`` in order from the tensor ``input`` to ``output``.

    ``input_scale``: an input value ``x`` enters as ``clip(round(x / input_scale), 0,
    2**out_bits - 1)``. ``output_scale``: the float value of one unit of the output."""

    steps: tuple
    input: str
    output: str
    input_shape: tuple
    input_scale: float
    output_scale: float
    acc_bits: int = 32
    out_bits: int = 8

    @property
    def array_layers(self):
        return [step for step in self.steps if isinstance(step, ArrayLayer)]

    @property
    def requant(self):
        """The output stage it needs: ``"multiplier"`` when a layer's has a multiplier,
        else ``"shift"``."""
        return "multiplier" if any(layer.multiplier is not None and layer.shift is not None
                                   for layer in self.array_layers) else "shift"

    def quantize_input(self, x):
        """Float inputs (``B x input_shape``) to the array's unsigned integers."""
        x = np.asarray(x, dtype=np.float64)
        top = (1 << self.out_bits) - 1
        return np.clip(np.floor(x / self.input_scale + 0.5), 0, top).astype(np.int64)

    def run(self, q, *, keep=False):
        """Run integer inputs ``q`` (``B x input_shape``); return the output tensor, or
        every tensor by name with ``keep``."""
        q = np.asarray(q)
        if q.shape[1:] != tuple(self.input_shape):
            raise ValueError(f"inputs must have shape (B, {', '.join(map(str, self.input_shape))})"
                             f", not {q.shape}")
        tensors = {self.input: q.astype(np.int64)}
        for step in self.steps:
            tensors[step.output] = self.run_step(step, tensors)
        return tensors if keep else tensors[self.output]

    def run_step(self, step, tensors):
        """The output of ``step`` from the named ``tensors`` computed before it."""
        top, half = (1 << self.out_bits) - 1, 1 << (FRACTION - 1)
        if isinstance(step, Add):
            return step.combine(tensors[step.source], tensors[step.other], self.out_bits)
        if isinstance(step, Concat):
            parts = [tensors[name] for name in (step.source, *step.others)]
            return np.concatenate([np.clip((x * m + half) >> FRACTION, 0, top)
                                   for x, m in zip(parts, step.multipliers)], axis=1)
        y = step.run(tensors[step.source], acc_bits=self.acc_bits, out_bits=self.out_bits)
        if isinstance(step, ArrayLayer) and step.residual is not None:
            return step.residual.combine(y, tensors[step.residual.other], self.out_bits)
        return y
