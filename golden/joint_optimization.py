"""The prune -> combine -> retrain schedule of column combining (docs/semantics.md section 1).

A training loop calls ``prune_steps(total_steps)`` once to learn at which steps to prune,
and at each of them ``joint_prune(weights, i, alpha, gamma)``: every layer is
magnitude-pruned to ``rate(i) * (1 - 1/alpha)`` of its weights, then grouped and
conflict-pruned; training goes on with the returned masks fixed (masked weights get no
gradient) until the next prune step.
"""

import numpy as np

from .column_combining import pack

__all__ = ["PRUNE_POINTS", "FINAL_RATE", "prune_steps", "prune_rate", "magnitude_prune",
           "joint_prune"]

#: Prune points, evenly spaced over the first half of training.
PRUNE_POINTS = 10
#: Target rate the cubic ramp approaches.
FINAL_RATE = 0.8


def prune_steps(total_steps):
    """Training steps (or epochs) at which to prune: ``PRUNE_POINTS`` evenly spaced over the
    first half, ``linspace(0, total/2, 10)`` rounded down.

    Raises
    ------
    ValueError
        If ``total_steps`` is not a positive integer.
    """
    if not isinstance(total_steps, (int, np.integer)) or total_steps < 1:
        raise ValueError(f"Total steps must be a positive integer, not {total_steps!r}")
    return [int(s) for s in np.linspace(0, 0.5 * total_steps, PRUNE_POINTS).astype(int)]


def prune_rate(i):
    """Target prune rate at prune point ``i`` (0-based): ``0.8 * (1 - (1 - i/10)**3)``."""
    if not isinstance(i, (int, np.integer)) or not 0 <= i < PRUNE_POINTS:
        raise ValueError(f"Prune point must be an integer in 0..{PRUNE_POINTS - 1}, not {i!r}")
    return FINAL_RATE * (1 - (1 - i / PRUNE_POINTS) ** 3)


def magnitude_prune(weights, fraction):
    """Return a mask keeping all but the ``floor(fraction * size)`` smallest-magnitude weights.

    Ties at the threshold **(ours)**: the earlier weight in row-major order is pruned first
    (a stable sort), so the count pruned is exact.
    """
    weights = np.asarray(weights)
    if not 0 <= fraction <= 1:
        raise ValueError(f"Prune fraction must lie in [0, 1], not {fraction!r}")
    count = int(np.floor(fraction * weights.size))
    mask = np.ones(weights.size, dtype=bool)
    mask[np.argsort(np.abs(weights).ravel(), kind="stable")[:count]] = False
    return mask.reshape(weights.shape)


def joint_prune(weights, i, alpha, gamma):
    """One prune point of the joint optimization, on every layer.

    Parameters
    ----------
    weights : dict of str -> array_like (N x C)
        Each layer's current (unmasked) weights; the mask is rebuilt from scratch.
    i : int
        Prune point, 0..9.
    alpha : int or dict of str -> int
        Columns per group, one for all layers or per layer.
    gamma : float

    Returns
    -------
    (dict of str -> numpy.ndarray of bool, dict of str -> PackedLayer)
        Each layer's mask (True = trainable weight) and its packed form.
    """
    rate = prune_rate(i)
    masks, packed = {}, {}
    for name, layer in weights.items():
        layer = np.asarray(layer)
        layer_alpha = alpha[name] if isinstance(alpha, dict) else alpha
        kept = np.where(magnitude_prune(layer, rate * (1 - 1 / layer_alpha)), layer, 0)
        packed[name] = pack(kept, layer_alpha, gamma)
        masks[name] = packed[name].dense() != 0
    return masks, packed
