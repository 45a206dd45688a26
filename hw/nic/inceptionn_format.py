"""The INCEPTIONN-style message format in gateware (docs/semantics.md section 4), shared by
the compressor, the decompressor and the frame path: a value's class and payload, the
byte offsets and size of a block from its tags, and the bound's range."""

import operator

from amaranth.hdl import Cat, Const, Mux, Signal

from codnn.golden.inceptionn import (BOUND_BITS, DEFAULT_BOUND_BITS, LARGE_BITS, RAW_EXPONENT,
                                     SMALL_BITS)
from codnn.hw.common.trees import balanced

__all__ = ["Thresholds", "classify_value", "value_payload", "clamp_bound_bits",
           "half_prefixes", "offsets_from_halves", "block_size"]


class Thresholds:
    """Per-message registers derived from the bound ``b`` (7..15) so that classifying a
    value needs no adder on ``b``: a value is 0 below exponent ``127 - b``, 8-bit below
    ``134 - b``; the 8-bit class shifts its significand by ``150 - e - b``, whose low 3 bits
    (it is 17..23) come from ``small_base = (133 - b) mod 8``."""

    def __init__(self, b):
        self.zero_below = Signal(8, init=self._zero_below(DEFAULT_BOUND_BITS))
        self.small_below = Signal(8, init=self._small_below(DEFAULT_BOUND_BITS))
        self.small_base = Signal(3, init=self._small_base(DEFAULT_BOUND_BITS) % 8)
        self._b = b

    @staticmethod
    def _zero_below(b):
        return RAW_EXPONENT - b

    @staticmethod
    def _small_below(b):
        return RAW_EXPONENT + SMALL_BITS - b

    @staticmethod
    def _small_base(b):
        return RAW_EXPONENT + SMALL_BITS - 1 - b

    def load(self):
        """Statements loading the registers from ``b`` (sync domain)."""
        b = self._b
        return [self.zero_below.eq(self._zero_below(b)), self.small_below.eq(self._small_below(b)),
                self.small_base.eq(self._small_base(b))]


def classify_value(m, bits, thresholds):
    """Tag (2 bits) of one float32 and the 3-bit amount that places its payload's
    significand bits (``value_payload``)."""
    exponent = bits[23:31]
    tag = Signal(2, name="tag")
    with m.If(exponent >= RAW_EXPONENT):
        m.d.comb += tag.eq(3)
    with m.Elif(exponent < thresholds.zero_below):
        m.d.comb += tag.eq(0)
    with m.Elif(exponent < thresholds.small_below):
        m.d.comb += tag.eq(1)
    with m.Else():
        m.d.comb += tag.eq(2)
    # 8-bit class: shift 150 - e - b (17..23) -> amount 133 - b - e; 16-bit class: shift
    # 135 - e (9..b+1) -> amount 126 - e (126 mod 8 = 6). Both fit 3 bits exactly.
    amount = Signal(3, name="amount")
    m.d.comb += amount.eq(Mux(tag == 1, thresholds.small_base, (RAW_EXPONENT - 1) % 8)
                          - exponent[:3])
    return tag, amount


def value_payload(bits, tag, amount):
    """Payload (32 bits, little-endian bytes) of one float32 of class ``tag``:
    the value itself (3), its sign and 15 (2) or 7 (1) significand bits, nothing (0)."""
    sign, significand = bits[31], Cat(bits[:23], Const(1, 1))
    return Mux(tag == 3, bits,
               Mux(tag == 2, Cat((significand[24 - LARGE_BITS:] >> amount)[:LARGE_BITS], sign),
                   Mux(tag == 1, Cat((significand[24 - SMALL_BITS:] >> amount)[:SMALL_BITS],
                                     sign), 0)))


def clamp_bound_bits(m, requested):
    """``requested`` clamped into ``codnn.golden.inceptionn.BOUND_BITS`` (7..15), and whether it
    was outside that range."""
    low, high = BOUND_BITS[0], BOUND_BITS[-1]
    clamped, out_of_range = Signal(4, name="bound_bits_clamped"), Signal(name="bound_bits_bad")
    # A port as wide as the range's top cannot exceed it: no compare that is never true.
    above = requested > high if high < (1 << len(requested)) - 1 else Const(0)
    m.d.comb += [out_of_range.eq((requested < low) | above),
                 clamped.eq(Mux(requested < low, low, Mux(above, high, requested)))]
    return clamped, out_of_range


def half_prefixes(tags):
    """For each half (4 values) of a block, from its 8 tags: the payload bytes before each
    value within the half, then the half's total (2 lists of 5 sums, 2 adder levels)."""
    sizes = _payload_sizes(tags)
    return [[balanced([Const(0, 5), *sizes[4 * h:4 * h + i]], operator.add)
             for i in range(5)] for h in range(2)]


def offsets_from_halves(halves):
    """The byte offsets in a block of its 8 payloads, then the block's size (9 values),
    from ``half_prefixes``: 2, the first half's total for the second half, and the bytes
    before within the half (2 adder levels)."""
    first, second = halves
    return ([first[i] + 2 for i in range(4)]
            + [first[4] + (second[i] + 2) for i in range(5)])


def block_size(tags):
    """The bytes of a block (2..34) from its 8 tags, as one balanced adder tree."""
    return balanced([Const(2, 6), *_payload_sizes(tags)], operator.add)


def _payload_sizes(tags):
    return [Mux(tag == 3, 4, tag) for tag in tags]
