"""The block floating point MAC unit of FAST: one block dot product per cycle, its result
rounded stochastically (docs/semantics.md section 8, ``codnn.golden.block_float.block_dot``)."""

from amaranth.hdl import Array, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.block_float import MANTISSA_BITS, NOISE_BITS
from codnn.hw.common.fmix32 import fmix32_stages
from codnn.hw.common.trees import registered
from codnn.hw.common.params import positive_int
from codnn.hw.common.pipeline import StallPipeline

__all__ = ["BlockDot", "RESULT_EXPONENT_BITS", "tree_levels", "sum_bits", "dot_stages"]

#: Width of the result exponent (two's complement): it holds ``2 * EXPONENT_MIN - 2m + 2``
#: up to ``2 * EXPONENT_MAX + log2(g)``.
RESULT_EXPONENT_BITS = 10
_EXPONENT_BITS = 8


def tree_levels(g):
    """Levels of the registered adder tree over ``g`` products (at least one)."""
    return max(1, (g - 1).bit_length())


def sum_bits(g, m):
    """Magnitude bits of an exact block sum: ``|P| <= g * (2**m - 1)**2``."""
    return (g * ((1 << m) - 1) ** 2).bit_length()


def dot_stages(register, ma, mb, g):
    """``sum_j ma[j] * mb[j]``, exact, after ``1 + tree_levels(g)`` stages of
    ``register`` (a ``StallPipeline``'s): the products, then the tree, every level
    registered, an odd one out carried along."""
    products = [register(ma[j] * mb[j], f"product{j}") for j in range(g)]
    return registered(products, lambda a, b: a + b, register, "sum")


class BlockDot(wiring.Component):
    """``sum_j a_j * b_j`` over a block of ``g`` block floating point pairs, rounded to one
    value of ``out_m`` magnitude bits, as ``codnn.golden.block_float.block_dot``.

    Input beat (``i.payload``, fields from the least significant bit): ``ea``, ``eb``
    (signed 8-bit shared exponents, ``EXPONENT_MIN..EXPONENT_MAX``), ``ma``, ``mb`` (``g``
    signed ``m + 1``-bit mantissas each, magnitudes below ``2**m``), ``counter`` (32 bits:
    the noise is ``fmix32(counter) >> 24``) and ``stochastic`` (1: round with the noise,
    0: to nearest). Output beat (``o.payload``): ``e`` (signed ``RESULT_EXPONENT_BITS``)
    and ``mantissa`` (signed ``out_m + 1`` bits), worth ``mantissa * 2**(e - out_m + 1)``;
    a zero sum gives ``(0, 0)``.

    Pipeline: products; a registered adder tree (``ceil(log2 g)`` levels, at least one);
    sign and magnitude; leading one and exponent; normalizing shift; noise added; shifted
    out, saturated and signed. The noise is ``fmix32`` of the counter over five stages
    beside the products and the tree. The pipeline stalls as a whole under backpressure.

    Latency: ``latency`` = ``6 + max(1, ceil(log2 g))`` cycles (10 at ``g = 16``).
    Throughput: one block (``g`` products) per cycle.

    Raises
    ------
    TypeError
        If ``g``, ``m`` or ``out_m`` is not a positive integer.
    ValueError
        If ``m`` or ``out_m`` lies outside ``codnn.golden.block_float.MANTISSA_BITS``.
    """

    def __init__(self, *, g=16, m=4, out_m=8):
        for value, what in ((g, "Block size"), (m, "Mantissa width"),
                            (out_m, "Result mantissa width")):
            positive_int(value, what)
        for value, what in ((m, "Mantissa width"), (out_m, "Result mantissa width")):
            if value not in MANTISSA_BITS:
                raise ValueError(f"{what} must lie in {MANTISSA_BITS.start}.."
                                 f"{MANTISSA_BITS.stop - 1}, not {value}")
        self.g, self.m, self.out_m = g, m, out_m
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "ea": signed(_EXPONENT_BITS), "eb": signed(_EXPONENT_BITS),
                "ma": data.ArrayLayout(signed(m + 1), g),
                "mb": data.ArrayLayout(signed(m + 1), g),
                "counter": unsigned(32), "stochastic": unsigned(1)}))),
            "o": Out(stream.Signature(data.StructLayout({
                "e": signed(RESULT_EXPONENT_BITS), "mantissa": signed(out_m + 1)}))),
        })

    @property
    def latency(self):
        """Cycles from an accepted input beat to its output beat."""
        return 6 + tree_levels(self.g)

    @property
    def sum_bits(self):
        """Magnitude bits of the exact block sum: ``|P| < g * (2**m - 1)**2``."""
        return sum_bits(self.g, self.m)

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, self.latency)
        register, delay = pipe.register, pipe.delay
        beat = self.i.payload

        total = dot_stages(register, beat.ma, beat.mb, self.g)
        q = delay(beat.ea + beat.eb - (2 * self.m - 2), 1 + tree_levels(self.g), "q")
        noise = delay(fmix32_stages(register, beat.counter, "noise")[32 - NOISE_BITS:],
                      self.latency - 7, "noise")
        stochastic = delay(beat.stochastic, self.latency - 2, "stochastic")

        # Sign and magnitude.
        width = self.sum_bits
        negative = register(total < 0, "negative")
        magnitude = register(Mux(total < 0, -total, total)[:width], "magnitude")
        q = register(q, "q_abs")

        # Leading one (the last assignment of a set bit wins) and the result exponent.
        top = Signal(range(max(width, 2)), name="top")
        for k in range(width):
            with m.If(magnitude[k]):
                m.d.comb += top.eq(k)
        zero = register(magnitude == 0, "zero")
        exponent = register((q + top)[:RESULT_EXPONENT_BITS], "exponent")
        top_r = register(top, "top_r")
        magnitude = register(magnitude, "magnitude_r")
        negative = delay(negative, 1, "negative")

        # A = floor(|P| * 2**(out_m - 1 - top + NOISE_BITS)), kept to out_m + NOISE_BITS bits.
        a_bits = self.out_m + NOISE_BITS
        shifted = []
        for k in range(max(width, 1)):
            shift = self.out_m - 1 - k + NOISE_BITS
            value = (magnitude << shift) if shift >= 0 else (magnitude >> -shift)
            shifted.append(value[:a_bits])
        aligned = register(Array(shifted)[top_r], "aligned")
        zero, exponent, negative = (delay(s, 1, f"{n}_a") for s, n in
                                    ((zero, "zero"), (exponent, "exponent"),
                                     (negative, "negative")))

        # Noise added; then shifted out, saturated and signed.
        rounded = register((aligned + Mux(stochastic, noise, 1 << (NOISE_BITS - 1)))
                           >> NOISE_BITS, "rounded")
        zero, exponent, negative = (delay(s, 1, f"{n}_r") for s, n in
                                    ((zero, "zero"), (exponent, "exponent"),
                                     (negative, "negative")))
        top_value = (1 << self.out_m) - 1
        mantissa = Mux(rounded > top_value, top_value, rounded)[:self.out_m]
        signed_mantissa = Mux(negative, -mantissa, mantissa)
        m.d.comb += [
            self.o.payload.e.eq(register(Mux(zero, 0, exponent), "e")),
            self.o.payload.mantissa.eq(register(Mux(zero, 0, signed_mantissa), "mantissa")),
        ]
        return m
