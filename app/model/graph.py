"""The float network an imported model becomes: layers the arrays run (``Layer``) and the
host's steps (``codnn.golden.network``'s ``Pool`` and ``Flatten``, ``Residual`` and
``Concatenation``), over
named tensors, batch first. ``FloatNetwork.run`` is the float reference whose accuracy
the integer network is compared with."""

from dataclasses import dataclass

import numpy as np

from codnn.golden.network import Flatten, Pool, batch_first, conv_columns, pool

__all__ = ["Layer", "Residual", "Concatenation", "FloatNetwork"]


@dataclass(frozen=True)
class Layer:
    """A convolution (``kernel >= 1``, ``weights`` ``N x C*k*k``, columns ``(c, ky, kx)``)
    or a dense layer (``kernel == 0``, ``weights`` ``N x F``) with its bias, followed by
    ``clip(., 0, activation)`` (``inf``: ReLU) or by nothing (``activation is None``).
    ``groups``: the column groups the model was trained with (column combining), if any."""

    name: str
    source: str
    output: str
    weights: np.ndarray
    bias: np.ndarray
    activation: float | None
    kernel: int = 0
    stride: int = 1
    padding: int = 0
    groups: tuple | None = None

    def run(self, x):
        x = np.asarray(x, dtype=np.float64)
        if self.kernel == 0:
            y = x @ self.weights.T + self.bias
        else:
            cols, positions = conv_columns(x, self.kernel, self.stride, self.padding)
            y = batch_first(self.weights @ cols + self.bias[:, None], x.shape[0],
                            (len(self.weights), *positions))
        return y if self.activation is None else np.clip(y, 0, self.activation)


@dataclass(frozen=True)
class Residual:
    """``max(a + b, 0)``: a residual add and its ReLU; without ``relu``, ``a + b`` (a
    linear bottleneck's add)."""

    name: str
    source: str
    other: str
    output: str
    relu: bool = True


@dataclass(frozen=True)
class Concatenation:
    """Maps side by side along the channels: ``source``, then ``others``."""

    name: str
    source: str
    others: tuple
    output: str


@dataclass(frozen=True)
class FloatNetwork:
    steps: tuple
    input: str
    output: str
    input_shape: tuple

    def run(self, x, *, keep=False):
        """Float outputs for inputs ``x`` (``B x input_shape``); every tensor with ``keep``."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[1:] != tuple(self.input_shape):
            raise ValueError(f"inputs must have shape (B, {', '.join(map(str, self.input_shape))})"
                             f", not {x.shape}")
        tensors = {self.input: x}
        for step in self.steps:
            source = tensors[step.source]
            if isinstance(step, Residual):
                total = source + tensors[step.other]
                tensors[step.output] = np.maximum(total, 0) if step.relu else total
            elif isinstance(step, Concatenation):
                tensors[step.output] = np.concatenate(
                    [source, *(tensors[name] for name in step.others)], axis=1)
            elif isinstance(step, Pool):
                tensors[step.output] = pool(source, step.kind, step.kernel, step.stride,
                                            step.padding, step.count_pad, integer=False)
            elif isinstance(step, Flatten):
                tensors[step.output] = step.run(source)
            else:
                tensors[step.output] = step.run(source)
        return tensors if keep else tensors[self.output]
