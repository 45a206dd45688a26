"""float32 values into a block of block floating point, a block a cycle: the rounding of
every tensor the training step multiplies (docs/semantics.md sections 8 and 11,
``codnn.golden.block_float.to_block_float``)."""

from amaranth.hdl import Cat, Const, Module, Mux, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.block_float import EXPONENT_MIN, NOISE_BITS
from codnn.hw.bfp.dot import tree_levels
from codnn.hw.bfp.float32 import highest_one
from codnn.hw.common.fmix32 import fmix32_stages
from codnn.hw.common.params import training_block
from codnn.hw.common.pipeline import StallPipeline
from codnn.hw.common.trees import registered

__all__ = ["BlockRound"]

_HASH_STAGES = 5


class BlockRound(wiring.Component):
    """``g`` float32 values to ``(E, M)``: the shared exponent ``E`` (the largest
    ``floor(log2 |x|)`` of the block's nonzero values, at least -128) and ``g`` signed
    mantissas of ``w`` magnitude bits, ``M = min((A + r) >> 8, 2**w - 1)`` with ``A`` the
    magnitude cut to 8 bits below the step ``2**(E - w + 1)`` and ``r`` the noise
    ``fmix32((seed + index + j) mod 2**32) >> 24`` of value ``j`` (stochastic), or 128
    (nearest); ``-0.0`` gives 0. A block holding an infinity or NaN sets ``nonfinite``
    (golden refuses it; section 11 stops the step) and its ``e`` and mantissas are 0.

    Input beat ``i.payload``: ``values`` (``g`` x 32 bits, IEEE encoding), ``width``
    (``w``, 2..``m``), ``seed`` and ``index`` (32 bits each: the block's first value is
    value ``index`` of the tensor) and ``stochastic``. Output beat ``o.payload``: ``e``
    (signed 8 bits), ``mantissas`` (``g`` signed ``m + 1``-bit values), ``nonfinite``.

    Pipeline: each value unpacked (its exponent and significand) while the counters'
    hashes start; the largest exponent over a registered tree (``ceil(log2 g)`` levels);
    each value's shift from it; ``A``; rounded with the noise and saturated; signed.
    ``fmix32`` runs beside over its five stages. Latency: ``latency`` = ``4 +
    max(2, ceil(log2 g))`` (8 at ``g = 16``). Throughput: one block a cycle; it stalls
    as a whole under backpressure.

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
        # (At least two levels, so that the hashes are ready by the rounding.)
        self._levels = max(2, tree_levels(g))
        self.latency = 4 + self._levels
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "values": data.ArrayLayout(unsigned(32), g), "width": unsigned(4),
                "seed": unsigned(32), "index": unsigned(32), "stochastic": unsigned(1)}))),
            "o": Out(stream.Signature(data.StructLayout({
                "e": signed(8), "mantissas": data.ArrayLayout(signed(m + 1), g),
                "nonfinite": unsigned(1)}))),
        })

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, self.latency)
        register, delay = pipe.register, pipe.delay
        beat = self.i.payload
        g, top_m = self.g, self.m

        # Noise: fmix32 of each value's counter, ready by the rounding stage.
        noise = [delay(fmix32_stages(register, (beat.seed + beat.index + j)[:32],
                                     f"hash{j}")[32 - NOISE_BITS:],
                       self.latency - 1 - _HASH_STAGES, f"noise{j}") for j in range(g)]
        stochastic = delay(beat.stochastic, self.latency - 1, "stochastic")
        width = delay(beat.width, self.latency - 3, "width")

        # 1. Unpacked: sign, significand S (hidden bit for a normal value), the power q of
        # its unit (|x| = S * 2**q, q + 150 = max(biased, 1)) and e = floor(log2 |x|).
        sign, significand, unit, exponent, nonzero, bad = [], [], [], [], [], []
        for j in range(g):
            x = beat.values[j]
            biased, fraction = x[23:31], x[:23]
            S = Cat(fraction, biased != 0)
            top = highest_one(m, S, 24, f"top{j}")
            unit_j = Mux(biased == 0, 1, biased)                    # q + 150
            sign.append(register(x[31], f"sign{j}"))
            significand.append(register(S, f"significand{j}"))
            unit.append(register(unit_j, f"unit{j}"))
            exponent.append(register((unit_j + top - 150).as_signed()[:9].as_signed(),
                                     f"exponent{j}"))
            nonzero.append(register(S != 0, f"nonzero{j}"))
            bad.append(register(biased == 0xFF, f"bad{j}"))

        # 2. The largest exponent of the nonzero values (at least EXPONENT_MIN).
        E = registered([Mux(nz & (e > EXPONENT_MIN), e, EXPONENT_MIN)
                        for nz, e in zip(nonzero, exponent)],
                       lambda a, b: Mux(a > b, a, b), register, "max", self._levels)
        depth = self._levels
        sign, significand, unit = ([delay(v, depth, f"{n}{j}_d") for j, v in enumerate(vs)]
                                   for vs, n in ((sign, "sign"), (significand, "sig"),
                                                 (unit, "unit")))
        nonfinite = delay(Cat(*bad).any(), depth, "nonfinite")

        # 3. Each value's shift: A = floor(S * 2**(q - (E - w + 1) + 8)); a right shift
        # by E - w + 1 - 8 - q = E - w - 7 - q (left by its negation, exact, for a block
        # of subnormals), q = unit - 150.
        shifts = [register((E - width + 143 - u).as_signed()[:11].as_signed(), f"shift{j}")
                  for j, u in enumerate(unit)]
        E = register(E, "E_s")
        sign, significand = ([register(v, f"{n}{j}_s") for j, v in enumerate(vs)]
                             for vs, n in ((sign, "sign"), (significand, "sig")))
        nonfinite = register(nonfinite, "nonfinite_s")

        # 4. A (at most w + 8 bits), then rounded with the noise and saturated.
        a_bits = top_m + NOISE_BITS
        cut = []
        for j in range(g):
            right = Mux(shifts[j] > 24, 24, shifts[j])
            left = Mux(shifts[j] < 0, -shifts[j], 0)[:4]
            value = Mux(shifts[j] >= 0, significand[j] >> right[:5], significand[j] << left)
            cut.append(register(value[:a_bits + 1], f"cut{j}"))
        E = register(E, "E_c")
        sign = [register(v, f"sign{j}_c") for j, v in enumerate(sign)]
        nonfinite = register(nonfinite, "nonfinite_c")
        limit = delay(((Const(1, top_m + 1) << width) - 1)[:top_m], 2, "limit")

        mantissas = []
        for j in range(g):
            r = Mux(stochastic, noise[j], 1 << (NOISE_BITS - 1))
            rounded = (cut[j] + r) >> NOISE_BITS
            magnitude = Mux(rounded > limit, limit, rounded)[:top_m]
            mantissas.append(register(Mux(nonfinite, 0, Mux(sign[j], -magnitude, magnitude)),
                                      f"mantissa{j}"))
        m.d.comb += [self.o.payload.e.eq(register(Mux(nonfinite, 0, E), "E_out")),
                     self.o.payload.nonfinite.eq(register(nonfinite, "nonfinite_out"))]
        m.d.comb += [self.o.payload.mantissas[j].eq(v) for j, v in enumerate(mantissas)]
        return m
