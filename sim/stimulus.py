"""Random stimulus the benches share: gradient-like float32 values that reach every class
of the codecs, and stall patterns for cocotbext-axi sources and sinks."""

import numpy as np

from codnn.golden.value_frames import special_values

__all__ = ["SIGMAS", "message_values", "pauses"]

#: Standard deviations of the random gradients: every class gets its share.
SIGMAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def message_values(rng, count, bound_bits):
    """``count`` float32 values: mostly Gaussian gradients of random scale, a fifth special
    values (class edges, zeros, denormals, Inf, NaN with payloads)."""
    values = rng.normal(0, rng.choice(SIGMAS), count).astype(np.float32)
    special = rng.random(count) < 0.2
    values[special] = rng.choice(special_values(bound_bits), int(special.sum()))
    return values


def pauses(rng, probability):
    """A cocotbext-axi pause generator: pause each cycle with ``probability``."""
    while True:
        yield int(rng.random() < probability)
