"""The output stage of codnn's arrays: ``clamp(acc >> shift, 0, 2**out_bits - 1)`` (an
arithmetic shift, docs/semantics.md section 2) in two register steps, and the mask its
range test takes."""

from amaranth.hdl import C, Cat, Mux

from codnn.hw.common.delays import stage

__all__ = ["over_mask", "output_stage"]


def over_mask(shift, out_bits, acc_bits):
    """Bit ``i`` is set when bit ``i`` of an accumulator lands at or above ``out_bits``
    after ``>> shift`` (``output_stage``'s ``mask``, to be registered with ``shift``)."""
    return Cat(shift <= i - out_bits if i >= out_bits else C(0) for i in range(acc_bits))


def output_stage(m, acc, shift, mask, out_bits, name):
    """``clamp(acc >> shift, 0, 2**out_bits - 1)`` two register steps after ``acc``
    (``shift`` and its ``mask``, ``over_mask(shift, ...)``, registers valid with ``acc``).

    Latency 2 cycles, a value a cycle. No step holds a full barrel shifter or a
    comparison: step 1 shifts by the multiple of 4 in ``shift`` (keeping the ``out_bits
    + 3`` bits the rest can use) and tests for a negative value and for bits at or above
    ``out_bits + shift``; step 2 shifts by the remaining 0..3 and clamps. Register names
    end in ``name``.
    """
    ob, ab = out_bits, len(acc)
    wide = Cat(acc, acc[-1].replicate(ob + 3))          # room for the 3 fine bits
    coarse = stage(m, (wide.as_signed() >> Cat(C(0, 2), shift[2:]))[:ob + 3],
                   f"coarse_{name}")
    negative = stage(m, acc[-1], f"negative_{name}")
    over = stage(m, (acc[ob:ab - 1] & mask[ob:ab - 1]).any(), f"over_{name}")
    fine = stage(m, shift[:2], f"fine_shift_{name}")
    top = (1 << ob) - 1
    return stage(m, Mux(negative, 0, Mux(over, top, (coarse >> fine)[:ob])), f"out_y_{name}")
