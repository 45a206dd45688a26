"""Balanced reduction trees: depth the log of the input count, not the count."""

__all__ = ["balanced"]


def balanced(values, combine):
    """``values`` reduced pairwise by ``combine`` (an associative operator) as a balanced
    tree of depth ``ceil(log2(len(values)))``."""
    values = list(values)
    while len(values) > 1:
        values = ([combine(a, b) for a, b in zip(values[::2], values[1::2])]
                  + values[len(values) & ~1:])
    return values[0]
