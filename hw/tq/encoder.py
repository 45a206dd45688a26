"""Streaming term encoder: sign-magnitude values to signed-digit terms (docs/semantics.md
section 3)."""

from amaranth.hdl import C, Cat, Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.params import positive_int
from codnn.hw.common.pipeline import StallPipeline
from codnn.golden.term_quant import ENCODINGS
from codnn.hw.tq.layouts import check_mag_bits, sign_magnitude, signed_digits

__all__ = ["ENCODINGS", "TermEncoder"]


class TermEncoder(wiring.Component):
    """Encode ``lanes`` sign-magnitude values per beat into signed digits.

    ``binary``: one +1 digit per set bit. ``naf``: the non-adjacent form (the paper's HESE
    encoder; minimal), from ``3v`` and ``v``: digits where they differ, +1 where ``3v``
    has the bit, -1 where ``v`` has it (one bit up). ``booth``: radix-2 Booth,
    ``d_i = b_(i-1) - b_i``. A negative value's digits swap sign.

    Latency: 2 cycles (register the value and ``3v``, then the digits). Throughput: one
    beat per cycle; backpressure stalls the pipeline without loss.

    Parameters
    ----------
    lanes : int
    mag_bits : int
        Magnitude width (1..15).
    encoding : str
        ``"binary"``, ``"naf"`` or ``"booth"``.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(sign_magnitude(mag_bits), lanes)))
    o : Out(stream.Signature(ArrayLayout(signed_digits(mag_bits), lanes)))
    """

    @property
    def latency(self):
        """Cycles from an accepted input beat to its output beat."""
        return 2

    def __init__(self, *, lanes=1, mag_bits=7, encoding="naf"):
        positive_int(lanes, "Lane count")
        check_mag_bits(mag_bits)
        if encoding not in ENCODINGS:
            raise ValueError(f"Encoding must be one of {', '.join(ENCODINGS)}, "
                             f"not {encoding!r}")
        self._lanes, self._mag_bits, self._encoding = lanes, mag_bits, encoding
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(sign_magnitude(mag_bits), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(signed_digits(mag_bits), lanes))),
        })

    lanes = property(lambda self: self._lanes, doc="Values per beat.")
    mag_bits = property(lambda self: self._mag_bits, doc="Magnitude width.")
    encoding = property(lambda self: self._encoding, doc="Term encoding.")

    def elaborate(self, platform):
        m = Module()
        register = StallPipeline(m, self.i, self.o, self.latency).register
        width = self.mag_bits + 1
        for lane in range(self.lanes):
            value = self.i.payload[lane]
            v = register(Cat(value.mag, C(0, 1)), f"v{lane}")         # b_mag = 0
            neg = register(value.neg, f"neg{lane}")
            if self.encoding == "binary":
                plus, minus = v, C(0, width)
            elif self.encoding == "booth":
                previous = (v << 1)[:width]                           # b_(i-1) at bit i
                plus, minus = previous & ~v, v & ~previous
            else:
                triple = register((value.mag << 1) + value.mag, f"triple{lane}")  # no $mul
                differ = triple ^ v
                plus, minus = ((triple & differ) >> 1)[:width], ((v & differ) >> 1)[:width]
            digits = self.o.payload[lane]
            m.d.comb += [digits.pos.eq(register(Mux(neg, minus, plus), f"pos{lane}")),
                         digits.neg.eq(register(Mux(neg, plus, minus), f"minus{lane}"))]
        return m
