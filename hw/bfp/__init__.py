"""Block floating point gateware (FAST): the block dot-product unit."""

from codnn.hw.bfp.dot import BlockDot

__all__ = ["BlockDot"]
