"""Weight-stationary column-combined systolic array with double-buffered weights."""

from amaranth.hdl import C, Cat, Mux, Signal, signed, unsigned
from amaranth.lib import data

from codnn.golden.systolic import MAC_KINDS, select_bits
from codnn.hw.common.multiplier import PRODUCT_STEPS, MultiplierPlan, pipelined_product
from codnn.hw.common.params import positive_int
from codnn.hw.common.ws_array import WeightStationaryArray, column_stage, delay, stage

__all__ = ["ColumnCombinedArray"]



class ColumnCombinedArray(WeightStationaryArray):
    """A ``rows x cols`` column-combined systolic array (``alpha = 1``: the dense array).

    Cell (r, g) holds, in each of two weight banks, a signed weight and a stream select.
    Array column g receives ``alpha`` data streams (the channels of group g); the data move
    up the column one cell per cycle, each cell multiplying its weight by stream
    ``select``; partial sums enter row r at the left (``psum``), move right one cell per
    cycle and leave at the right edge. Skew and deskew registers at the edges let whole
    vectors go in and come out per beat.

    The shell (``hw.common.ws_array.WeightStationaryArray``) double-buffers the weights
    (a ``weights`` beat is one array row, so the next tile loads while the current one
    computes), accepts data beats on credits so that the cells never stall, and puts
    results through a block-RAM output FIFO.

    Arithmetic: ``acc = wrap(psum + sum_g w[r,g] * x[g][sel[r,g]], acc_bits)`` (two's
    complement). With ``out_bits``, results also carry ``y = clamp(acc >> shift, 0,
    2**out_bits - 1)`` (arithmetic shift), ``shift`` being a run-time input.

    MAC kinds. ``parallel``: each cell is pipelined so that no path holds more than one
    of the operand multiplexers, half a multiplier and the accumulator adder: register
    the weight and the selected stream of the data's bank, take the product through a
    three-step pipelined multiplier (``hw.common.multiplier``: on ECP5 a MULT18X18D with
    its registers, or a pipelined tree in LUTs once the blocks run out), add it to the
    partial sum. ``bitserial``: the data go up the
    columns one bit per cycle, LSB first (a beat takes ``data_bits`` cycles); a cell
    builds its product with a shift-add register (no multiplier) over ``data_bits``
    cycles and adds it to the partial sum, which stays bit-parallel. Partial sums enter
    late enough to meet the products; data move one cell per cycle. The output stage
    takes two steps (coarse shift and range tests, then fine shift and clamp).

    Latency: ``rows + cols + 3 + edge_latency + product_steps`` cycles from a data beat's
    acceptance to its result being valid on ``result`` (``pipeline_depth`` through the
    skew registers and cells, 2 through the FIFO), plus 2 with an output stage;
    ``product_steps`` is 3 (parallel) or ``data_bits`` (bitserial), ``edge_latency`` 0 or 1
    (bitserial: the beat is registered before it loads the shift registers),
    ``beat_cycles`` 1 or ``data_bits``.
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
    shift : In(range(acc_bits)), only with ``out_bits``
        Output stage shift, registered row by row (see ``WeightStationaryArray``).

    Raises
    ------
    TypeError
        If a size or width is not a positive integer, or ``data_signed`` is not a bool.
    ValueError
        If ``mac`` is unknown, a width is too small, or ``out_bits`` exceeds ``acc_bits``.
    """

    def __init__(self, *, rows, cols, alpha=1, weight_bits=8, data_bits=8, data_signed=False,
                 acc_bits=32, mac="parallel", out_bits=None):
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
        super().__init__(
            rows=rows, cols=cols, acc_bits=acc_bits, out_bits=out_bits,
            cell_weight=data.StructLayout({"w": signed(weight_bits),
                                           "sel": unsigned(self._sel_bits)}),
            column_data=data.ArrayLayout(data_shape, alpha),
            beat_cycles=1 if mac == "parallel" else data_bits,
            edge_latency=0 if mac == "parallel" else 1,
            product_steps=PRODUCT_STEPS if mac == "parallel" else data_bits)

    alpha = property(lambda self: self._alpha, doc="Data streams per array column.")
    weight_bits = property(lambda self: self._weight_bits, doc="Weight width.")
    data_bits = property(lambda self: self._data_bits, doc="Data width.")
    data_signed = property(lambda self: self._data_signed, doc="Whether data are signed.")
    mac = property(lambda self: self._mac, doc="MAC kind.")
    sel_bits = property(lambda self: self._sel_bits, doc="Width of a stream select.")

    def _cells(self, m, row_psum, weight, use_bank, data_go, phase, at_end, platform):
        if self.mac == "parallel":
            self._parallel_cells(m, row_psum, weight, use_bank, MultiplierPlan(platform))
        else:
            self._bitserial_cells(m, row_psum, weight, use_bank, data_go, phase)

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

    def _bitserial_cells(self, m, row_psum, weight, use_bank, data_go, phase):
        """Cells with a shift-add MAC: the data go in serially, LSB first, a bit per cycle.

        A cell registers its weight and the selected stream's bit, then adds the weight
        (bit 1) or nothing into a product register that shifts right each cycle, so the
        product is complete (``data_bits`` cycles after the first bit) without a
        multiplier; for signed data the last (sign) bit subtracts. The complete product
        is added to the partial sum passing by in that cycle.
        """
        R, W, D = self.rows, self.cols, self.data_bits
        # Edge: the input register, then one shift register per stream, loaded with a
        # beat a cycle after its acceptance and emptied LSB first. The shift registers
        # load on a flip-flop, not on the input handshake (at 16 columns and alpha 8
        # that net reaches 1024 of them); the first and sign flags follow a cycle later.
        x_in = stage(m, self.data.payload.x, "x_in")
        accepted = stage(m, data_go, "accepted")
        bank_q = stage(m, use_bank, "bank_q")
        shifters = [[Signal(D, name=f"xs_c{g}_s{a}", reset_less=True)
                     for a in range(self.alpha)] for g in range(W)]
        bank_in = Signal(name="bank_in", reset_less=True)
        with m.If(accepted):
            m.d.sync += bank_in.eq(bank_q)
            for g in range(W):
                for a in range(self.alpha):
                    m.d.sync += shifters[g][a].eq(x_in[g][a])
        with m.Else():
            for g in range(W):
                for a in range(self.alpha):
                    m.d.sync += shifters[g][a].eq(shifters[g][a] >> 1)
        first_in = stage(m, phase == 0, "first_in")
        sign_in = stage(m, phase == D - 1, "sign_in")
        for g in range(W):
            bits = delay(m, Cat(shifters[g][a][0] for a in range(self.alpha)), g, f"x_c{g}")
            bank = delay(m, bank_in, g, f"bank_c{g}")
            first = delay(m, first_in, g, f"first_c{g}")
            sign = delay(m, sign_in, g, f"sign_c{g}") if self.data_signed else C(0)
            for r in reversed(range(R)):
                cell = weight(r, g, bank)
                w_op, sel = stage(m, cell.w, f"wop_r{r}_c{g}"), cell.sel
                bit_op = stage(m, bits.bit_select(sel, 1), f"xop_r{r}_c{g}")
                first_op = stage(m, first, f"first_r{r}_c{g}")
                sign_op = stage(m, sign, f"sign_r{r}_c{g}") if self.data_signed else C(0)
                # product = product / 2 + term * 2**(D-1); the low D-1 bits only shift.
                product = Signal(signed(self.weight_bits + D + 1), name=f"prod_r{r}_c{g}",
                                 reset_less=True)
                half = Mux(first_op, 0, product >> 1)
                term = Mux(bit_op, Mux(sign_op, -w_op, w_op), 0)
                m.d.sync += product.eq(Cat(half[:D - 1], (half >> (D - 1)) + term))
                row_psum[r] = stage(m, (row_psum[r] + product)[:self.acc_bits].as_signed(),
                                     f"acc_r{r}_c{g}")
                if r > 0:
                    # The column's own copies of bank and flags start here.
                    own = column_stage if r == R - 1 else stage
                    bits, bank, first = (stage(m, bits, f"x_r{r}_c{g}"),
                                         own(m, bank, f"bank_r{r}_c{g}"),
                                         own(m, first, f"first_r{r}_c{g}_up"))
                    if self.data_signed:
                        sign = own(m, sign, f"sign_r{r}_c{g}_up")
