"""Weight-stationary column-combined systolic array with double-buffered weights."""

from dataclasses import dataclass

from amaranth.hdl import Array, C, Cat, Mux, Signal, signed, unsigned
from amaranth.lib import data

from codnn.golden.systolic import (MAC_KINDS, mac_timing, select_bits, serial_lanes,
                                   serial_word_bits)
from codnn.hw.common.multiplier import MultiplierPlan, pipelined_product
from codnn.hw.common.params import positive_int
from codnn.hw.common.delays import delay, delay_line, stage
from codnn.hw.common.ws_array import (WeightStationaryArray, column_stage, group_copies,
                                      row_groups)

__all__ = ["ColumnCombinedArray"]



@dataclass(frozen=True)
class _SerialEdge:
    """The bit-serial array's left edge (``_bitserial_edge``): the beat taken
    (``accepted``), each column's and stream's shift register (``shifters[g][a]``), the
    bits still to shift (``live``), the beat's bank and lane, and its last bit
    (``last_in``)."""

    accepted: object
    shifters: list
    live: Signal
    bank_in: Signal
    lane_in: Signal
    last_in: object


class ColumnCombinedArray(WeightStationaryArray):
    """A ``rows x cols`` column-combined systolic array (``alpha = 1``: the dense array).

    Cell (r, g) holds, in each of two weight banks, a signed weight and a stream select.
    Array column g receives ``alpha`` data streams (the channels of group g); the data move
    up the column one cell per cycle, each cell multiplying its weight by stream
    ``select``; partial sums enter row r at the left (``psum``), move right one cell per
    cycle and leave at the right edge. Skew and deskew registers at the edges let whole
    vectors go in and come out per beat.

    The shell (``codnn.hw.common.ws_array.WeightStationaryArray``) double-buffers the weights
    (a ``weights`` beat is one array row, so the next tile loads while the current one
    computes), accepts data beats on credits so that the cells never stall, and puts
    results through an output FIFO per row.

    Arithmetic: ``acc = wrap(psum + sum_g w[r,g] * x[g][sel[r,g]], acc_bits)`` (two's
    complement). With ``out_bits``, results also carry ``y = clamp(acc >> shift, 0,
    2**out_bits - 1)`` (arithmetic shift), ``shift`` being a run-time input.

    MAC kinds. ``parallel``: each cell is pipelined so that no path holds more than one
    of the operand multiplexers, half a multiplier and the accumulator adder: register
    the weight and the selected stream of the data's bank, take the product through a
    three-step pipelined multiplier (``codnn.hw.common.multiplier``: on ECP5 a MULT18X18D with
    its registers, or a pipelined tree in LUTs once the blocks run out), add it to the
    partial sum. ``bitserial`` (the paper's cell): the data go up the columns one bit per
    cycle, LSB first (a beat takes ``data_bits`` cycles), and the rows' sums of products
    go right one bit per cycle, LSB first, as ``word_bits``-bit words (the width the sum
    of ``cols`` products needs, at most ``acc_bits``) on ``lanes`` bit lanes, a beat's
    word on each lane in turn; a cell holds a serial-parallel MAC and a tail register
    per lane instead of a multiplier, a wide adder and a wide partial-sum register. At
    the right edge the rows are deskewed a bit at a time, and each row's word, once
    whole, is added to the row's partial sum (which waits for it in a memory). The
    output stage takes two steps (coarse shift and range tests, then fine shift and
    clamp).

    Latency: ``rows + cols + 3 + edge_latency + product_steps`` cycles from a data beat's
    acceptance to its result being valid on ``result`` (``pipeline_depth`` through the
    skew registers and cells, 2 through the FIFO), plus 2 with an output stage;
    ``product_steps`` is 3 (parallel) or ``word_bits + 2`` (bitserial: the word leaves
    the last column over ``word_bits`` cycles, then a step to the whole word and one to
    the sum), ``edge_latency`` 0 or 1 (bitserial: the beat is registered before it loads
    the shift registers), ``beat_cycles`` 1 or ``data_bits``
    (``codnn.golden.systolic.mac_timing``).
    Throughput: one data beat (one input vector) per ``beat_cycles`` cycles while the
    result stream is not backpressured. Loading a tile's weights takes ``rows`` cycles and
    overlaps the previous tile.

    Parameters
    ----------
    rows, cols : int
        Array size.
    alpha : int
        Data streams per array column (original columns per group).
    weight_bits : int
        Two's complement weight width (>= 2).
    data_bits : int
        Data width.
    data_signed : bool
        Data are two's complement (else unsigned).
    acc_bits : int
        Accumulator width (>= 2).
    mac : str
        MAC kind: ``"parallel"`` or ``"bitserial"``.
    out_bits : int or None
        Width of the output stage's result, or None for no output stage.
    requant : str
        The output stage's requantization: ``"shift"``, or ``"multiplier"`` (a
        ``multiplier`` input beside ``shift``; see ``WeightStationaryArray``).

    Attributes
    ----------
    weights : In(stream.Signature(ArrayLayout(StructLayout({"w": signed(weight_bits),
              "sel": unsigned(sel_bits)}), cols)))
        One array row per beat: each cell's weight and stream select.
    data : In(stream.Signature(StructLayout({"x": ArrayLayout(ArrayLayout(data, alpha), cols),
           "psum": ArrayLayout(signed(acc_bits), rows), "last": 1})))
        One input vector per beat: the ``alpha`` streams of every column, the partial sum
        of every row, and whether this beat ends the tile.
    result : Out(stream.Signature(StructLayout({"acc": ArrayLayout(signed(acc_bits), rows),
             ["y": ArrayLayout(unsigned(out_bits), rows),] "last": 1})))
    shift : In(range(acc_bits)), only with ``out_bits`` (``range(acc_bits + 16)`` with
        the multiplier)
        Output stage shift, registered row by row (see ``WeightStationaryArray``).
    multiplier : In(16), only with ``out_bits`` and ``requant="multiplier"``
        Output stage multiplier, registered row by row as ``shift`` is.

    Raises
    ------
    TypeError
        If a size or width is not a positive integer, or ``data_signed`` is not a bool.
    ValueError
        If ``mac`` or ``requant`` is unknown, a width is too small, or ``out_bits`` exceeds
        ``acc_bits``.
    """

    def __init__(self, *, rows, cols, alpha=1, weight_bits=8, data_bits=8, data_signed=False,
                 acc_bits=32, mac="parallel", out_bits=None, requant="shift"):
        positive_int(rows, "Row count")
        positive_int(cols, "Column count")
        positive_int(alpha, "Alpha")
        positive_int(weight_bits, "Weight width")
        positive_int(data_bits, "Data width")
        positive_int(acc_bits, "Accumulator width")
        if weight_bits < 2:
            raise ValueError(f"Weight width must be at least 2 bits (two's complement), "
                             f"not {weight_bits}")
        if acc_bits < 2:
            raise ValueError(f"Accumulator width must be at least 2 bits, not {acc_bits}")
        if not isinstance(data_signed, bool):
            raise TypeError(f"Data signedness must be a bool, not {data_signed!r}")
        if mac not in MAC_KINDS:
            raise ValueError(f"MAC kind must be one of {', '.join(MAC_KINDS)}, not {mac!r}")
        self._alpha = alpha
        self._weight_bits, self._data_bits, self._data_signed = weight_bits, data_bits, data_signed
        self._mac = mac
        self._sel_bits = select_bits(alpha)
        data_shape = signed(data_bits) if data_signed else unsigned(data_bits)
        serial = {"weight_bits": weight_bits, "data_bits": data_bits, "cols": cols,
                  "acc_bits": acc_bits}
        self._word_bits, self._lanes = serial_word_bits(**serial), serial_lanes(**serial)
        super().__init__(
            rows=rows, cols=cols, acc_bits=acc_bits, out_bits=out_bits,
            cell_weight=data.StructLayout({"w": signed(weight_bits),
                                           "sel": unsigned(self._sel_bits)}),
            column_data=data.ArrayLayout(data_shape, alpha),
            rows_aligned=mac == "bitserial", requant=requant, **mac_timing(mac, **serial))

    alpha = property(lambda self: self._alpha, doc="Data streams per array column.")
    weight_bits = property(lambda self: self._weight_bits, doc="Weight width.")
    data_bits = property(lambda self: self._data_bits, doc="Data width.")
    data_signed = property(lambda self: self._data_signed, doc="Whether data are signed.")
    mac = property(lambda self: self._mac, doc="MAC kind.")
    sel_bits = property(lambda self: self._sel_bits, doc="Width of a stream select.")
    word_bits = property(lambda self: self._word_bits,
                         doc="Bits of a bit-serial row sum (``serial_word_bits``).")
    lanes = property(lambda self: self._lanes,
                     doc="Row-sum lanes of a bit-serial row (``serial_lanes``).")

    def _cells(self, m, row_psum, weight, use_bank, data_go, phase, at_end, platform):
        if self.mac == "parallel":
            self._parallel_cells(m, row_psum, weight, use_bank, MultiplierPlan(platform))
        else:
            self._bitserial_cells(m, row_psum, weight, use_bank, data_go)

    def _parallel_cells(self, m, row_psum, weight, use_bank, plan):
        """Cells with a multiplier (in ``plan``'s forms): a data beat goes in whole, one
        per cycle."""
        R, W = self.rows, self.cols
        # Input register, then skew: column g's data wait g cycles.
        x_in = stage(m, self.data.payload.x, "x_in")
        for g in range(W):
            x = delay(m, x_in[g], g, f"x_c{g}")
            # The bank of the data reaching a cell, one cycle ahead: a cell registers its
            # stream select from it, so no path holds both the bank and the stream muxes.
            early = delay(m, use_bank, g, f"bank_c{g}")
            # Data move up (row R-1 is the bottom), partial sums move right.
            for r in reversed(range(R)):
                # The column's own copy of the bank starts at its bottom cell.
                own = column_stage if r == R - 1 else stage
                bank = own(m, early, f"bank_r{r}_c{g}")
                w_op = stage(m, weight(r, g, bank).w, f"wop_r{r}_c{g}")
                # The select, one-hot: the stream multiplexer is an AND-OR, two LUT levels.
                sel = stage(m, Cat(weight(r, g, early).sel == a for a in range(self.alpha)),
                            f"sel_r{r}_c{g}")
                selected = 0
                for a in range(self.alpha):
                    selected = selected | (x[a].as_unsigned() & sel[a].replicate(len(x[a])))
                x_op = stage(m, selected[:len(x[0])], f"xop_r{r}_c{g}")
                if self.data_signed:
                    x_op = x_op.as_signed()
                else:
                    x_op = Cat(x_op, C(0, 1)).as_signed()
                product = pipelined_product(m, plan, w_op, x_op, f"prod_r{r}_c{g}")
                row_psum[r] = stage(m, (row_psum[r] + product)[:self.acc_bits].as_signed(),
                                     f"acc_r{r}_c{g}")
                if r > 0:
                    x, early = stage(m, x, f"x_r{r}_c{g}"), bank

    def _bitserial_cells(self, m, row_psum, weight, use_bank, data_go):
        """Bit-serial cells with bit-serial row sums: the data go up the columns LSB first,
        a bit per cycle, and each row's sum of products goes right LSB first, a bit per
        cycle, as ``word_bits``-bit words, a beat's word on each of ``lanes`` lanes in turn
        (a beat starts every ``data_bits`` cycles, a word takes ``word_bits``).

        A cell registers its weight times the selected stream's bit (the sign bit of
        signed data subtracts), ``term``. Its MAC register adds the term and the bit of
        the beat's lane coming from the left, sends the low bit on to the right and
        keeps the rest, halved; after the beat's last bit the rest moves to the lane's
        tail register, which shifts it out LSB first through a full adder with the
        lane's later bits, while the MAC register starts the next beat from 0. At the
        right edge each row's lanes wait a bit a row (the deskew), shift into words, and
        a finished word is added to the row's partial sum (the shell aligns the rows'
        partial sums).

        Latency: ``rows + cols + word_bits + 4`` cycles from a beat's acceptance to its
        rows' sums with their partial sums (``pipeline_depth``); the first bit of row r's
        word leaves the last column ``rows + cols + 2 - r`` cycles after the acceptance.
        Throughput: a beat every ``data_bits`` cycles.
        """
        edge = self._bitserial_edge(m, use_bank, data_go)
        row_out = [None] * self.rows           # each row's lanes after the last column
        for g in range(self.cols):
            self._bitserial_column(m, g, edge, weight, row_out)
        self._bitserial_right_edge(m, edge.accepted, row_out, row_psum)

    def _bitserial_edge(self, m, use_bank, data_go):
        """The left edge: the input register, then one shift register per stream, loaded
        with a beat a cycle after its acceptance and emptied LSB first. The shift
        registers load on a flip-flop, not on the input handshake (at 16 columns and alpha
        8 that net reaches 1024 of them). ``live`` marks the beat's bits, ``lane_in`` its
        word's lane."""
        D, L = self.data_bits, self.lanes
        x_in = stage(m, self.data.payload.x, "x_in")
        # With a reset: a beat taken in a reset's cycle is void.
        accepted = stage(m, data_go, "accepted", reset_less=False)
        bank_q = stage(m, use_bank, "bank_q")
        lane_range = range(max(L, 2))
        beat_lane = Signal(lane_range, name="beat_lane")
        with m.If(data_go):
            m.d.sync += beat_lane.eq(Mux(beat_lane == L - 1, 0, beat_lane + 1))
        lane_q = stage(m, beat_lane, "lane_q")
        shifters = [[Signal(D, name=f"xs_c{g}_s{a}", reset_less=True)
                     for a in range(self.alpha)] for g in range(self.cols)]
        live = Signal(D, name="live")
        bank_in = Signal(name="bank_in", reset_less=True)
        lane_in = Signal(lane_range, name="lane_in", reset_less=True)
        with m.If(accepted):
            m.d.sync += [bank_in.eq(bank_q), lane_in.eq(lane_q), live.eq((1 << D) - 1)]
            for g in range(self.cols):
                for a in range(self.alpha):
                    m.d.sync += shifters[g][a].eq(x_in[g][a])
        with m.Else():
            m.d.sync += live.eq(live >> 1)
            for g in range(self.cols):
                for a in range(self.alpha):
                    m.d.sync += shifters[g][a].eq(shifters[g][a] >> 1)
        last_in = live[0] & ~live[1] if D > 1 else live[0]
        return _SerialEdge(accepted, shifters, live, bank_in, lane_in, last_in)

    def _bitserial_column(self, m, g, edge, weight, row_out):
        """Column ``g``'s cells, bottom row first: each registers its weight times the
        selected stream's bit (``term``), adds it and the bit of the beat's lane from the
        left in its MAC register, and shifts a finished beat's rest out of the lane's tail
        register; ``row_out[r]`` becomes the cell's lanes to the right."""
        L, wb = self.lanes, self.weight_bits
        bits = delay(m, Cat(edge.shifters[g][a][0] for a in range(self.alpha)), g, f"x_c{g}")
        bank = delay(m, edge.bank_in, g, f"bank_c{g}")
        lane = delay(m, edge.lane_in, g, f"lane_c{g}")
        beat = delay(m, edge.live[0], g, f"live_c{g}")
        last = delay(m, edge.last_in, g, f"last_c{g}")
        for r in reversed(range(self.rows)):
            cell = weight(r, g, bank)
            bit = bits.bit_select(cell.sel, 1)
            neg = last if self.data_signed else C(0)
            term = stage(m, Mux(bit, Mux(neg, -cell.w, cell.w), 0), f"term_r{r}_c{g}")
            # The flags one row up are the cell's own, a cycle on, as its term is.
            # The column's own copies start at its bottom cell.
            own = column_stage if r == self.rows - 1 else stage
            bank_up = own(m, bank, f"bank_r{r}_c{g}")
            lane, beat, last = (own(m, lane, f"lane_r{r}_c{g}"),
                                own(m, beat, f"live_r{r}_c{g}"),
                                own(m, last, f"last_r{r}_c{g}"))
            left = C(0, L) if g == 0 else row_out[r]
            mine = Cat(beat & (lane == k) for k in range(L))
            mac = Signal(signed(wb + 1), name=f"mac_r{r}_c{g}", reset_less=True)
            total = mac + term + (left & mine).any()
            m.d.sync += mac.eq(Mux(last | ~beat, 0, total >> 1))
            out = Signal(L, name=f"sum_r{r}_c{g}", reset_less=True)
            for k in range(L):
                # The rest shifts out LSB first (sign-extended) through a full adder
                # with the lane's bits: no adder as wide as the rest.
                tail = Signal(signed(wb + 1), name=f"tail_r{r}_c{g}_l{k}",
                              reset_less=True)
                carry = Signal(name=f"carry_r{r}_c{g}_l{k}", reset_less=True)
                handoff = mine[k] & last
                m.d.sync += [
                    tail.eq(Mux(handoff, total >> 1, tail >> 1)),
                    carry.eq(~handoff & ((tail[0] & left[k]) |
                                         (carry & (tail[0] | left[k])))),
                    out[k].eq(Mux(mine[k], total[0], tail[0] ^ left[k] ^ carry))]
            row_out[r] = out
            if r > 0:
                bits, bank = stage(m, bits, f"x_r{r}_c{g}"), bank_up

    def _bitserial_right_edge(self, m, accepted, row_out, row_psum):
        """Right edge: row r's lanes wait r cycles, so all rows' words leave together,
        and shift into a word per lane; a word is whole in its shift register
        ``word_bits`` cycles after its first bit leaves the deskew. Each group of rows (a
        row each above four rows) has its own copy of that moment and of the lane it is
        for. That moment is counted from the acceptance through registers with a reset,
        so a reset forgets the beats in flight (their words would advance the lane
        counters past the lanes of the beats after it). The first holds the complement,
        so that the chain and its copies stay apart from the valid pipe's (equal
        registers, which yosys would merge)."""
        L = self.lanes
        groups = row_groups(self.rows)
        no_beat = stage(m, ~accepted, "word_done_n", init=1, reset_less=False)
        dones = group_copies(m, delay_line(m, ~no_beat, self.cols + self.rows + self.word_bits,
                                           "word_done", reset_less=False),
                             len(groups), "word_done")
        for k, (rows, done) in enumerate(zip(groups, dones)):
            done_lane = Signal(range(max(L, 2)), name=f"done_lane_{k}")
            with m.If(done):
                m.d.sync += done_lane.eq(Mux(done_lane == L - 1, 0, done_lane + 1))
            for r in rows:
                row_psum[r] = self._row_sum(m, row_out[r], row_psum[r], done, done_lane, r)

    def _row_sum(self, m, lanes, psum, done, done_lane, r):
        """Row r's sum of products added to its partial sum: its ``lanes`` deskewed, shifted
        into a word per lane, the word of ``done_lane`` taken when ``done``."""
        S, L = self.word_bits, self.lanes
        lanes = delay(m, lanes, r, f"sum_deskew_r{r}")
        words = [Signal(S, name=f"word_r{r}_l{k}", reset_less=True) for k in range(L)]
        for k in range(L):
            m.d.sync += words[k].eq(Cat(words[k][1:], lanes[k]))
        word = Signal(signed(S), name=f"word_r{r}", reset_less=True)
        with m.If(done):
            m.d.sync += word.eq(Array(words)[done_lane])
        return stage(m, (psum + word)[:self.acc_bits].as_signed(), f"acc_r{r}")
