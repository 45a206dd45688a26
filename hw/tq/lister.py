"""Term lister: a value's signed digits to its queue of terms, largest first."""

from amaranth.hdl import C, Cat, Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.params import positive_int
from codnn.hw.common.pipeline import StallPipeline
from codnn.hw.tq.layouts import check_mag_bits, exponent_bits, signed_digits, term

__all__ = ["TermLister"]


class TermLister(wiring.Component):
    """List the first ``slots`` terms of each of ``lanes`` values, by descending exponent
    (the exponent queue a tMAC reads); slots past a value's last term are not ``valid``.

    One pipeline stage per slot: a priority encoder finds the highest digit left, which
    fills the slot and is cleared.

    Latency: ``slots`` cycles. Throughput: one beat per cycle; backpressure stalls the
    pipeline without loss.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(signed_digits(mag_bits), lanes)))
    o : Out(stream.Signature(ArrayLayout(ArrayLayout(term(mag_bits), slots), lanes)))
    """

    def __init__(self, *, lanes=1, slots=3, mag_bits=7):
        positive_int(lanes, "Lane count")
        positive_int(slots, "Slot count")
        check_mag_bits(mag_bits)
        self._lanes, self._slots, self._mag_bits = lanes, slots, mag_bits
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(signed_digits(mag_bits), lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(
                data.ArrayLayout(term(mag_bits), slots), lanes))),
        })

    lanes = property(lambda self: self._lanes, doc="Values per beat.")
    slots = property(lambda self: self._slots, doc="Terms listed per value.")
    mag_bits = property(lambda self: self._mag_bits, doc="Magnitude width.")

    @property
    def latency(self):
        """Cycles from an accepted beat to its output beat being valid."""
        return self.slots

    def elaborate(self, platform):
        m = Module()
        register = StallPipeline(m, self.i, self.o, self.latency).register
        width = self.mag_bits + 1
        for lane in range(self.lanes):
            pos, neg = self.i.payload[lane].pos, self.i.payload[lane].neg
            listed = []
            for k in range(self.slots):
                # Priority encoder, one expression: the highest exponent wins.
                exp, neg_bit, valid = C(0, exponent_bits(self.mag_bits)), C(0, 1), C(0, 1)
                for e in range(width):
                    has = pos[e] | neg[e]
                    exp, neg_bit, valid = Mux(has, e, exp), Mux(has, neg[e], neg_bit), has | valid
                clear = ~(valid << exp)[:width]
                pos, neg = (register(pos & clear, f"pos_l{lane}_s{k}"),
                            register(neg & clear, f"neg_l{lane}_s{k}"))
                listed = [register(t, f"term_l{lane}_s{k}_{n}")
                          for n, t in enumerate(listed)]
                listed.append(register(Cat(exp, neg_bit, valid), f"term_l{lane}_s{k}_{k}"))
            for k, t in enumerate(listed):
                m.d.comb += self.o.payload[lane][k].eq(t)
        return m
