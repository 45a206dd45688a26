"""IEEE 754 binary32 addition and multiplication in gateware, one result a cycle, as NumPy's
float32 arithmetic computes them: the arithmetic of the training step (docs/semantics.md
section 11: block products accumulated, the SGD update).

Both round to nearest even, keep subnormals as inputs and results, overflow to an
infinity and give ``CANONICAL_NAN`` for an invalid operation or any NaN operand (NumPy
keeps a NaN operand's payload; section 11 stops a step at any NaN, so the payload never
reaches a weight). ``add_stages`` and ``mul_stages`` build the stages into a caller's
``StallPipeline``, so that units made of several operations are one pipeline;
``Float32Add`` and ``Float32Mul`` are the stream components."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.pipeline import StallPipeline

__all__ = ["CANONICAL_NAN", "ADD_LATENCY", "MUL_LATENCY", "add_stages", "mul_stages",
           "negate", "highest_one", "lowest_one", "Float32Add", "Float32Mul"]

#: The NaN every NaN result is (a quiet NaN, sign 0, payload 0).
CANONICAL_NAN = 0x7FC00000
#: Stages of an addition and of a multiplication.
ADD_LATENCY, MUL_LATENCY = 9, 9
#: Bits of an aligned significand in the adder: 24 of it, then guard, round and sticky.
_WIDE = 27
_INFINITY = 0xFF << 23


def negate(x):
    """``-x`` (exact: the sign bit flipped)."""
    return Cat(x[:31], ~x[31])


def _fields(x):
    """Effective exponent (1 for a subnormal), 24-bit significand, infinity, NaN, zero."""
    exponent, fraction = x[23:31], x[:23]
    return (Mux(exponent == 0, 1, exponent), Cat(fraction, exponent != 0),
            (exponent == 0xFF) & (fraction == 0), (exponent == 0xFF) & (fraction != 0),
            x[:31] == 0)


def lowest_one(m, value, width, name):
    """Zeros below ``value``'s lowest one (``width`` for zero), combinational."""
    count = Signal(range(width + 1), name=name)
    m.d.comb += count.eq(width)
    for k in reversed(range(width)):
        with m.If(value[k]):
            m.d.comb += count.eq(k)
    return count


def highest_one(m, value, width, name):
    """Position of ``value``'s highest one (0 for zero), combinational."""
    top = Signal(range(max(width, 2)), name=name)
    for k in range(width):
        with m.If(value[k]):
            m.d.comb += top.eq(k)
    return top


class _Side:
    """What a result carries beside its significand through the stages: its sign, the
    special result (NaN or infinity) and whether it is one, and the word of an exact
    zero result."""

    def __init__(self, pipe, name, **values):
        self.pipe, self.name, self.values = pipe, name, values

    def __getattr__(self, key):
        return self.__dict__["values"][key]

    def step(self, tag):
        self.values = {key: self.pipe.register(value, f"{self.name}_{key}_{tag}")
                       for key, value in self.values.items()}


def _round_pack(pipe, name, side, kept, guard, sticky, exponent, overflow):
    """Two stages: the round-to-nearest-even increment and the word it is added to (its
    exponent field 0 for a subnormal, ``kept[23]`` clear, so that a carry out of the
    fraction makes the next exponent, the smallest normal or the infinity), then the
    packed result, registered."""
    register = pipe.register
    up = register(guard & (sticky | kept[0]), f"{name}_up")
    base = register(Cat(kept[:23], Mux(kept[23], exponent[:8], 0)), f"{name}_base")
    overflow = register(overflow, f"{name}_overflow")
    side.step("r")
    rounded = (base + up)[:31]
    packed = Mux(overflow, Cat(Const(_INFINITY, 31), side.sign), Cat(rounded, side.sign))
    result = Mux(side.is_special, side.special, Mux(side.zero, side.zero_word, packed))
    return register(result, f"{name}_result")


