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

    Pipeline: operands unpacked and ordered by magnitude; the smaller aligned (a right
    shift, the bits shifted out kept as a sticky bit); added or subtracted; normalized (a
    carry shifted out, or leading zeros shifted away down to the smallest exponent);
    rounded and packed. Latency: ``latency`` = 4 cycles. Throughput: one sum a cycle; the
    pipeline stalls as a whole under backpressure.
    """

    latency = 4

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

        # 1. Unpack; order by magnitude (the 31 bits below the sign compare as integers).
        swap = b[:31] > a[:31]
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

        # 2. Align the smaller significand: a right shift, the lost bits into the sticky.
        wide_small = Cat(Const(0, 3), m_small)                           # 27 bits
        shifted = Signal(_WIDE, name="shifted")
        lost = Signal(name="lost")
        m.d.comb += [shifted.eq(Mux(distance >= _WIDE, 0, wide_small >> distance)),
                     lost.eq(Mux(distance >= _WIDE, m_small != 0,
                                 (wide_small & ((Const(1, _WIDE + 1) << distance) - 1))
                                 .any()))]
        aligned = register(shifted | lost, "aligned")
        wide_big = register(Cat(Const(0, 3), m_big), "wide_big")
        sign, subtract, exponent, special, is_special, both_negative_zero = (
            pipe.delay(s, 1, n) for s, n in (
                (sign, "sign"), (subtract, "subtract"), (exponent, "exponent"),
                (special, "special"), (is_special, "is_special"),
                (both_negative_zero, "both_negative_zero")))

        # 3. Add or subtract (|big| >= |small|: a difference is never negative).
        total = register(Mux(subtract, wide_big - aligned, wide_big + aligned)[:_WIDE + 1],
                         "total")
        sign, exponent, special, is_special, both_negative_zero = (
            pipe.delay(s, 1, n + "_t") for s, n in (
                (sign, "sign"), (exponent, "exponent"), (special, "special"),
                (is_special, "is_special"), (both_negative_zero, "both_negative_zero")))

        # 4. Normalize, round to nearest even, pack.
        carry = total[_WIDE]
        leading = Signal(range(_WIDE + 1), name="leading")         # zeros above bit 26
        m.d.comb += leading.eq(_WIDE)
        for k in range(_WIDE):
            with m.If(total[k]):
                m.d.comb += leading.eq(_WIDE - 1 - k)
        room = (exponent - 1)[:8]                                  # shifts above subnormal
        left = Signal(range(_WIDE + 1), name="left")
        m.d.comb += left.eq(Mux(leading > room, room, leading))
        normal = Signal(_WIDE, name="normal")
        e_norm = Signal(10, name="e_norm")
        with m.If(carry):
            m.d.comb += [normal.eq(Cat(total[1] | total[0], total[2:_WIDE + 1])),
                         e_norm.eq(exponent + 1)]
        with m.Else():
            m.d.comb += [normal.eq((total << left)[:_WIDE]), e_norm.eq(exponent - left)]
        kept, guard, rest = normal[3:], normal[2], normal[:2].any()
        up = guard & (rest | kept[0])
        rounded = Signal(25, name="rounded")
        m.d.comb += rounded.eq(kept + up)
        e_out = Mux(rounded[24], e_norm + 1, e_norm)
        significand = Mux(rounded[24], rounded[1:24], rounded[:23])
        hidden = Mux(rounded[24], 1, rounded[23])
        zero = total == 0
        overflow = e_out >= 0xFF
        packed = Mux(overflow, Cat(Const(0, 23), Const(0xFF, 8), sign),
                     Cat(significand, Mux(hidden, e_out[:8], 0), sign))
        result = Mux(is_special, special,
                     Mux(zero, Cat(Const(0, 31), both_negative_zero), packed))
        m.d.comb += self.o.payload.eq(register(result, "sum"))
        return m
