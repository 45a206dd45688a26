"""Parameter checks shared by the generators."""

from codnn.golden.bfp_training import WIDTHS

__all__ = ["positive_int", "training_block"]


def positive_int(value, what):
    """Raise ``TypeError`` unless ``value`` is a positive integer (``bool`` is not)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise TypeError(f"{what} must be a positive integer, not {value!r}")


def training_block(g, m):
    """Check a training-step unit's block size ``g`` and widest mantissa ``m``:
    ``TypeError`` unless both are positive integers, ``ValueError`` unless ``m`` lies in
    2..8 (``codnn.golden.bfp_training.WIDTHS``)."""
    positive_int(g, "Block size")
    positive_int(m, "Mantissa width")
    if m not in WIDTHS:
        raise ValueError(f"Mantissa width must lie in {WIDTHS.start}..{WIDTHS.stop - 1}, "
                         f"not {m}")
