"""One prune point of column-combining training on a PyTorch model (docs/semantics.md
section 1): every array layer's weights, flattened to ``N x C`` (convolutions: columns
``(c, ky, kx)``, as ``im2col``; grouped ones over all input channels), are
magnitude-pruned and packed so that magnitude and conflict pruning together leave the
point's rate (``codnn.golden.joint_optimization.pack_to_rate``), the zeros written into the
model; training then keeps them at zero with ``apply_masks`` after every optimizer
step."""

import torch
from torch.nn.utils import parametrize

from codnn.golden.column_combining import (collapse_groups, dense_tiles, expand_groups, pack,
                                           tiles)
from codnn.golden.joint_optimization import pack_to_rate

from .models import array_layers

__all__ = ["prune_and_pack", "apply_masks", "packing_rows"]


def _matrix(layer):
    """The layer's filter matrix as the arrays run it: a grouped (depthwise) convolution's
    over all input channels, zero outside each filter's group, as the ONNX import makes
    it."""
    w = layer.weight.detach().double().numpy()
    groups = getattr(layer, "groups", 1)
    return (expand_groups(w, groups) if groups != 1 else w).reshape(len(w), -1)


def _mask(layer, packed):
    """The trainable weights of ``layer`` (its own shape) from its packed filter matrix."""
    keep = packed.dense() != 0
    groups = getattr(layer, "groups", 1)
    if groups != 1:
        keep = collapse_groups(keep.reshape(len(keep), -1, *layer.weight.shape[2:]), groups)
    return torch.tensor(keep, dtype=layer.weight.dtype).reshape(layer.weight.shape)


def prune_and_pack(model, rate, alpha, gamma, previous=None):
    """Prune and pack every array layer of ``model`` to ``rate`` (in place); return each
    layer's mask (a tensor of the weight's shape, 1 = trainable) and column groups.
    ``previous``: the groups of the last prune point, kept where regrouping would prune
    past the rate."""
    masks, groups = [], []
    for k, layer in enumerate(array_layers(model)):
        packed = pack_to_rate(_matrix(layer), rate, alpha, gamma, previous and previous[k])
        masks.append(_mask(layer, packed))
        groups.append(packed.groups)
    apply_masks(model, masks)
    return masks, groups


def apply_masks(model, masks):
    """Zero the pruned weights of ``model`` (after an optimizer step): the trained
    parameter itself where a parametrization (term quantization's) computes the weight
    from it."""
    with torch.no_grad():
        for layer, mask in zip(array_layers(model), masks):
            weight = layer.parametrizations.weight.original \
                if parametrize.is_parametrized(layer, "weight") else layer.weight
            weight.mul_(mask)


def packing_rows(model, groups, alpha, gamma, rows, cols):
    """Per array layer, its packing with ``groups`` fixed: shape, sparsity, groups, tiles
    on a ``rows x cols`` array and the dense layer's tiles."""
    report = []
    for layer, layer_groups in zip(array_layers(model), groups):
        F = _matrix(layer)
        packed = pack(F, alpha, gamma, groups=layer_groups)
        report.append({"shape": list(F.shape), "sparsity": 1 - packed.nonzeros / F.size,
                       "groups": len(packed.groups), "tiles": tiles(packed, rows, cols),
                       "dense_tiles": dense_tiles(F.shape, rows, cols)})
    return report
