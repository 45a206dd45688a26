"""Block floating point gateware (FAST): the block dot-product unit, and the units of the
training step (semantics section 11): float32 addition and a block pair added to a sum."""

from codnn.hw.bfp.block_accumulate import BlockAccumulate, BlockTerm
from codnn.hw.bfp.dot import BlockDot
from codnn.hw.bfp.float_add import Float32Add

__all__ = ["BlockAccumulate", "BlockDot", "BlockTerm", "Float32Add"]
