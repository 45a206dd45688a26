"""The residual add's lane arithmetic (docs/semantics.md section 7, ``Add``): an operand
lane's value, the rounded sum of two products and the clamp to a code. The
post-processing unit's adds and the result writer's fused add are built from these."""

from amaranth.hdl import Cat, Mux

from codnn.golden.network import FRACTION
from codnn.golden.network_program import ADD_PRODUCT_STEPS
from codnn.hw.common.delays import stage
from codnn.hw.common.multiplier import SPLIT_PRODUCT_STEPS

__all__ = ["signed_lane", "clamp_lane", "rounded_sum"]


def signed_lane(value, offset):
    """An activation lane as a signed value one bit wider: the lane, or with ``offset``
    its offset-binary value ``value - 2**(width-1)`` (the top bit flipped, then copied)."""
    top = value[-1]
    return Cat(value[:-1], top ^ offset, ~top & offset).as_signed()


def clamp_lane(total, offset, bits):
    """``clamp(total, 0, 2**bits - 1)``, or with ``offset`` the offset-binary code of
    ``clamp(total, -2**(bits-1), 2**(bits-1) - 1)``. Either way a total below the range
    gives the code 0 and one above it all ones, and a total inside the range is the one
    whose bits above the code's are copies of its sign (all 0 unsigned): bit tests, no
    comparison of the total's width (``total`` is signed)."""
    assert total.shape().signed
    top = total[bits - 1:]
    inside = Mux(offset, ~top.any() | top.all(), ~total[bits:].any())
    code = Cat(total[:bits - 1], total[bits - 1] ^ offset)
    return Mux(inside, code, Mux(total[-1], 0, (1 << bits) - 1))


def rounded_sum(m, pa, pb, name):
    """``(pa + pb + 2**15) >> 16`` registered: two products' rounded sum, the last of
    ``ADD_PRODUCT_STEPS`` (3) steps after the products' operands (``split_product``'s
    two, then this)."""
    assert ADD_PRODUCT_STEPS == SPLIT_PRODUCT_STEPS + 1
    return stage(m, (pa + pb + (1 << (FRACTION - 1))) >> FRACTION, f"{name}_sum")
