"""The output stage of codnn's arrays: ``clamp(acc >> shift, 0, 2**out_bits - 1)`` (an
arithmetic shift, docs/semantics.md section 2) in two register steps, and the mask its
range test takes."""

from amaranth.hdl import C, Cat, Mux

from codnn.hw.common.delays import stage

__all__ = ["over_mask", "output_stage"]

#: The most bits of the range test that one register of the first step takes.
_PART_BITS = 24


def over_mask(shift, out_bits, acc_bits):
    """Bit ``i`` is set when bit ``i`` of an accumulator lands at or above ``out_bits``
    after ``>> shift`` (``output_stage``'s ``mask``, to be registered with ``shift``)."""
    return Cat(shift <= i - out_bits if i >= out_bits else C(0) for i in range(acc_bits))


def output_stage(m, acc, shift, mask, out_bits, name):
    """``clamp(acc >> shift, 0, 2**out_bits - 1)`` two register steps after ``acc``
    (``shift`` and its ``mask``, ``over_mask(shift, ...)``, registers valid with ``acc``).

    Latency 2 cycles, a value a cycle. No step holds a full barrel shifter or a
    comparison: step 1 shifts by the multiple of 4 in ``shift`` (keeping the ``out_bits
    + 3`` bits the rest can use) and tests for a negative value and, in parts of up to
    24 bits, for bits at or above ``out_bits + shift``; step 2 shifts by the remaining
    0..3, joins the parts' tests and clamps. Register names end in ``name``.
    """
    ob, ab = out_bits, len(acc)
    wide = Cat(acc, acc[-1].replicate(ob + 3))          # room for the 3 fine bits
    coarse = stage(m, (wide.as_signed() >> Cat(C(0, 2), shift[2:]))[:ob + 3],
                   f"coarse_{name}")
    negative = stage(m, acc[-1], f"negative_{name}")
    # The range test in parts of at most _PART_BITS bits, registered apart and joined in
    # step 2 (one part for a 32-bit accumulator; a 48-bit product's test would otherwise
    # be a LUT level deeper than the rest of step 1).
    tests = [(acc[k:min(k + _PART_BITS, ab - 1)] & mask[k:min(k + _PART_BITS, ab - 1)]).any()
             for k in range(ob, ab - 1, _PART_BITS)]
    over = stage(m, tests[0] if len(tests) == 1 else Cat(*tests), f"over_{name}")
    fine = stage(m, shift[:2], f"fine_shift_{name}")
    top = (1 << ob) - 1
    joined = over if len(tests) == 1 else over.any()
    return stage(m, Mux(negative, 0, Mux(joined, top, (coarse >> fine)[:ob])), f"out_y_{name}")
