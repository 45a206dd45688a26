"""IEEE 754 binary32 addition, one sum a cycle: the adder of the training step's float32
sums (docs/semantics.md section 11: block products accumulated, the SGD update)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.pipeline import StallPipeline

__all__ = ["Float32Add", "CANONICAL_NAN"]

#: The NaN every NaN result is (a quiet NaN, sign 0, payload 0).
CANONICAL_NAN = 0x7FC00000
#: Bits of an aligned significand: 24 of it, then guard, round and sticky.
_WIDE = 27


class Float32Add(wiring.Component):
    """``fl32(a + b)`` of two binary32 values, as NumPy's float32 addition computes it:
    rounded to nearest even, subnormals kept as inputs and results, an exact zero sum
    ``+0.0`` unless both operands are ``-0.0``, overflow to an infinity, ``inf - inf``
    and any NaN operand giving ``CANONICAL_NAN`` (NumPy keeps a NaN operand's payload;
    section 11 stops a step at any NaN, so the payload never matters there).

    Input beat ``i.payload``: ``a``, ``b`` (32 bits each, IEEE encoding). Output beat
    ``o.payload``: the sum's 32 bits.

    Pipeline: operands ordered by magnitude, then unpacked; the smaller aligned (a right
    shift; the bits it drops, known from the trailing zeros, make a sticky bit); added or
    subtracted; its leading zeros counted; normalized (a carry shifted out, or leading
    zeros shifted away down to the smallest exponent); rounded; packed. Latency:
    ``latency`` = 8 cycles. Throughput: one sum a cycle; the pipeline stalls as a whole
    under backpressure.
    """

    latency = 8

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"a": 32, "b": 32}))),
            "o": Out(stream.Signature(32)),
        })

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, self.latency)
        register = pipe.register
        a, b = self.i.payload.a, self.i.payload.b

        # 1. Order by magnitude (the 31 bits below the sign compare as integers); each
        # significand's trailing zeros (what an alignment shift loses is below them).
        swap = register(b[:31] > a[:31], "swap")

        def trailing(x):
            count = Signal(range(25), name="trailing")
            significand = Cat(x[:23], x[23:31] != 0)
            m.d.comb += count.eq(24)
            for k in reversed(range(24)):
                with m.If(significand[k]):
                    m.d.comb += count.eq(k)
            return count

        zeros_a, zeros_b = register(trailing(a), "zeros_a"), register(trailing(b), "zeros_b")
        a, b = register(a, "a_r"), register(b, "b_r")

        # 2. Unpack.
        big, small = Mux(swap, b, a), Mux(swap, a, b)

        def fields(x):
            exponent, fraction = x[23:31], x[:23]
            return (Mux(exponent == 0, 1, exponent),                       # effective
                    Cat(fraction, exponent != 0),                          # 24 bits
                    exponent == 0xFF, (exponent == 0xFF) & (fraction != 0))

        e_big, m_big, inf_big, nan_big = fields(big)
        e_small, m_small, inf_small, nan_small = fields(small)
        nan = (nan_big | nan_small
               | (inf_big & inf_small & (big[31] != small[31])))
        special = register(Mux(nan, CANONICAL_NAN, Cat(Const(0, 23), Const(0xFF, 8),
                                                          big[31])), "special")
        is_special = register(inf_big | nan_big | nan_small, "is_special")
        both_negative_zero = register((a[:31] == 0) & (b[:31] == 0) & a[31] & b[31],
                                      "both_negative_zero")
        sign = register(big[31], "sign")
        subtract = register(big[31] != small[31], "subtract")
        exponent = register(e_big, "exponent")
        distance = register((e_big - e_small)[:8], "distance")
        m_big = register(m_big, "m_big")
        m_small = register(m_small, "m_small")
        zeros_small = register(Mux(swap, zeros_a, zeros_b), "zeros_small")

        # 3. Align the smaller significand: a right shift, the lost bits into the sticky.
        wide_small = Cat(Const(0, 3), m_small)                           # 27 bits
        shifted = Signal(_WIDE, name="shifted")
        lost = Signal(name="lost")
        m.d.comb += [shifted.eq(Mux(distance >= _WIDE, 0, wide_small >> distance)),
                     lost.eq((zeros_small != 24) & (zeros_small + 3 < distance))]
        aligned = register(shifted | lost, "aligned")
        wide_big = register(Cat(Const(0, 3), m_big), "wide_big")
        sign, subtract, exponent, special, is_special, both_negative_zero = (
            pipe.delay(s, 1, n) for s, n in (
                (sign, "sign"), (subtract, "subtract"), (exponent, "exponent"),
                (special, "special"), (is_special, "is_special"),
                (both_negative_zero, "both_negative_zero")))

        # 4. Add or subtract (|big| >= |small|: a difference is never negative).
        total = register(Mux(subtract, wide_big - aligned, wide_big + aligned)[:_WIDE + 1],
                         "total")
        sign, exponent, special, is_special, both_negative_zero = (
            pipe.delay(s, 1, n + "_t") for s, n in (
                (sign, "sign"), (exponent, "exponent"), (special, "special"),
                (is_special, "is_special"), (both_negative_zero, "both_negative_zero")))

        # 5. The leading zeros, and how far the exponent lets them be shifted away.
        leading = Signal(range(_WIDE + 1), name="leading")         # zeros above bit 26
        m.d.comb += leading.eq(_WIDE)
        for k in range(_WIDE):
            with m.If(total[k]):
                m.d.comb += leading.eq(_WIDE - 1 - k)
        room = register((exponent - 1)[:8], "room")               # shifts above subnormal
        leading = register(leading, "leading_r")
        zero = register(total == 0, "zero")
        total = register(total, "total_r")
        exponent = register(exponent, "exponent_r")
        sign, special, is_special, both_negative_zero = (
            pipe.delay(s, 1, n + "_z") for s, n in (
                (sign, "sign"), (special, "special"), (is_special, "is_special"),
                (both_negative_zero, "both_negative_zero")))

        # 6. Normalize: a carry shifted out, or leading zeros shifted away.
        carry = total[_WIDE]
        left = Signal(range(_WIDE + 1), name="left")
        m.d.comb += left.eq(Mux(leading > room, room, leading))
        normal = Signal(_WIDE, name="normal")
        e_norm = Signal(10, name="e_norm")
        with m.If(carry):
            m.d.comb += [normal.eq(Cat(total[1] | total[0], total[2:_WIDE + 1])),
                         e_norm.eq(exponent + 1)]
        with m.Else():
            m.d.comb += [normal.eq((total << left)[:_WIDE]), e_norm.eq(exponent - left)]
        normal, e_norm = register(normal, "normal"), register(e_norm, "e_norm")
        zero = register(zero, "zero_n")
        sign, special, is_special, both_negative_zero = (
            pipe.delay(s, 1, n + "_n") for s, n in (
                (sign, "sign"), (special, "special"), (is_special, "is_special"),
                (both_negative_zero, "both_negative_zero")))

        # 7. Round to nearest even: the increment, and the word it is added to (its
        # exponent field 0 for a subnormal, so that a carry out of the fraction makes the
        # next exponent, or the smallest normal).
        kept, guard, rest = normal[3:], normal[2], normal[:2].any()
        up = register(guard & (rest | kept[0]), "up")
        base = register(Cat(kept[:23], Mux(kept[23], e_norm[:8], 0)), "base")
        overflow = register(e_norm >= 0xFF, "overflow")
        zero = register(zero, "zero_r")
        sign, special, is_special, both_negative_zero = (
            pipe.delay(s, 1, n + "_r") for s, n in (
                (sign, "sign"), (special, "special"), (is_special, "is_special"),
                (both_negative_zero, "both_negative_zero")))

        # 8. Pack (a rounding that carries into an exponent of 255 makes the infinity).
        rounded = (base + up)[:31]
        packed = Mux(overflow, Cat(Const(0, 23), Const(0xFF, 8), sign), Cat(rounded, sign))
        result = Mux(is_special, special,
                     Mux(zero, Cat(Const(0, 31), both_negative_zero), packed))
        m.d.comb += self.o.payload.eq(register(result, "sum"))
        return m
