"""TQ array: a weight-stationary array of tMACs with run-time data term truncation."""

from amaranth.hdl import Array, Mux, Signal, signed
from amaranth.lib import data
from amaranth.utils import ceil_log2

from codnn.golden.tq_array import tq_timing
from codnn.hw.common.params import positive_int
from codnn.hw.common.ws_array import WeightStationaryArray, column_stage, delay, stage
from codnn.hw.tq.encoder import ENCODINGS, TermEncoder
from codnn.hw.tq.layouts import check_mag_bits, exponent_bits, sign_magnitude
from codnn.hw.tq.lister import TermLister
from codnn.hw.tq.mac import pair_addend
from codnn.hw.tq.revealer import TermRevealer

__all__ = ["TermQuantArray", "weight_term"]


def weight_term(mag_bits, g):
    """A weight term of a cell's queue: ``(-1)**neg * 2**exp`` of group value ``idx``."""
    return data.StructLayout({"exp": exponent_bits(mag_bits), "neg": 1,
                              "idx": max(1, ceil_log2(g)), "valid": 1})


class TermQuantArray(WeightStationaryArray):
    """A ``rows x cols`` array of tMACs; cell (r, c) holds one group of ``g`` weights as
    the ``alpha`` terms term revealing kept (its weight queue, in reveal order), array
    column c takes the ``g`` data values of group c.

    At the data edge each value is encoded (``encoding``), truncated to its top ``beta``
    terms and listed largest first (``TermEncoder``, ``TermRevealer`` with groups of one,
    ``TermLister``), then held while the column sends the vector's term pairs up the
    column in lockstep: slot ``s = i * beta + k`` (``alpha * beta`` slots, one per
    cycle) carries term ``k`` of every value of the group and the weight-queue position
    ``i``; a cell pairs its weight term ``i`` with term ``k`` of the value that term
    belongs to and adds ``+-2**(w_exp + x_exp)`` to its group sum, which meets the row's
    partial sum after the last slot.

    The shell (``hw.common.ws_array.WeightStationaryArray``) double-buffers the weight
    queues (a ``weights`` beat is one array row), takes one data beat (one vector) per
    ``alpha * beta`` cycles on credits, and puts results through a block-RAM FIFO, with
    an optional output stage.

    Latency: ``pipeline_depth + 2`` cycles (``rows + cols + 1 + edge_latency + alpha *
    beta``, +2 with an output stage, +2 through the FIFO); ``edge_latency = mag_bits +
    beta + 4``. Throughput: one vector per ``alpha * beta`` cycles, ``rows * cols``
    groups of ``g`` MACs each.

    Parameters
    ----------
    rows, cols : int
    g : int
        Values per group (weights per cell).
    alpha : int
        Weight terms per group.
    beta : int
        Terms kept per data value.
    mag_bits : int
        Magnitude width of weights and data (sign-magnitude), 1..15.
    encoding : str
        Data term encoding: ``"binary"``, ``"naf"`` or ``"booth"``.
    acc_bits : int
    out_bits : int or None

    Attributes
    ----------
    weights : In(stream.Signature(ArrayLayout(ArrayLayout(weight_term, alpha), cols)))
    data : In(stream.Signature(StructLayout({"x": ArrayLayout(ArrayLayout(
           sign_magnitude(mag_bits), g), cols), "psum": ..., "last": 1})))
    result, shift : as ``WeightStationaryArray``.
    """

    def __init__(self, *, rows, cols, g=8, alpha=12, beta=3, mag_bits=7, encoding="naf",
                 acc_bits=32, out_bits=None):
        for value, what in [(rows, "Row count"), (cols, "Column count"), (g, "Group size"),
                            (alpha, "Weight term budget"), (beta, "Data term budget"),
                            (acc_bits, "Accumulator width")]:
            positive_int(value, what)
        check_mag_bits(mag_bits)
        if encoding not in ENCODINGS:
            raise ValueError(f"Encoding must be one of {', '.join(ENCODINGS)}, "
                             f"not {encoding!r}")
        if acc_bits < 2:
            raise ValueError(f"Accumulator width must be at least 2 bits, not {acc_bits}")
        self._g, self._alpha, self._beta = g, alpha, beta
        self._mag_bits, self._encoding = mag_bits, encoding
        super().__init__(
            rows=rows, cols=cols, acc_bits=acc_bits, out_bits=out_bits,
            cell_weight=data.ArrayLayout(weight_term(mag_bits, g), alpha),
            column_data=data.ArrayLayout(sign_magnitude(mag_bits), g),
            **tq_timing(alpha, beta, mag_bits))

    g = property(lambda self: self._g, doc="Values per group.")
    alpha = property(lambda self: self._alpha, doc="Weight terms per group.")
    beta = property(lambda self: self._beta, doc="Terms kept per data value.")
    mag_bits = property(lambda self: self._mag_bits, doc="Magnitude width.")
    encoding = property(lambda self: self._encoding, doc="Data term encoding.")

    def _cells(self, m, row_psum, weight, use_bank, data_go, phase, platform):
        R, W, g, beta = self.rows, self.cols, self.g, self.beta
        mb = self.mag_bits
        # Edge: register the beat, encode, truncate, list (free running: never stalls).
        x_in = stage(m, self.data.payload.x, "x_in")
        m.submodules.encoder = encoder = TermEncoder(lanes=W * g, mag_bits=mb,
                                                     encoding=self.encoding)
        m.submodules.revealer = revealer = TermRevealer(lanes=W * g, budget=beta,
                                                        mag_bits=mb)
        m.submodules.lister = lister = TermLister(lanes=W * g, slots=beta, mag_bits=mb)
        m.d.comb += [encoder.i.valid.eq(1), encoder.i.payload.eq(x_in),
                     revealer.i.valid.eq(1), revealer.i.payload.eq(encoder.o.payload),
                     lister.i.valid.eq(1), lister.i.payload.eq(revealer.o.payload),
                     encoder.o.ready.eq(1), revealer.o.ready.eq(1), lister.o.ready.eq(1)]
        edge = 1 + encoder.latency + revealer.latency + lister.latency   # to the hold
        listed = Signal.like(lister.o.payload, name="listed")
        bank_in = Signal(name="bank_in", reset_less=True)
        with m.If(delay(m, data_go, edge, "go_edge")):
            m.d.sync += listed.eq(lister.o.payload)
        with m.If(data_go):
            m.d.sync += bank_in.eq(use_bank)
        # Slot s = i * beta + k of the held vector: data term k, weight queue position i.
        slot = delay(m, phase, edge, "slot")
        k_in, i_in = slot % beta, slot // beta
        bank_edge = delay(m, bank_in, edge, "bank_edge")
        group_bits = 2 * mb + 2 + ceil_log2(self.alpha * beta + 1)
        for c in range(W):
            terms = Array(listed[c * g + j] for j in range(g))
            bus = Signal(data.ArrayLayout(lister.o.payload.shape().elem_shape.elem_shape, g),
                         name=f"bus_c{c}")
            for j in range(g):
                m.d.comb += bus[j].eq(Array(terms[j][k] for k in range(beta))[k_in])
            bus = delay(m, bus, c, f"bus_c{c}")
            i = delay(m, i_in, c, f"i_c{c}")
            first = delay(m, slot == 0, c, f"first_c{c}")
            bank = delay(m, bank_edge, c, f"bank_c{c}")
            for r in reversed(range(R)):
                queue = weight(r, c, bank)
                w_term = Array(queue[n] for n in range(self.alpha))[i]
                x_term = Array(bus[j] for j in range(g))[w_term.idx]
                w_exp = stage(m, w_term.exp, f"wexp_r{r}_c{c}")
                x_exp = stage(m, x_term.exp, f"xexp_r{r}_c{c}")
                neg = stage(m, w_term.neg ^ x_term.neg, f"neg_r{r}_c{c}")
                present = stage(m, w_term.valid & x_term.valid, f"present_r{r}_c{c}")
                first_op = stage(m, first, f"first_r{r}_c{c}")
                group_sum = Signal(signed(group_bits), name=f"gsum_r{r}_c{c}",
                                   reset_less=True)
                m.d.sync += group_sum.eq(Mux(first_op, 0, group_sum)
                                         + pair_addend(w_exp, x_exp, neg, present,
                                                       group_bits))
                row_psum[r] = stage(m, (row_psum[r] + group_sum)[:self.acc_bits].as_signed(),
                                    f"acc_r{r}_c{c}")
                if r > 0:
                    # The column's own copies of i, first and bank start here.
                    own = column_stage if r == R - 1 else stage
                    bus, i, first, bank = (stage(m, bus, f"bus_r{r}_c{c}"),
                                           own(m, i, f"i_r{r}_c{c}"),
                                           own(m, first, f"first_r{r}_c{c}_up"),
                                           own(m, bank, f"bank_r{r}_c{c}"))
