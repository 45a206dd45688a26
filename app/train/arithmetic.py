"""What the rounded arithmetics of ``term_quant`` and ``block_float`` share: the
straight-through estimator their forward passes round with, and ``detach``, which takes
either off a model's array layers (a weight parametrization and forward hooks each)."""

from torch.nn.utils import parametrize

from .models import array_layers

__all__ = ["straight_through", "detach"]


def straight_through(x, rounded):
    """``rounded`` in the forward pass, the gradient of ``x`` in the backward pass."""
    return x + (rounded - x).detach()


def detach(model, hooks):
    """Undo an ``attach``: remove its ``hooks`` and weight parametrizations; the layers
    keep their float weights."""
    for hook in hooks:
        hook.remove()
    for layer in array_layers(model):
        parametrize.remove_parametrizations(layer, "weight", leave_parametrized=False)
