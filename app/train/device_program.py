"""A PyTorch model as a training program of semantics section 11 (``codnn.golden.
bfp_training``): its layers in forward order and its float32 weights, so that the
golden training step (the device's arithmetic) trains the same network from the same
start as torch does. Only chains of Conv2d, Linear, ReLU, MaxPool2d and Flatten convert;
anything else is refused in one line."""

import numpy as np
import torch
from torch import nn

from codnn.golden.bfp_training import (Conv, Dense, Flatten, MaxPool, ReLU, TrainingError,
                                       check_network)

__all__ = ["program_layers", "program_weights", "load_weights"]


def _layer(name, module):
    """The section 11 layer of one torch module (``TrainingError`` if it has none)."""
    if isinstance(module, nn.Conv2d):
        k, s, p = module.kernel_size, module.stride, module.padding
        if (module.groups != 1 or module.dilation != (1, 1) or k[0] != k[1]
                or s[0] != s[1] or isinstance(p, str) or p[0] != p[1]
                or module.padding_mode != "zeros"):
            raise TrainingError(f"{name}: a training program takes square convolutions "
                                f"with one stride and padding, no groups or dilation")
        return Conv(module.out_channels, module.in_channels, k[0], s[0], p[0])
    if isinstance(module, nn.Linear):
        return Dense(module.out_features, module.in_features)
    if isinstance(module, nn.ReLU):
        return ReLU()
    if isinstance(module, nn.MaxPool2d):
        size = module.kernel_size
        if (module.stride not in (size, (size, size)) or module.padding
                or module.dilation != 1 or module.ceil_mode or isinstance(size, tuple)):
            raise TrainingError(f"{name}: a training program pools square windows at "
                                f"their own stride, without padding")
        return MaxPool(size)
    if isinstance(module, nn.Flatten):
        if module.start_dim != 1 or module.end_dim != -1:
            raise TrainingError(f"{name}: flatten must keep the batch axis only")
        return Flatten()
    raise TrainingError(f"{name} ({type(module).__name__}): a training program has no "
                        f"backward pass for it (Conv2d, Linear, ReLU, MaxPool2d, Flatten)")


def program_layers(model, input_shape):
    """The layers of ``model`` (a chain: its leaf modules in order must compute its
    forward pass) for inputs of ``input_shape`` (``C x H x W``)."""
    leaves = [(name, m) for name, m in model.named_modules()
              if not list(m.children()) and not isinstance(m, nn.Identity)]
    layers = [_layer(name, m) for name, m in leaves]
    check_network(layers, input_shape)
    probe = torch.linspace(-1, 1, 2 * int(np.prod(input_shape))).reshape(2, *input_shape)
    with torch.no_grad():
        chained = probe
        for _, m in leaves:
            chained = m(chained)
        if not torch.equal(chained, model.eval()(probe)):
            raise TrainingError("the model's forward is not the chain of its layers "
                                "(a residual or a custom forward): not a training program")
    return layers


def program_weights(model):
    """``[(W, b), ...]`` of the model's Conv2d and Linear layers, float32 (a missing bias
    is zeros)."""
    pairs = []
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            W = m.weight.detach().float().numpy().copy()
            b = (m.bias.detach().float().numpy().copy() if m.bias is not None
                 else np.zeros(W.shape[0], np.float32))
            pairs.append((W, b))
    return pairs


def load_weights(model, weights):
    """Write ``[(W, b), ...]`` (a golden state's weights) back into ``model``."""
    layers = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        for m, (W, b) in zip(layers, weights):
            m.weight.copy_(torch.from_numpy(np.asarray(W)))
            if m.bias is None:                # the program trains a bias for every layer
                m.bias = nn.Parameter(torch.zeros(m.weight.shape[0]))
            m.bias.copy_(torch.from_numpy(np.asarray(b)))
