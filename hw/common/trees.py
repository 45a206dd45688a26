"""Balanced reduction trees: depth the log of the input count, not the count."""

__all__ = ["balanced", "registered"]


def balanced(values, combine):
    """``values`` reduced pairwise by ``combine`` (an associative operator) as a balanced
    tree of depth ``ceil(log2(len(values)))``."""
    values = list(values)
    while len(values) > 1:
        values = ([combine(a, b) for a, b in zip(values[::2], values[1::2])]
                  + values[len(values) & ~1:])
    return values[0]


def registered(values, combine, register, name, levels=None):
    """``values`` reduced pairwise by ``combine`` as a balanced tree whose every level is
    a stage of ``register`` (a ``StallPipeline``'s; ``register(value, name)``), an odd
    one out carried along in a register, so that every value has passed the same number
    of stages: ``levels`` of them (at least ``ceil(log2(len(values)))``, which is the
    default, and at least one). The registers are named ``{name}{level}_{index}``."""
    values = list(values)
    depth = max(levels or 0, 1, (len(values) - 1).bit_length())
    for level in range(depth):
        values = ([combine(a, b) for a, b in zip(values[::2], values[1::2])]
                  + values[len(values) & ~1:])
        values = [register(value, f"{name}{level}_{k}") for k, value in enumerate(values)]
    return values[0]
