"""A block pair added to a float32 sum: the step of every product of the training step
(docs/semantics.md section 11, ``codnn.golden.bfp_training.block_term``): ``psum +
fl32(P * 2**q)``, ``P`` the pair's exact dot product."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.bfp.dot import dot_stages, sum_bits, tree_levels
from codnn.hw.bfp.float32 import ADD_LATENCY, add_stages, highest_one, lowest_one
from codnn.hw.common.params import training_block
from codnn.hw.common.pipeline import StallPipeline

__all__ = ["BlockAccumulate"]

_EXPONENT_BITS = 8
#: Bits of ``q = ea + eb - wa - wb + 2`` (-270..252) and of the term's exponent.
_Q_BITS = 11
#: Smallest float32 step: a subnormal's unit is ``2**-149``.
_SUBNORMAL_UNIT = 149


class BlockAccumulate(wiring.Component):
    """``fl32(psum + fl32(P * 2**(ea + eb - wa - wb + 2)))``, ``P = sum_j ma_j * mb_j``
    exact: the step of section 11's sums, a cell of a BFP systolic array with ``psum``
    from the cell above. The term is exact when normal, rounded to nearest even below
    float32's normal range (a subnormal), an infinity on overflow, ``+0.0`` for ``P =
    0``; the addition is ``codnn.hw.bfp.float32``'s.

    Input beat ``i.payload``: ``ea``, ``eb`` (signed 8-bit shared exponents), ``wa``,
    ``wb`` (the blocks' mantissa widths, 2..``m``), ``ma``, ``mb`` (``g`` signed ``m +
    1``-bit mantissas each) and ``psum`` (32 bits). Output beat ``o.payload``: the new
    sum's 32 bits. (With ``psum`` = ``-0.0`` it is the term itself.)

    Pipeline: products; a registered adder tree (``ceil(log2 g)`` levels, at least one);
    sign and magnitude (and the subnormal shift's amount, from ``q``); the highest and
    lowest one and the exponent; the shifts (into the fraction, or for a subnormal right,
    the lowest one saying what it drops); rounded and packed; then ``ADD_LATENCY`` stages
    of the addition. Latency: ``latency`` = ``5 + max(1, ceil(log2 g)) + ADD_LATENCY``
    (18 at ``g = 16``). Throughput: one pair (``g`` MACs) a cycle; it stalls as a whole
    under backpressure.

    Raises
    ------
    TypeError
        If ``g`` or ``m`` is not a positive integer.
    ValueError
        If ``m`` lies outside 2..8 (``codnn.golden.bfp_training.WIDTHS``).
    """

    def __init__(self, *, g=16, m=8):
        training_block(g, m)
        self.g, self.m = g, m
        self.term_latency = 5 + tree_levels(g)
        self.latency = self.term_latency + ADD_LATENCY
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "ea": signed(_EXPONENT_BITS), "eb": signed(_EXPONENT_BITS),
                "wa": unsigned(4), "wb": unsigned(4),
                "ma": data.ArrayLayout(signed(m + 1), g),
                "mb": data.ArrayLayout(signed(m + 1), g), "psum": unsigned(32)}))),
            "o": Out(stream.Signature(32)),
        })

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, self.latency)
        term = self._term(m, pipe)
        psum = pipe.delay(self.i.payload.psum, self.term_latency, "psum")
        m.d.comb += self.o.payload.eq(add_stages(m, pipe, psum, term))
        return m

    def _term(self, m, pipe):
        """``fl32(P * 2**q)`` after ``term_latency`` stages."""
        register, delay = pipe.register, pipe.delay
        beat = self.i.payload
        total = dot_stages(register, beat.ma, beat.mb, self.g)
        q = delay((beat.ea + beat.eb + 2 - beat.wa - beat.wb).as_signed()[:_Q_BITS]
                  .as_signed(), 1 + tree_levels(self.g), "q")

        # Sign and magnitude.
        width = sum_bits(self.g, self.m)
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
        top = highest_one(m, magnitude, width, "top")
        trailing = lowest_one(m, magnitude, width, "trailing")  # zeros below the lowest one
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
        return register(Cat(word, negative), "term")
