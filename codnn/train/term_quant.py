"""Term-quantization-aware training (docs/semantics.md section 3): in the forward pass
every array layer's weights are quantized (``mag_bits``, the layer's max-abs scale) and
revealed (``alpha`` terms per group of ``g`` consecutive columns ``(c, ky, kx)``; a
grouped convolution's over all input channels, as the ONNX import makes it) and its
input data quantized (the batch's max as scale) and truncated to ``beta`` terms, exactly
as ``codnn.golden.term_quant`` does; the backward pass takes the straight-through
gradient (as if nothing were rounded). The model keeps its float weights; the integer
path (``codnn infer --engine tq``) quantizes and reveals them again for the TQ array."""

import numpy as np
import torch
from torch.nn.utils import parametrize

from codnn.golden.column_combining import collapse_groups, expand_groups
from codnn.golden.term_quant import group, quantize, reveal, truncate, ungroup

from .arithmetic import straight_through
from .models import array_layers

__all__ = ["attach", "revealed_weights", "truncated_data"]


def revealed_weights(w, tq, groups=1):
    """``w`` (a layer's weight tensor) quantized with its max-abs scale and revealed; a
    grouped convolution's (``groups``) over all input channels, as the arrays run it."""
    if groups != 1:
        full = expand_groups(w.detach().double().numpy(), groups)
        kept = revealed_weights(torch.from_numpy(full), tq).numpy()
        return torch.from_numpy(collapse_groups(kept, groups)).to(w.dtype)
    matrix = w.detach().double().numpy().reshape(w.shape[0], -1)
    peak = float(np.abs(matrix).max())
    if peak == 0:
        return w.detach()
    scale = peak / ((1 << tq.mag_bits) - 1)
    q = quantize(matrix, scale, tq.mag_bits)
    kept = ungroup(reveal(group(q, tq.g), tq.alpha, tq.encoding, tq.mag_bits), q.shape[1])
    return torch.from_numpy(kept * scale).reshape(w.shape).to(w.dtype)


def _truncation_table(tq):
    """Truncated magnitude of every magnitude ``0 .. 2**mag_bits - 1``."""
    magnitudes = np.arange(1 << tq.mag_bits)
    return torch.from_numpy(truncate(magnitudes, tq.beta, tq.encoding, tq.mag_bits))


def truncated_data(x, tq, table=None):
    """``x`` quantized (scale: its max-abs over ``2**mag_bits - 1``; golden's round half
    away from zero, saturating) and each value truncated to its top ``beta`` terms."""
    table = _truncation_table(tq) if table is None else table
    x64 = x.detach().double()
    peak = float(x64.abs().max())
    if peak == 0:
        return x.detach()
    scale = peak / ((1 << tq.mag_bits) - 1)
    magnitude = torch.clamp(torch.floor(x64.abs() / scale + 0.5), max=(1 << tq.mag_bits) - 1)
    return (torch.sign(x64) * table[magnitude.long()] * scale).to(x.dtype)


class _Reveal(torch.nn.Module):
    def __init__(self, tq, groups):
        super().__init__()
        self.tq, self.groups = tq, groups

    def forward(self, w):
        return straight_through(w, revealed_weights(w, self.tq, self.groups))


def attach(model, tq):
    """Make ``model``'s array layers compute with term quantization ``tq``
    (``golden.network.TermQuantization``); return the hooks for
    ``arithmetic.detach``."""
    table = _truncation_table(tq)
    hooks = []
    for layer in array_layers(model):
        parametrize.register_parametrization(layer, "weight",
                                             _Reveal(tq, getattr(layer, "groups", 1)))
        hooks.append(layer.register_forward_pre_hook(
            lambda _, args: (straight_through(args[0], truncated_data(args[0], tq, table)),)))
    return hooks
