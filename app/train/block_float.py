"""FAST training (docs/training.md): every array layer computes in block floating point
(``codnn.golden.block_float``): its weights and its input in the forward pass, the gradient
of its output in the backward pass, each in blocks of ``g`` along the channel axis (axis 1:
input channels of weights and activations, output channels of gradients). Training rounds
stochastically; evaluation rounds to nearest. Each tensor's mantissa width is FAST's
policy (``choose_mantissa`` against ``threshold(layer, layers, step, steps, a, b)``), or
fixed when ``widths`` holds one width. Gradients flow straight through the rounding of
weights and inputs. ``BlockFloatState.bit_ops`` counts the training's bit operations: per
multiply-accumulate of the forward pass, ``m_w m_a + m_w m_g + m_a m_g`` (forward,
input-gradient and weight-gradient products, each ``m x m'`` bit products)."""

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.utils import parametrize

from codnn.golden.block_float import block_float, choose_mantissa, threshold

from .arithmetic import straight_through
from .models import array_layers

__all__ = ["BlockFloat", "BlockFloatState", "attach", "quantize_tensor"]

#: Which tensor of a layer a width and a seed belong to.
KINDS = ("weight", "input", "gradient")


@dataclass(frozen=True)
class BlockFloat:
    """FAST's settings: mantissa widths (rising by 2; one width: fixed precision), the
    threshold's ``a`` and ``b``, the block size ``g``, the noise seed, and how often (in
    steps) the policy chooses widths again (held in between)."""

    widths: tuple = (2, 4, 6, 8)
    a: float = 0.12
    b: float = 0.05
    g: int = 16
    seed: int = 0
    every: int = 16


def _blocks_last(x):
    """``x`` (a tensor) as a float32 array with its block axis (axis 1) last."""
    array = x.detach().float().numpy()
    return np.moveaxis(array, 1, -1) if x.dim() > 1 else array[None]


def quantize_tensor(x, m, g, *, stochastic, seed):
    """``x`` (a tensor) through block floating point, blocks along axis 1."""
    rounded = block_float(_blocks_last(x), m, g=g,
                          rounding="stochastic" if stochastic else "nearest", seed=seed)
    rounded = np.moveaxis(rounded, -1, 1) if x.dim() > 1 else rounded[0]
    return torch.from_numpy(np.ascontiguousarray(rounded)).to(x.dtype)


class BlockFloatState:
    """The policy's clock (``step`` of ``steps``), the widths it chose last, and the bit
    operations and multiply-accumulates counted so far."""

    def __init__(self, settings, layers, steps):
        self.settings, self.layers, self.steps = settings, layers, steps
        self.step, self.bit_ops, self.macs = 0, 0, 0
        self.chosen = {}                      # (layer, kind) -> width

    def width(self, x, layer, kind):
        widths = self.settings.widths
        if len(widths) == 1:
            m = widths[0]
        elif (layer, kind) in self.chosen and self.step % self.settings.every:
            m = self.chosen[layer, kind]
        else:
            eps = threshold(layer, self.layers, min(self.step, self.steps), self.steps,
                            self.settings.a, self.settings.b)
            m = choose_mantissa(_blocks_last(x), eps, widths=widths, g=self.settings.g)
        self.chosen[layer, kind] = m
        return m

    def seed(self, layer, kind):
        """A noise seed per step, layer and tensor (codnn's choice of mixing)."""
        return (self.settings.seed + 1_000_003 * self.step + 7919 * layer
                + KINDS.index(kind)) % (1 << 32)

    def round(self, x, layer, kind, stochastic):
        m = self.width(x, layer, kind)
        return quantize_tensor(x, m, self.settings.g, stochastic=stochastic,
                               seed=self.seed(layer, kind))

    def saved(self):
        """What a checkpoint keeps (the step is the run's)."""
        return {"bit_ops": self.bit_ops, "macs": self.macs,
                "chosen": [[layer, kind, m] for (layer, kind), m in self.chosen.items()]}

    def restore(self, saved):
        self.bit_ops, self.macs = saved["bit_ops"], saved["macs"]
        self.chosen = {(layer, kind): m for layer, kind, m in saved["chosen"]}

    def count(self, layer, macs):
        w, a, g = (self.chosen.get((layer, kind), 0) for kind in KINDS)
        self.bit_ops += macs * (w * a + w * g + a * g)
        self.macs += macs


class _Weights(torch.nn.Module):
    def __init__(self, state, layer, module):
        super().__init__()
        self.state, self.layer = state, layer
        self.module = [module]                # not a submodule: no cycle in the state dict

    def forward(self, w):
        return straight_through(w, self.state.round(w, self.layer, "weight",
                                                     self.module[0].training))


class _RoundGradient(torch.autograd.Function):
    """Identity forward; the backward pass rounds the output's gradient and counts the
    layer's bit operations (its widths are all chosen by then)."""

    @staticmethod
    def forward(ctx, y, state, layer, macs):
        ctx.state, ctx.layer, ctx.macs = state, layer, macs
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad):
        rounded = ctx.state.round(grad, ctx.layer, "gradient", True)
        ctx.state.count(ctx.layer, ctx.macs)
        return rounded, None, None, None


def attach(model, settings, steps):
    """Make ``model``'s array layers compute in block floating point for a run of
    ``steps`` optimizer steps; return ``(state, hooks)`` (``arithmetic.detach`` takes it
    off again)."""
    layers = array_layers(model)
    state = BlockFloatState(settings, len(layers), steps)
    hooks = []
    for k, layer in enumerate(layers):
        parametrize.register_parametrization(layer, "weight", _Weights(state, k, layer))

        def before(module, args, k=k):
            return (straight_through(args[0], state.round(args[0], k, "input",
                                                           module.training)),)

        def after(module, args, output, k=k):
            if not module.training:
                return output
            return _RoundGradient.apply(output, state, k, output.numel()
                                        * module.weight[0].numel())
        hooks += [layer.register_forward_pre_hook(before), layer.register_forward_hook(after)]
    return state, hooks
