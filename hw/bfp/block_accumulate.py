"""A block pair added to a float32 sum: the step of every product of the training step
(docs/semantics.md section 11, ``codnn.golden.bfp_training.block_term``): ``psum +
fl32(P * 2**q)``, ``P`` the pair's exact dot product."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.bfp_training import WIDTHS
from codnn.hw.bfp.float_add import Float32Add
from codnn.hw.common.params import positive_int
from codnn.hw.common.pipeline import StallPipeline

__all__ = ["BlockTerm", "BlockAccumulate"]

_EXPONENT_BITS = 8
#: Bits of ``q = ea + eb - wa - wb + 2`` (-270..252) and of the term's exponent.
_Q_BITS = 11
#: Smallest float32 step: a subnormal's unit is ``2**-149``.
_SUBNORMAL_UNIT = 149


def _tree_levels(g):
    """Levels of the registered adder tree over ``g`` products (at least one)."""
    return max(1, (g - 1).bit_length())


def _beat_layout(g, m):
    return data.StructLayout({
        "ea": signed(_EXPONENT_BITS), "eb": signed(_EXPONENT_BITS),
        "wa": unsigned(4), "wb": unsigned(4),
        "ma": data.ArrayLayout(signed(m + 1), g), "mb": data.ArrayLayout(signed(m + 1), g),
        "psum": unsigned(32)})


class BlockTerm(wiring.Component):
    """``fl32(P * 2**(ea + eb - wa - wb + 2))`` of a block pair, ``P = sum_j ma_j * mb_j``
    exact, rounded to nearest even where it falls below float32's normal range (a
    subnormal), an infinity where it overflows; ``P = 0`` gives ``+0.0``.

    Input beat ``i.payload``: ``ea``, ``eb`` (signed 8-bit shared exponents), ``wa``,
    ``wb`` (the blocks' mantissa widths, 2..``m``), ``ma``, ``mb`` (``g`` signed ``m +
    1``-bit mantissas each) and ``psum`` (32 bits, carried through). Output beat
    ``o.payload``: ``a`` = the term's 32 bits, ``b`` = ``psum`` (``Float32Add``'s input).

    Pipeline: products; a registered adder tree (``ceil(log2 g)`` levels, at least one);
    sign and magnitude; the leading one and the exponent; the shifts (a left shift into
    the fraction, or for a subnormal a right shift); rounded and packed. Latency:
    ``latency`` = ``5 + max(1, ceil(log2 g))`` (9 at ``g = 16``). Throughput: one pair a cycle; it
    stalls as a whole under backpressure.

    Raises
    ------
    TypeError
        If ``g`` or ``m`` is not a positive integer.
    ValueError
        If ``m`` lies outside 2..8 (``codnn.golden.bfp_training.WIDTHS``).
    """

    def __init__(self, *, g=16, m=8):
        self.check(g, m)
        self.g, self.m = g, m
        self.latency = 5 + _tree_levels(g)
        super().__init__({
            "i": In(stream.Signature(_beat_layout(g, m))),
            "o": Out(stream.Signature(data.StructLayout({"a": 32, "b": 32}))),
        })

    @staticmethod
    def check(g, m):
        """The parameter checks (``TypeError``, ``ValueError``)."""
        positive_int(g, "Block size")
        positive_int(m, "Mantissa width")
        if m not in WIDTHS:
            raise ValueError(f"Mantissa width must lie in {WIDTHS.start}..{WIDTHS.stop - 1}, "
                             f"not {m}")

    @property
    def sum_bits(self):
        """Magnitude bits of ``|P| <= g * (2**m - 1)**2``."""
        return (self.g * ((1 << self.m) - 1) ** 2).bit_length()

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, self.latency)
        register, delay = pipe.register, pipe.delay
        beat = self.i.payload

        level = [register(beat.ma[j] * beat.mb[j], f"product{j}") for j in range(self.g)]
        for depth in range(_tree_levels(self.g)):
            pairs = [a + b for a, b in zip(level[::2], level[1::2])]
            level = [register(value, f"sum{depth}_{k}")
                     for k, value in enumerate(pairs + level[len(level) & ~1:])]
        total = level[0]
        q = delay((beat.ea + beat.eb + 2 - beat.wa - beat.wb).as_signed()[:_Q_BITS]
                  .as_signed(), 1 + _tree_levels(self.g), "q")
        psum = delay(beat.psum, self.latency - 2, "psum")

        # Sign and magnitude.
        width = self.sum_bits
        negative = register(total < 0, "negative")
        magnitude = register(Mux(total < 0, -total, total)[:width], "magnitude")
        # The shift of a subnormal term, |P| * 2**(q + 149): left (exact) or right.
        # (Each a single carry chain from q: the comparisons against constants.)
        subnormal_left = delay(q >= -_SUBNORMAL_UNIT, 2, "subnormal_left")
        left = delay((q + _SUBNORMAL_UNIT)[:5], 2, "left")
        right = Mux(q < -_SUBNORMAL_UNIT - (width + 2), width + 2,
                    (-_SUBNORMAL_UNIT - q)[:6])
        right = delay(right[:6], 2, "right")
        q = register(q, "q_m")

        # The leading and the trailing one; the biased exponent of |P| * 2**q.
        top = Signal(range(max(width, 2)), name="top")
        trailing = Signal(range(width + 1), name="trailing")     # zeros below the lowest one
        m.d.comb += trailing.eq(width)
        for k in range(width):
            with m.If(magnitude[k]):
                m.d.comb += top.eq(k)
            with m.If(magnitude[width - 1 - k]):
                m.d.comb += trailing.eq(width - 1 - k)
        biased = register((q + top + 127).as_signed()[:_Q_BITS + 1].as_signed(), "biased")
        top = register(top, "top_r")
        trailing = register(trailing, "trailing_r")
        magnitude = register(magnitude, "magnitude_r")
        negative = delay(negative, 1, "negative")

        # Packed, over two stages. A normal term is exact (|P| has at most 23 bits below
        # its leading one).
        fraction = Signal(23, name="fraction")
        for k in range(max(width, 1)):
            with m.If(top == k):
                m.d.comb += fraction.eq((magnitude << (23 - k))[:23])
        shifted = Cat(Const(0, 2), magnitude) >> right          # two bits below the point
        lost = trailing + 2 < right                             # ones below those two
        kept = register(shifted[2:2 + 24], "kept")
        guard = register(shifted[1], "guard")
        sticky = register(shifted[0] | lost, "sticky")
        exact = register((magnitude << left)[:24], "exact")
        normal = register(Cat(fraction, biased[:8]), "normal")
        form = register(Mux(magnitude == 0, 0, Mux(biased >= 0xFF, 1, Mux(
            biased >= 1, 2, Mux(subnormal_left, 3, 4)))), "form")   # zero, inf, normal, ...
        negative = delay(negative, 1, "negative_p")
        psum = delay(psum, 1, "psum_p")

        rounded = (kept + (guard & (sticky | kept[0])))[:24]
        word = Signal(31, name="word")
        with m.Switch(form):
            with m.Case(1):
                m.d.comb += word.eq(Cat(Const(0, 23), Const(0xFF, 8)))
            with m.Case(2):
                m.d.comb += word.eq(normal)
            with m.Case(3):
                m.d.comb += word.eq(exact)
            with m.Case(4):
                m.d.comb += word.eq(rounded)
        m.d.comb += [
            self.o.payload.a.eq(register(Cat(word, negative), "term")),
            self.o.payload.b.eq(register(psum, "psum_out")),
        ]
        return m


class BlockAccumulate(wiring.Component):
    """``fl32(psum + fl32(P * 2**q))``: ``BlockTerm`` then ``Float32Add``, the step of
    section 11's sums (a systolic cell's, with ``psum`` from the cell above). Input beat:
    ``BlockTerm``'s; output beat: the new sum's 32 bits.

    Latency: ``latency`` = ``BlockTerm``'s plus ``Float32Add.latency`` (17 at ``g = 16``). Throughput: one pair a cycle; it stalls as a whole under backpressure.
    """

    def __init__(self, *, g=16, m=8):
        BlockTerm.check(g, m)
        self.g, self.m = g, m
        self.latency = 5 + _tree_levels(g) + Float32Add.latency
        super().__init__({"i": In(stream.Signature(_beat_layout(g, m))),
                          "o": Out(stream.Signature(32))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.term = term = BlockTerm(g=self.g, m=self.m)
        m.submodules.add = add = Float32Add()
        wiring.connect(m, wiring.flipped(self.i), term.i)
        wiring.connect(m, term.o, add.i)
        wiring.connect(m, add.o, wiring.flipped(self.o))
        return m
