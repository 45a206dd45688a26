"""Pipelined multipliers for array cells, in the form that runs fastest on the target."""

from amaranth.hdl import ClockSignal, Const, Instance, Signal

from codnn.golden.systolic import PARALLEL_PRODUCT_STEPS as PRODUCT_STEPS
from codnn.hw.common.delays import delay, stage

__all__ = ["PRODUCT_STEPS", "SPLIT_PRODUCT_STEPS", "MultiplierPlan", "pipelined_product",
           "split_product"]

#: Register steps of ``split_product``: the pieces' products, their sum.
SPLIT_PRODUCT_STEPS = 2

#: Bits of an operand piece of ``split_product``: unsigned, it fits a signed 18-bit port.
_PIECE_BITS = 17

#: Bits of ``b`` per partial product of the LUT form.
_DIGIT_BITS = 2

#: Operand width of an ECP5 MULT18X18D (two's complement with SIGNEDA/SIGNEDB high).
_ECP5_DSP_BITS = 18


class MultiplierPlan:
    """Which form each of a design's multipliers takes on ``platform``.

    On an ECP5 target (a platform whose ``dsp_primitive`` is ``"MULT18X18D"``, with its
    ``dsp_count``: a ``codnn.synth.devices.Device``) the first ``dsp_count`` multipliers are
    MULT18X18D blocks with their input and output registers in use (yosys maps a
    multiplier to the block with its registers bypassed, which caps a cell at ~120 MHz)
    and a fabric register after them; the rest are pipelined trees in LUTs: products by
    the 2-bit digits of ``b``, pairs of those, then the rest, a step each. Anywhere else
    (simulation, iCE40, board builds) a multiplier is ``*`` followed by three registers
    (iCE40's DSP inference takes some of them into its SB_MAC16). Every form takes
    ``PRODUCT_STEPS`` (3).
    """

    def __init__(self, platform):
        ecp5 = getattr(platform, "dsp_primitive", None) == "MULT18X18D"
        self._budget = platform.dsp_count if ecp5 else None

    def form(self, a_width, b_width):
        """The form of the next multiplier of ``a_width`` x ``b_width`` signed bits:
        ``"generic"``, ``"ecp5_dsp"`` or ``"lut_tree"``."""
        if self._budget is None:
            return "generic"
        if self._budget > 0 and max(a_width, b_width) <= _ECP5_DSP_BITS:
            self._budget -= 1
            return "ecp5_dsp"
        return "lut_tree" if b_width > 1 else "generic"


def pipelined_product(m, plan, a, b, name):
    """``a * b`` (signed values), ``PRODUCT_STEPS`` register steps after ``a`` and ``b``
    (operand registers) are valid; returns the product register.

    Latency: ``PRODUCT_STEPS`` cycles. Throughput: one product per cycle.
    """
    width = len(a) + len(b)
    form = plan.form(len(a), len(b))
    if form == "ecp5_dsp":
        product = Signal(36, name=f"{name}_p")
        pins = {f"i_A{k}": bit for k, bit in enumerate(_extend(a, _ECP5_DSP_BITS))}
        pins.update({f"i_B{k}": bit for k, bit in enumerate(_extend(b, _ECP5_DSP_BITS))})
        pins.update({f"o_P{k}": product[k] for k in range(36)})
        m.submodules[f"{name}_dsp"] = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_OUTPUT_CLK="CLK0",
            p_GSR="DISABLED",
            i_CLK0=ClockSignal("sync"), i_CE0=Const(1), i_RST0=Const(0),
            i_SIGNEDA=Const(1), i_SIGNEDB=Const(1), i_SOURCEA=Const(0), i_SOURCEB=Const(0),
            **pins)
        # The third step in the fabric, next to the adder the product feeds.
        return stage(m, product[:width].as_signed(), f"{name}_product")
    if form == "lut_tree":
        # Step 1: a times each 2-bit digit of b (one adder each; the top digit signed).
        starts = range(0, len(b), _DIGIT_BITS)
        parts = []
        for k, start in enumerate(starts):
            digit = b[start:start + _DIGIT_BITS]
            digit = digit.as_signed() if start + _DIGIT_BITS >= len(b) else digit
            parts.append(stage(m, a * digit, f"{name}_part{k}") << start)
        # Step 2: pairs of parts; step 3: the rest.
        pairs = [stage(m, sum(parts[k:k + 2]), f"{name}_pair{k // 2}")
                 for k in range(0, len(parts), 2)]
        return stage(m, sum(pairs)[:width].as_signed(), f"{name}_sum")
    return delay(m, a * b, PRODUCT_STEPS, f"{name}_product")


def split_product(m, a, b, name):
    """``a * b`` for operands wider than a DSP block's (``a`` signed or unsigned, ``b``
    unsigned), ``SPLIT_PRODUCT_STEPS`` register steps later: each operand cut into
    17-bit pieces (the top piece of a signed ``a`` keeps its sign), each pair of pieces'
    product registered (a MULT18X18D or an SB_MAC16 apiece, with a register beside it),
    then their sum.

    Latency: ``SPLIT_PRODUCT_STEPS`` (2) cycles. Throughput: one product per cycle.
    """
    def pieces(value, signed):
        cuts = range(0, len(value), _PIECE_BITS)
        return [(start, value[start:start + _PIECE_BITS].as_signed()
                 if signed and start + _PIECE_BITS >= len(value)
                 else value[start:start + _PIECE_BITS]) for start in cuts]
    signed = a.shape().signed
    parts = [stage(m, x * y, f"{name}_piece{i}_{j}") << (i_start + j_start)
             for i, (i_start, x) in enumerate(pieces(a, signed))
             for j, (j_start, y) in enumerate(pieces(b, False))]
    total = sum(parts)[:len(a) + len(b)]
    return stage(m, total.as_signed() if signed else total, f"{name}_sum")


def _extend(value, bits):
    """The bits of signed ``value`` sign-extended to ``bits``."""
    return [value[k] if k < len(value) else value[-1] for k in range(bits)]
