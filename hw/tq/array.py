"""TQ array: a weight-stationary array of term-quantization cells (revealed weight terms,
one a cycle, against data values truncated at run time)."""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Array, C, Cat, Mux, Signal, signed
from amaranth.lib import data
from amaranth.utils import ceil_log2

from codnn.golden.term_quant import ENCODINGS, truncate
from codnn.golden.tq_array import tq_timing
from codnn.hw.common.params import positive_int
from codnn.hw.common.delays import delay, stage
from codnn.hw.common.ws_array import WeightStationaryArray, column_stage, count_phase
from codnn.hw.tq.layouts import check_mag_bits, exponent_bits, sign_magnitude

__all__ = ["TermQuantArray", "weight_term"]


def truncated_value(mag_bits):
    """A data value truncated to its top terms: ``mag`` (``mag_bits + 1`` bits: NAF and
    Booth can round up to ``2**mag_bits``) and ``neg``."""
    return data.StructLayout({"mag": mag_bits + 1, "neg": 1})


def weight_term(mag_bits, g):
    """A weight term of a cell's queue: ``(-1)**neg * 2**exp`` of group value ``idx``."""
    return data.StructLayout({"exp": exponent_bits(mag_bits), "neg": 1,
                              "idx": max(1, ceil_log2(g)), "valid": 1})


def _at_end_copy(m, data_go, beat_cycles, name):
    """A copy of the shell's ``at_end`` (``phase == beat_cycles - 1``, cleared by an
    accepted beat) with its own phase counter."""
    phase = Signal(range(beat_cycles), init=beat_cycles - 1, name=f"{name}_phase")
    at_end = Signal(init=1, name=name)
    count_phase(m, phase, at_end, data_go, beat_cycles)
    return at_end


@dataclass(frozen=True)
class _TruncatingEdge:
    """The TQ array's edge (``_truncating_edge``): ``K`` column groups a cycle, their held
    values (``held[j]``), and the slot index, first flag and bank that go up the columns
    beside them."""

    K: int
    held: list
    i_in: object
    slot_first: object
    bank_edge: object


