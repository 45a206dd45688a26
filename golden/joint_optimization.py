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
           "joint_prune", "pack_to_rate"]

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


def prune_rate(i, final_rate=FINAL_RATE, points=PRUNE_POINTS):
    """Target prune rate at prune point ``i`` (1-based, ``1..points``): ``final_rate * (1 -
    (1 - i/points)**3)``, so the last point reaches ``final_rate`` (the paper's is 0.8 at
    ten points)."""
    if not isinstance(points, (int, np.integer)) or points < 1:
        raise ValueError(f"Prune points must be a positive integer, not {points!r}")
    if not isinstance(i, (int, np.integer)) or not 1 <= i <= points:
        raise ValueError(f"Prune point must be an integer in 1..{points}, not {i!r}")
    if not 0 <= final_rate < 1:
        raise ValueError(f"Final prune rate must lie in [0, 1), not {final_rate!r}")
    return final_rate * (1 - (1 - i / points) ** 3)


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


def joint_prune(weights, i, alpha, gamma, final_rate=FINAL_RATE):
    """One prune point of the joint optimization, on every layer.

    Parameters
    ----------
    weights : dict of str -> array_like (N x C)
        Each layer's current (unmasked) weights; the mask is rebuilt from scratch.
    i : int
        Prune point, 1..10.
    final_rate : float
        The rate the ramp reaches at the last point (``prune_rate``). Conflict pruning
        removes more on top of the magnitude pruning, so a layer ends sparser than the
        rate; ``pack_to_rate`` lands on a rate exactly.
    alpha : int or dict of str -> int
        Columns per group, one for all layers or per layer.
    gamma : float

    Returns
    -------
    (dict of str -> numpy.ndarray of bool, dict of str -> PackedLayer)
        Each layer's mask (True = trainable weight) and its packed form. The caller zeroes
        the masked weights and keeps them at zero (no gradient); the packed form holds the
        weights as they were at this prune point, so re-pack retrained weights with
        ``pack(..., groups=packed.groups)``.
    """
    rate = prune_rate(i, final_rate)
    masks, packed = {}, {}
    for name, layer in weights.items():
        layer = np.asarray(layer)
        layer_alpha = alpha[name] if isinstance(alpha, dict) else alpha
        kept = np.where(magnitude_prune(layer, rate * (1 - 1 / layer_alpha)), layer, 0)
        packed[name] = pack(kept, layer_alpha, gamma)
        masks[name] = packed[name].dense() != 0
    return masks, packed


def pack_to_rate(weights, rate, alpha, gamma, groups=None):
    """Magnitude-prune then pack ``weights`` (``N x C``) so that magnitude and conflict
    pruning together leave ``rate`` of them zero, or as near below it as the groups allow:
    the magnitude fraction is found by bisection (12 steps) on the packed sparsity.

    With ``groups`` (the previous prune point's), a regrouping that would by itself prune
    past ``rate`` is not taken: the layer keeps ``groups`` and only magnitude pruning to
    ``rate`` runs (a choice of codnn's: regrouping an already-packed pattern conflict-prunes
    again at every point, which overshoots the rate).

    Returns the ``PackedLayer``.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if not 0 <= rate < 1:
        raise ValueError(f"Prune rate must lie in [0, 1), not {rate!r}")

    def packed_at(fraction, fixed):
        return pack(np.where(magnitude_prune(weights, fraction), weights, 0), alpha, gamma,
                    groups=fixed)

    def sparsity(packed):
        return 1 - packed.nonzeros / weights.size

    if groups is not None and sparsity(packed_at(0.0, None)) > rate:
        return packed_at(rate, groups)
    low, high = 0.0, rate
    for _ in range(12):
        middle = (low + high) / 2
        if sparsity(packed_at(middle, None)) > rate:
            high = middle
        else:
            low = middle
    return packed_at(low, None)