def add_stages(m, pipe, a, b, name="add"):
    """``fl32(a + b)`` after ``ADD_LATENCY`` stages of ``pipe`` (an exact zero sum is
    ``+0.0`` unless both operands are ``-0.0``; ``inf - inf`` is ``CANONICAL_NAN``).

    Stages: the operands ordered by magnitude (the 31 bits below the sign compare as
    integers) and each significand's trailing zeros counted; unpacked; the smaller one
    aligned (a right shift; the bits it drops, known from the trailing zeros, make a
    sticky bit); added or subtracted; the leading zeros counted (in two stages);
    normalized (a carry shifted out, or leading zeros shifted away down to the smallest
    exponent); rounded; packed."""
    register = pipe.register

    def trailing(x, tag):
        return register(lowest_one(m, Cat(x[:23], x[23:31] != 0), 24, f"{name}_tz{tag}"),
                        f"{name}_zeros_{tag}")

    swap = register(b[:31] > a[:31], f"{name}_swap")
    zeros_a, zeros_b = trailing(a, "a"), trailing(b, "b")
    a, b = register(a, f"{name}_a"), register(b, f"{name}_b")

    big, small = Mux(swap, b, a), Mux(swap, a, b)
    e_big, m_big, inf_big, nan_big, zero_big = _fields(big)
    e_small, m_small, inf_small, nan_small, zero_small = _fields(small)
    nan = nan_big | nan_small | (inf_big & inf_small & (big[31] != small[31]))
    side = _Side(pipe, name, sign=big[31],
                 special=Mux(nan, CANONICAL_NAN, Cat(Const(_INFINITY, 31), big[31])),
                 is_special=inf_big | nan_big | nan_small,
                 zero_word=Cat(Const(0, 31), zero_big & zero_small & a[31] & b[31]))
    side.step("u")
    subtract = register(big[31] != small[31], f"{name}_subtract")
    exponent = register(e_big, f"{name}_exponent")
    distance = register((e_big - e_small)[:8], f"{name}_distance")
    m_big = register(m_big, f"{name}_m_big")
    m_small = register(m_small, f"{name}_m_small")
    zeros_small = register(Mux(swap, zeros_a, zeros_b), f"{name}_zeros_small")

    wide_small = Cat(Const(0, 3), m_small)
    shifted = Mux(distance >= _WIDE, 0, wide_small >> distance)
    lost = (zeros_small != 24) & (zeros_small + 3 < distance)
    aligned = register(shifted | lost, f"{name}_aligned")
    wide_big = register(Cat(Const(0, 3), m_big), f"{name}_wide_big")
    subtract = register(subtract, f"{name}_subtract_a")
    exponent = register(exponent, f"{name}_exponent_a")
    side.step("a")

    total = register(Mux(subtract, wide_big - aligned, wide_big + aligned)[:_WIDE + 1],
                     f"{name}_total")
    exponent = register(exponent, f"{name}_exponent_t")
    side.step("t")

    # The leading zeros over two stages: within each third of the 27 bits, then of the
    # highest third that holds a one.
    thirds = [total[9 * k:9 * k + 9] for k in range(3)]
    holds = [register(third != 0, f"{name}_holds{k}") for k, third in enumerate(thirds)]
    within = [register(8 - highest_one(m, third, 9, f"{name}_top{k}"), f"{name}_within{k}")
              for k, third in enumerate(thirds)]
    side.values["zero"] = total == 0
    side.step("y")
    total = register(total, f"{name}_total_y")
    exponent = register(exponent, f"{name}_exponent_y")

    leading = Mux(holds[2], within[2], Mux(holds[1], 9 + within[1],
                                           Mux(holds[0], 18 + within[0], _WIDE)))
    room = register((exponent - 1)[:8], f"{name}_room")       # shifts above subnormal
    leading = register(leading[:5], f"{name}_leading")
    side.step("z")
    total = register(total, f"{name}_total_z")
    exponent = register(exponent, f"{name}_exponent_z")

    left = Mux(leading > room, room, leading)[:5]
    carry = total[_WIDE]
    normal = register(Mux(carry, Cat(total[1] | total[0], total[2:_WIDE + 1]),
                          (total << left)[:_WIDE]), f"{name}_normal")
    e_norm = register(Mux(carry, exponent + 1, exponent - left)[:10], f"{name}_e_norm")
    side.step("n")
    return _round_pack(pipe, name, side, normal[3:], normal[2], normal[:2].any(), e_norm,
                       e_norm >= 0xFF)


