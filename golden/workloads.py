"""Synthetic layers with the structure of trained ones, for tests and demos.

Trained filters are not uniformly sparse: some input channels and some filters carry much
more weight than others. ``structured_layer`` draws ``w[r, c] = s_r * t_c * z`` with
log-normal row and channel scales and Gaussian ``z``, then magnitude-prunes it, so the
surviving nonzeros cluster in strong rows and columns as in a pruned network.
"""

import numpy as np

from .joint_optimization import magnitude_prune

__all__ = ["structured_layer", "quantize_symmetric"]


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
