"""Counter signals that never come out zero bits wide."""

from amaranth.hdl import Signal

__all__ = ["counter"]


def counter(count, **kwargs):
    """A signal for the values ``0 .. count - 1``, one bit wide at least: ``range(1)`` is
    zero bits, which Verilog writes as the descending range ``wire [-1:0]``."""
    return Signal(range(max(2, count)), **kwargs)