class TermQuantArray(WeightStationaryArray):
    """A ``rows x cols`` array of term-quantization cells; cell (r, c) holds one group of
    ``g`` weights as the ``alpha`` terms term revealing kept (its weight queue, in reveal
    order), array column c takes the ``g`` data values of group c.

    At the data edge each value is truncated to its top ``beta`` terms in ``encoding``
    (a table of ``codnn.golden.term_quant.truncate`` over every magnitude), then held while the
    column sends the vector's slots up the column in lockstep: slot ``i`` (``alpha``
    slots, one per cycle) names weight-queue position ``i``; a cell takes its weight term
    ``i``, ``s * 2**e`` of group value ``idx``, selects the truncated value ``idx`` and
    adds ``s * (value << e)`` to its group sum (the ``beta`` term pairs of that weight
    term at once, semantics section 3), which meets the row's partial sum after the last
    slot. The edge is shared: it takes ``K = ceil(cols / alpha)`` column groups a cycle,
    and group ``j`` of a vector enters ``j`` cycles after group 0, which is when the
    columns' skew needs its values.

    A cell reads its weight term ``i`` from a memory of both banks' queues (distributed
    RAM on ECP5) into a register, a cycle ahead of the value it pairs with; then four
    register steps: the value in two (a select within each four values of the group by
    the weight term's index's low bits, then among the fours), the value shifted by the
    term's exponent, the group sum (a ``2 * mag_bits + 2 + ceil(log2(alpha + 1))``-bit
    adder, a negative term through its carry in).

    The shell (``codnn.hw.common.ws_array.WeightStationaryArray``) double-buffers the weight
    queues (a ``weights`` beat is one array row, accepted every ``alpha`` cycles: one
    term of each queue a cycle), takes one data beat (one vector) per ``alpha`` cycles on
    credits, keeps the partial sums that wait for the cells in a block-RAM delay line, and
    puts results through a block-RAM FIFO, with an optional output stage.

    Latency: ``pipeline_depth + 2`` cycles (``rows + cols + 1 + edge_latency + alpha +
    2``, +2 with an output stage, +2 through the FIFO); ``edge_latency = 4``
    (``codnn.golden.tq_array.tq_timing``). Throughput: one vector per ``alpha`` cycles, ``rows *
    cols`` groups of ``g`` MACs each; a tile's weights load in ``rows * alpha`` cycles,
    overlapping the previous tile.

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
    requant : str
        ``"shift"`` or ``"multiplier"``, as ``WeightStationaryArray``.

    Attributes
    ----------
    weights : In(stream.Signature(ArrayLayout(ArrayLayout(weight_term, alpha), cols)))
    data : In(stream.Signature(StructLayout({"x": ArrayLayout(ArrayLayout(
           sign_magnitude(mag_bits), g), cols), "psum": ..., "last": 1})))
    result, shift, multiplier : as ``WeightStationaryArray``.
    """

    def __init__(self, *, rows, cols, g=8, alpha=12, beta=3, mag_bits=7, encoding="naf",
                 acc_bits=32, out_bits=None, requant="shift"):
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
            column_data=data.ArrayLayout(sign_magnitude(mag_bits), g), requant=requant,
            **tq_timing(alpha, beta, mag_bits))

    g = property(lambda self: self._g, doc="Values per group.")
    alpha = property(lambda self: self._alpha, doc="Weight terms per group.")
    beta = property(lambda self: self._beta, doc="Terms kept per data value.")
    mag_bits = property(lambda self: self._mag_bits, doc="Magnitude width.")
    encoding = property(lambda self: self._encoding, doc="Data term encoding.")

    def _cells(self, m, row_psum, weight, use_bank, data_go, phase, at_end, platform):
        edge = self._truncating_edge(m, use_bank, data_go, phase, at_end)
        for c in range(self.cols):
            self._column(m, c, edge, weight, row_psum)

    def _truncating_edge(self, m, use_bank, data_go, phase, at_end):
        """The edge: K column groups a cycle (as few as a vector's alpha cycles allow),
        each value truncated to its top beta terms by a table; group j of a vector enters
        j cycles after the first, when the columns' skew needs it. Returns the groups'
        held values (``held``), ``K``, and the slot index, first flag and bank that go up
        the columns beside them."""
        W, g, mb, S = self.cols, self.g, self.mag_bits, self.beat_cycles
        K = -(-W // S)
        steps = -(-W // K)
        # The beat goes into a shift register while a beat may be accepted and moves down
        # a column group a cycle; the edge takes the bottom group: no select, no counter.
        # Each group of the register has its own copy of the shell's at_end (a register
        # with its own phase counter, so that synthesis keeps it): one flip-flop no
        # longer drives the load select of every bit across the array.
        step_bits = K * len(self.data.payload.x[0].as_value())
        x_in = Signal(steps * step_bits, name="x_in", reset_less=True)
        payload = self.data.payload.x.as_value()
        for j in range(steps):
            load = _at_end_copy(m, data_go, S, f"x_in_load_{j}") if S > 1 else at_end
            part = slice(j * step_bits, (j + 1) * step_bits)
            shifted = x_in[(j + 1) * step_bits:][:step_bits] if j + 1 < steps else 0
            m.d.sync += x_in[part].eq(Mux(load, payload[part], shifted))
        edge_in = data.View(data.ArrayLayout(sign_magnitude(mb), K * g),
                            stage(m, x_in[:step_bits], "edge_in"))
        table = truncate(np.arange(1 << mb), self.beta, self.encoding, mb)
        truncated = Signal(data.ArrayLayout(truncated_value(mb), K * g), name="truncated",
                           reset_less=True)
        entries = [C(int(v), mb + 1) for v in table]
        for lane in range(K * g):
            mag = Array(entries)[edge_in[lane].mag]
            m.d.sync += [truncated[lane].mag.eq(mag),
                         truncated[lane].neg.eq(edge_in[lane].neg & (mag != 0))]
        # Cycles from acceptance to group 0's values on the table's output.
        edge = 3
        edge_go = delay(m, data_go, edge, "go_edge")
        bank_in = Signal(name="bank_in", reset_less=True)
        with m.If(data_go):
            m.d.sync += bank_in.eq(use_bank)
        # Slot i of the held vector is weight queue position i: the shell's phase.
        i_in = delay(m, phase, edge, "slot_i")
        slot_first = delay(m, phase == 0, edge, "slot_first")
        bank_edge = delay(m, bank_in, edge, "bank_edge")
        held, go = [], edge_go
        for j in range(steps):
            # Group j's values, held for the vector's slots: a cycle behind group j - 1's.
            if j:
                go = stage(m, go, f"go_edge_{j}")
            hold = Signal.like(truncated, name=f"held_{j}")
            with m.If(go):
                m.d.sync += hold.eq(truncated)
            held.append(hold)
        return _TruncatingEdge(K, held, i_in, slot_first, bank_edge)

    def _column(self, m, c, edge, weight, row_psum):
        """Column ``c``: its bus of g truncated values, a register from the hold and
        ``c - j`` skew registers, with the weight queue position i (a cycle ahead), its
        bank (the memory's address) and the first flag beside it; then its cells, bottom
        row first, each adding its group sum to the row's partial sum."""
        R, g, A, mb = self.rows, self.g, self.alpha, self.mag_bits
        value_shape = truncated_value(mb)
        group_bits = 2 * mb + 2 + ceil_log2(A + 1)
        j, lane = divmod(c, edge.K)
        bus = Signal(data.ArrayLayout(value_shape, g), name=f"bus_c{c}")
        for v in range(g):
            m.d.comb += bus[v].eq(edge.held[j][lane * g + v])
        bus = delay(m, bus, 1 + c - j, f"bus_c{c}")
        i = delay(m, edge.i_in, c, f"i_c{c}")
        bank = delay(m, edge.bank_edge, c, f"bank_c{c}")
        first = delay(m, edge.slot_first, c + 1, f"first_c{c}")
        for r in reversed(range(R)):
            # With one term a queue the shell gives the whole queue: its only term.
            queued = weight(r, c, bank, i) if A > 1 else weight(r, c, bank)[0]
            w_term = stage(m, queued, f"wterm_r{r}_c{c}")
            # Steps 1 and 2: the value the weight term pairs with, first within each
            # four of the group (the index's low bits), then among the fours; step 3:
            # the value shifted by the weight term's exponent; step 4: added to or
            # taken from the group sum.
            low = min(2, len(w_term.idx))
            fours = [data.View(value_shape, stage(
                m, Array(bus[v].as_value() for v in range(q, min(q + 4, g)))
                [w_term.idx[:low]], f"xfour{q // 4}_r{r}_c{c}")) for q in range(0, g, 4)]
            w_term = stage(m, w_term, f"wterm2_r{r}_c{c}")
            x = Array(fours)[w_term.idx[low:]] if len(fours) > 1 else fours[0]
            w_exp = stage(m, w_term.exp, f"wexp_r{r}_c{c}")
            x_mag = stage(m, Mux(w_term.valid, x.mag, 0), f"xmag_r{r}_c{c}")
            neg = stage(m, w_term.neg ^ x.neg, f"neg_r{r}_c{c}")
            first_op = stage(m, stage(m, first, f"first1_r{r}_c{c}"), f"first_r{r}_c{c}")
            # A negative product is its complement plus one (the adder's carry in),
            # the complement taken with the shift: no subtractor, no select.
            shifted = x_mag << w_exp
            product = stage(m, shifted ^ neg.replicate(len(shifted)), f"product_r{r}_c{c}")
            neg, first_op = (stage(m, neg, f"neg2_r{r}_c{c}"),
                             stage(m, first_op, f"first2_r{r}_c{c}"))
            group_sum = Signal(signed(group_bits), name=f"gsum_r{r}_c{c}", reset_less=True)
            # A group's first addend replaces the sum.
            addend = Cat(product, neg.replicate(group_bits - len(product))).as_signed()
            m.d.sync += group_sum.eq(Mux(first_op, 0, group_sum) + addend + neg)
            row_psum[r] = stage(m, (row_psum[r] + group_sum)[:self.acc_bits].as_signed(),
                                f"acc_r{r}_c{c}")
            if r > 0:
                # The column's own copies of i, first and bank start here.
                own = column_stage if r == R - 1 else stage
                bus, i, first, bank = (stage(m, bus, f"bus_r{r}_c{c}"),
                                       own(m, i, f"i_r{r}_c{c}"),
                                       own(m, first, f"first_r{r}_c{c}_up"),
                                       own(m, bank, f"bank_r{r}_c{c}"))
