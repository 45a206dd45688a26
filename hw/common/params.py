"""Parameter checks shared by the generators."""

__all__ = ["positive_int"]


def positive_int(value, what):
    """Raise ``TypeError`` unless ``value`` is a positive integer (``bool`` is not)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise TypeError(f"{what} must be a positive integer, not {value!r}")
