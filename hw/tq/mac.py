"""The tMAC (one term pair per cycle) and its parallel-MAC baseline (one product per cycle).

Both take a group's work as a stream of beats flagged ``first``/``last`` and chain partial
sums like a systolic cell: ``result = wrap(psum + sum of the group's addends, acc_bits)``,
``psum`` being read on the group's first beat. They differ in what a beat carries:
a tMAC beat is one term pair (weight exponent, data exponent, sign; ``present`` low for
an empty lockstep slot), whose addend is ``+-2**(w_exp + x_exp)``: the paper's +-1 on the
coefficient of ``2**(w_exp + x_exp)``, with the coefficient vector kept in its converted,
two's complement form so no conversion step is needed. A pMAC beat is one pair of values
(``w``, ``x``), whose addend is their product.

Pipeline: (1) the addend (exponent add and one-hot/thermometer decode, or the product),
(2) the accumulator. Latency: 2 cycles from a group's last beat to its result. Throughput:
one beat per cycle (a group of ``alpha * beta`` term pairs or ``g`` value pairs);
backpressure on ``result`` stalls both stages without loss.
"""

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.tq.layouts import check_mag_bits, exponent_bits

__all__ = ["TMac", "PMac", "pair_addend", "power_addend"]


def power_addend(exponent, neg, present, width):
    """``+-2**exponent`` (0 unless ``present``) as a ``width``-bit two's complement value:
    a one-hot or, negative, a thermometer code (ones from the exponent up), each bit a
    comparison of the exponent with its position, so no adder or negation forms it."""
    top = (1 << len(exponent)) - 1           # no comparison that is constant
    return Cat(present & Mux(neg, C(1) if j >= top else exponent <= j,
                             C(0) if j > top else exponent == j)
               for j in range(width)).as_signed()


def pair_addend(w_exp, x_exp, neg, present, width):
    """A term pair's addend, ``+-2**(w_exp + x_exp)`` (``power_addend`` of the sum)."""
    return power_addend(w_exp + x_exp, neg, present, width)


class _GroupMac(wiring.Component):
    def __init__(self, fields, *, mag_bits, acc_bits):
        if not isinstance(acc_bits, int) or isinstance(acc_bits, bool) or acc_bits < 2:
            raise ValueError(f"Accumulator width must be an integer >= 2, not {acc_bits!r}")
        self._mag_bits, self._acc_bits = mag_bits, acc_bits
        super().__init__({
            "pairs": In(stream.Signature(data.StructLayout(
                {**fields, "first": 1, "last": 1, "psum": signed(acc_bits)}))),
            "result": Out(stream.Signature(signed(acc_bits))),
        })

    mag_bits = property(lambda self: self._mag_bits, doc="Magnitude width of the values.")
    acc_bits = property(lambda self: self._acc_bits, doc="Accumulator width.")
    @property
    def latency(self):
        """Cycles from an accepted beat to its result."""
        return 2

    def elaborate(self, platform):
        m = Module()
        beat = self.pairs.payload
        advance = Signal()
        m.d.comb += [advance.eq(~self.result.valid | self.result.ready),
                     self.pairs.ready.eq(advance)]
        valid1 = Signal()
        # Addends fit 2 * mag_bits + 2 bits (a product, or +-2**e with e <= 2 * mag_bits).
        width = min(self.acc_bits, 2 * self.mag_bits + 2)
        addend = Signal(signed(width), reset_less=True)
        first, last = Signal(reset_less=True), Signal(reset_less=True)
        psum = Signal(signed(self.acc_bits), reset_less=True)
        acc = Signal(signed(self.acc_bits), reset_less=True)
        with m.If(advance):
            m.d.sync += [valid1.eq(self.pairs.valid), addend.eq(self._addend(beat, width)),
                         first.eq(beat.first), last.eq(beat.last), psum.eq(beat.psum),
                         self.result.valid.eq(valid1 & last)]
            with m.If(valid1):
                m.d.sync += acc.eq(Mux(first, psum, acc) + addend)
        m.d.comb += self.result.payload.eq(acc)
        return m


class TMac(_GroupMac):
    """Term-pair MAC. ``pairs`` payload: ``w_exp``, ``x_exp`` (``0..mag_bits``), ``neg``,
    ``present``, ``first``, ``last``, ``psum``; ``result``: ``signed(acc_bits)``.

    Parameters
    ----------
    mag_bits : int
        Magnitude width of the values whose terms come in (1..15).
    acc_bits : int
        Accumulator width (>= 2).
    """

    def __init__(self, *, mag_bits=7, acc_bits=32):
        check_mag_bits(mag_bits)
        e = exponent_bits(mag_bits)
        super().__init__({"w_exp": e, "x_exp": e, "neg": 1, "present": 1},
                         mag_bits=mag_bits, acc_bits=acc_bits)

    def _addend(self, beat, width):
        return pair_addend(beat.w_exp, beat.x_exp, beat.neg, beat.present, width)


class PMac(_GroupMac):
    """Parallel MAC baseline. ``pairs`` payload: ``w``, ``x`` (two's complement,
    ``mag_bits + 1`` bits), ``first``, ``last``, ``psum``; ``result``: ``signed(acc_bits)``.

    Parameters
    ----------
    mag_bits : int
        Magnitude width of the values (1..15).
    acc_bits : int
        Accumulator width (>= 2).
    """

    def __init__(self, *, mag_bits=7, acc_bits=32):
        check_mag_bits(mag_bits)
        super().__init__({"w": signed(mag_bits + 1), "x": signed(mag_bits + 1)},
                         mag_bits=mag_bits, acc_bits=acc_bits)

    def _addend(self, beat, width):
        return beat.w * beat.x
