"""Block floating point gateware (FAST): the block dot-product unit, and the units of the
training step (semantics section 11): float32 arithmetic, rounding into blocks, a block
pair added to a sum, the weight update."""

from codnn.hw.bfp.block_accumulate import BlockAccumulate
from codnn.hw.bfp.block_round import BlockRound
from codnn.hw.bfp.dot import BlockDot
from codnn.hw.bfp.float32 import Float32Add, Float32Mul
from codnn.hw.bfp.sgd_update import SgdUpdate

__all__ = ["BlockAccumulate", "BlockDot", "BlockRound", "Float32Add", "Float32Mul",
           "SgdUpdate"]