def mul_stages(m, pipe, a, b, name="mul"):
    """``fl32(a * b)`` after ``MUL_LATENCY`` stages of ``pipe`` (a zero product has the
    operands' sign; ``inf * 0`` is ``CANONICAL_NAN``).

    Stages: unpacked; four 12 x 12-bit parts of the significands' product (and its
    lowest and highest one, from theirs); the 48-bit product; its highest one (the
    product's bit above the sum of theirs); normalized (the highest one to bit 47, the
    exponent from it); the shift into 24 bits, further for a subnormal; shifted (what
    the shift drops, known from the lowest one, makes the sticky bit); rounded;
    packed."""
    register = pipe.register
    e_a, m_a, inf_a, nan_a, zero_a = _fields(a)
    e_b, m_b, inf_b, nan_b, zero_b = _fields(b)
    sign = a[31] ^ b[31]
    nan = nan_a | nan_b | (inf_a & zero_b) | (inf_b & zero_a)
    side = _Side(pipe, name, sign=sign,
                 special=Mux(nan, CANONICAL_NAN, Cat(Const(_INFINITY, 31), sign)),
                 is_special=nan | inf_a | inf_b, zero=zero_a | zero_b,
                 zero_word=Cat(Const(0, 31), sign))
    side.step("u")
    m_a, m_b = register(m_a, f"{name}_m_a"), register(m_b, f"{name}_m_b")
    e_sum = register(e_a + e_b, f"{name}_e_sum")

    # The product from four registered 12 x 12-bit parts; its lowest one is the sum of
    # the significands' lowest ones.
    parts = [register(m_a[12 * i:12 * i + 12] * m_b[12 * j:12 * j + 12],
                      f"{name}_part{i}{j}") for i in range(2) for j in range(2)]
    low = register(lowest_one(m, m_a, 24, f"{name}_low_a") + lowest_one(m, m_b, 24,
                                                                         f"{name}_low_b"),
                   f"{name}_low")
    # Its highest one is one above the sum of theirs, or that sum itself.
    high = register(highest_one(m, m_a, 24, f"{name}_high_a")
                    + highest_one(m, m_b, 24, f"{name}_high_b"), f"{name}_high")
    e_sum = register(e_sum, f"{name}_e_sum_q")
    side.step("q")
    product = register((parts[0] + ((parts[1] + parts[2]) << 12) + (parts[3] << 24))[:48],
                       f"{name}_product")
    low = register(low, f"{name}_low_p")
    high = register(high, f"{name}_high_p")
    e_sum = register(e_sum, f"{name}_e_sum_p")
    side.step("p")

    top = register(high + (product >> (high + 1)[:6])[0], f"{name}_top")
    low = register(low, f"{name}_low_t")
    product = register(product, f"{name}_product_t")
    e_sum = register(e_sum, f"{name}_e_sum_t")
    side.step("t")

    # Normalized, the highest one at bit 47: the biased exponent of the result is
    # e_a + e_b - 127 + (top - 46).
    normal = register((product << (47 - top)[:6])[:48], f"{name}_normal")
    exponent = register((e_sum + top - 173).as_signed()[:11].as_signed(), f"{name}_exponent")
    low = register(low + 47 - top, f"{name}_low_n")
    side.step("n")

    # Into 24 bits: 24 places right, and 1 - exponent more below the smallest normal
    # (the amount a stage ahead of the shift).
    extra = Mux(exponent < 1, 1 - exponent, 0)
    right = register(Mux(extra > 26, 50, 24 + extra)[:6], f"{name}_right")
    normal = register(normal, f"{name}_normal_r")
    low = register(low, f"{name}_low_r")
    exponent = register(exponent, f"{name}_exponent_r")
    side.step("a")
    kept = register((normal >> right)[:24], f"{name}_kept")
    guard = register((normal >> (right - 1)[:6])[0], f"{name}_guard")
    sticky = register(low + 1 < right, f"{name}_sticky")
    overflow = register(exponent >= 0xFF, f"{name}_overflow_s")
    exponent = register(exponent, f"{name}_exponent_s")
    side.step("s")
    return _round_pack(pipe, name, side, kept, guard, sticky, exponent, overflow)


class _Binary(wiring.Component):
    """A stream component of one operation: input ``a``, ``b``; output the result's 32
    bits. Throughput: one result a cycle; it stalls as a whole under backpressure."""

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"a": 32, "b": 32}))),
            "o": Out(stream.Signature(32)),
        })

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, self.latency)
        m.d.comb += self.o.payload.eq(self._stages(m, pipe, self.i.payload.a,
                                                   self.i.payload.b))
        return m


class Float32Add(_Binary):
    """``fl32(a + b)`` (``add_stages``). Latency ``ADD_LATENCY`` (9)."""

    latency = ADD_LATENCY
    _stages = staticmethod(add_stages)


class Float32Mul(_Binary):
    """``fl32(a * b)`` (``mul_stages``). Latency ``MUL_LATENCY`` (9)."""

    latency = MUL_LATENCY
    _stages = staticmethod(mul_stages)
