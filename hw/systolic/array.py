"""Weight-stationary column-combined systolic array with double-buffered weights."""

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["ColumnCombinedArray"]

MAC_KINDS = ("parallel", "bitserial")

_EMPTY, _FULL, _BUSY = 0, 1, 2


def _stage(m, value, name):
    """A register on ``value`` (no reset: its validity travels in the array's valid pipe)."""
    reg = Signal(value.shape(), name=name, reset_less=True)
    m.d.sync += reg.eq(value)
    return reg


def _delay(m, value, cycles, name):
    """``value`` delayed by ``cycles`` registers."""
    for k in range(cycles):
        value = _stage(m, value, f"{name}_d{k}")
    return value


def _positive_int(value, what):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise TypeError(f"{what} must be a positive integer, not {value!r}")


class ColumnCombinedArray(wiring.Component):
    """A ``rows x cols`` column-combined systolic array (``alpha = 1``: the dense array).

    Cell (r, g) holds, in each of two weight banks, a signed weight and a stream select.
    Array column g receives ``alpha`` data streams (the channels of group g); the data move
    up the column one cell per cycle, each cell multiplying its weight by stream
    ``select``; partial sums enter row r at the left (``psum``), move right one cell per
    cycle and leave at the right edge. Skew and deskew registers at the edges let whole
    vectors go in and come out per beat.

    Weights are double-buffered: a ``weights`` beat writes one array row (row 0 first) of
    the bank not in use, so the next tile loads while the current one computes. Data beats
    of a tile are accepted once its bank is loaded; the beat flagged ``last`` ends the tile
    and the next beats use the other bank. A bank is free to load again when its tile's
    last result has left the cells. Each data beat carries its bank with it through the
    array, so tiles follow one another without draining.

    The array itself never stalls (no clock enable on its thousands of registers): results
    go into a block-RAM output FIFO of ``pipeline_depth + 3`` entries (2 cycles from write
    to read), and a data beat is accepted only while the beats in flight and in the FIFO
    leave room for it (credits), so output backpressure throttles the input instead.

    Arithmetic: ``acc = wrap(psum + sum_g w[r,g] * x[g][sel[r,g]], acc_bits)`` (two's
    complement). With ``out_bits``, results also carry ``y = clamp(acc >> shift, 0,
    2**out_bits - 1)`` (arithmetic shift), ``shift`` being a run-time input.

    MAC kinds. ``parallel``: each cell is pipelined in three steps, so that no path holds
    more than one of the operand multiplexers, the multiplier and the accumulator adder:
    (1) register the weight and the selected stream of the data's bank, (2) register
    their product, (3) add it to the partial sum. ``bitserial``: the data go up the
    columns one bit per cycle, LSB first (a beat takes ``data_bits`` cycles); a cell
    builds its product with a shift-add register (no multiplier) over ``data_bits``
    cycles and adds it to the partial sum, which stays bit-parallel. Partial sums enter
    late enough to meet the products; data move one cell per cycle. The output stage
    takes two steps (shift, then clamp).

    Latency: ``rows + cols + 3 + beat_cycles`` cycles from a data beat's acceptance to its
    result being valid on ``result`` (``pipeline_depth`` through the skew registers and
    cells, 2 through the FIFO), plus 2 with an output stage; ``beat_cycles`` is 1
    (parallel) or ``data_bits`` (bitserial). Throughput: one data beat (one input vector)
    per ``beat_cycles`` cycles while the result stream is not backpressured. Loading a
    tile's weights takes ``rows`` cycles and overlaps the previous tile.

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
    weights : In(stream.Signature(StructLayout({"w": ArrayLayout(signed(weight_bits), cols),
              "sel": ArrayLayout(unsigned(sel_bits), cols)})))
        One array row per beat.
    data : In(stream.Signature(StructLayout({"x": ArrayLayout(ArrayLayout(data, alpha), cols),
           "psum": ArrayLayout(signed(acc_bits), rows), "last": 1})))
        One input vector per beat: the ``alpha`` streams of every column, the partial sum
        of every row, and whether this beat ends the tile.
    result : Out(stream.Signature(StructLayout({"acc": ArrayLayout(signed(acc_bits), rows),
             ["y": ArrayLayout(unsigned(out_bits), rows),] "last": 1})))
    shift : In(range(acc_bits)), only with ``out_bits``
        Output stage shift.

    Raises
    ------
    TypeError
        If a size or width is not a positive integer, or ``data_signed`` is not a bool.
    ValueError
        If ``mac`` is unknown, a width is too small, or ``out_bits`` exceeds ``acc_bits``.
    """

    def __init__(self, *, rows, cols, alpha=1, weight_bits=8, data_bits=8, data_signed=False,
                 acc_bits=32, mac="parallel", out_bits=None):
        _positive_int(rows, "Row count")
        _positive_int(cols, "Column count")
        _positive_int(alpha, "Alpha")
        _positive_int(weight_bits, "Weight width")
        _positive_int(data_bits, "Data width")
        _positive_int(acc_bits, "Accumulator width")
        if weight_bits < 2:
            raise ValueError(f"Weight width must be at least 2 bits (two's complement), "
                             f"not {weight_bits}")
        if acc_bits < 2:
            raise ValueError(f"Accumulator width must be at least 2 bits, not {acc_bits}")
        if not isinstance(data_signed, bool):
            raise TypeError(f"Data signedness must be a bool, not {data_signed!r}")
        if mac not in MAC_KINDS:
            raise ValueError(f"MAC kind must be one of {', '.join(MAC_KINDS)}, not {mac!r}")
        if out_bits is not None:
            _positive_int(out_bits, "Output width")
            if out_bits > acc_bits:
                raise ValueError(f"Output width ({out_bits}) must not exceed the accumulator "
                                 f"width ({acc_bits})")
        self._rows, self._cols, self._alpha = rows, cols, alpha
        self._weight_bits, self._data_bits, self._data_signed = weight_bits, data_bits, data_signed
        self._acc_bits, self._mac, self._out_bits = acc_bits, mac, out_bits
        self._sel_bits = max(1, ceil_log2(alpha))

        data_shape = signed(data_bits) if data_signed else unsigned(data_bits)
        result_fields = {"acc": data.ArrayLayout(signed(acc_bits), rows)}
        if out_bits is not None:
            result_fields["y"] = data.ArrayLayout(unsigned(out_bits), rows)
        result_fields["last"] = 1
        members = {
            "weights": In(stream.Signature(data.StructLayout({
                "w": data.ArrayLayout(signed(weight_bits), cols),
                "sel": data.ArrayLayout(unsigned(self._sel_bits), cols)}))),
            "data": In(stream.Signature(data.StructLayout({
                "x": data.ArrayLayout(data.ArrayLayout(data_shape, alpha), cols),
                "psum": data.ArrayLayout(signed(acc_bits), rows),
                "last": 1}))),
            "result": Out(stream.Signature(data.StructLayout(result_fields))),
        }
        if out_bits is not None:
            members["shift"] = In(range(acc_bits))
        super().__init__(members)

    rows = property(lambda self: self._rows, doc="Array rows.")
    cols = property(lambda self: self._cols, doc="Array columns.")
    alpha = property(lambda self: self._alpha, doc="Data streams per array column.")
    weight_bits = property(lambda self: self._weight_bits, doc="Weight width.")
    data_bits = property(lambda self: self._data_bits, doc="Data width.")
    data_signed = property(lambda self: self._data_signed, doc="Whether data are signed.")
    acc_bits = property(lambda self: self._acc_bits, doc="Accumulator width.")
    mac = property(lambda self: self._mac, doc="MAC kind.")
    out_bits = property(lambda self: self._out_bits, doc="Output stage width or None.")
    sel_bits = property(lambda self: self._sel_bits, doc="Width of a stream select.")

    @property
    def beat_cycles(self):
        """Cycles per data beat in steady state: 1 (parallel) or ``data_bits`` (bitserial)."""
        return 1 if self.mac == "parallel" else self.data_bits

    @property
    def pipeline_depth(self):
        """Register stages from an accepted data beat to the output FIFO."""
        return (self.rows + self.cols + 1 + self.beat_cycles
                + (2 if self.out_bits is not None else 0))

    @property
    def fifo_depth(self):
        """Entries of the output FIFO: enough that an always-ready output never throttles."""
        return self.pipeline_depth + 3

    @property
    def latency(self):
        """Cycles from a data beat's acceptance to its result being valid on ``result``."""
        return self.pipeline_depth + 2

    def elaborate(self, platform):
        m = Module()
        R, W = self.rows, self.cols
        L = self.pipeline_depth

        # Buffered: synchronous reads, so the FIFO maps to block RAM.
        m.submodules.fifo = out_fifo = fifo.SyncFIFOBuffered(
            width=len(Value.cast(self.result.payload)), depth=self.fifo_depth)
        # Credits: beats in the cells or the FIFO; accept only while one more fits.
        occupancy = Signal(range(self.fifo_depth + 1))
        room = Signal()
        m.d.comb += room.eq(occupancy < self.fifo_depth)

        # Control: two weight banks, each EMPTY -> FULL (loaded) -> BUSY (in use) -> EMPTY.
        bank_state = Array(Signal(2, name=f"bank{b}_state") for b in range(2))
        load_bank = Signal(name="load_bank")
        use_bank = Signal(name="use_bank")
        load_row = Signal(range(R))
        # A serial MAC takes a beat per data_bits cycles: accept one once the previous
        # beat's last bit is going in.
        bit_index = Signal(range(self.beat_cycles), init=self.beat_cycles - 1)
        m.d.comb += [
            self.weights.ready.eq(bank_state[load_bank] == _EMPTY),
            self.data.ready.eq(room & (bank_state[use_bank] == _FULL)
                               & (bit_index == self.beat_cycles - 1)),
        ]
        weights_go = self.weights.valid & self.weights.ready
        data_go = self.data.valid & self.data.ready
        result_go = self.result.valid & self.result.ready
        with m.If(data_go):
            m.d.sync += bit_index.eq(0)
        with m.Elif(bit_index != self.beat_cycles - 1):
            m.d.sync += bit_index.eq(bit_index + 1)
        with m.If(data_go & ~result_go):
            m.d.sync += occupancy.eq(occupancy + 1)
        with m.Elif(result_go & ~data_go):
            m.d.sync += occupancy.eq(occupancy - 1)

        # Valid pipeline: (valid, bank, last) of each beat in flight.
        pipe_valid = [Signal(name=f"pipe{k}_valid") for k in range(L)]
        pipe_bank = [Signal(name=f"pipe{k}_bank") for k in range(L)]
        pipe_last = [Signal(name=f"pipe{k}_last") for k in range(L)]
        m.d.sync += [pipe_valid[0].eq(data_go), pipe_bank[0].eq(use_bank),
                     pipe_last[0].eq(self.data.payload.last)]
        for k in range(1, L):
            m.d.sync += [pipe_valid[k].eq(pipe_valid[k - 1]),
                         pipe_bank[k].eq(pipe_bank[k - 1]),
                         pipe_last[k].eq(pipe_last[k - 1])]
        tile_done = pipe_valid[-1] & pipe_last[-1]

        for b in range(2):
            with m.If(tile_done & (pipe_bank[-1] == b)):
                m.d.sync += bank_state[b].eq(_EMPTY)
            with m.Elif(data_go & self.data.payload.last & (use_bank == b)):
                m.d.sync += bank_state[b].eq(_BUSY)
            with m.Elif(weights_go & (load_row == R - 1) & (load_bank == b)):
                m.d.sync += bank_state[b].eq(_FULL)
        with m.If(data_go & self.data.payload.last):
            m.d.sync += use_bank.eq(~use_bank)
        with m.If(weights_go):
            with m.If(load_row == R - 1):
                m.d.sync += [load_row.eq(0), load_bank.eq(~load_bank)]
            with m.Else():
                m.d.sync += load_row.eq(load_row + 1)

        # Weight banks, written a row at a time.
        weight = [[[Signal(signed(self.weight_bits), name=f"w{b}_r{r}_c{g}")
                    for g in range(W)] for r in range(R)] for b in range(2)]
        select = [[[Signal(self.sel_bits, name=f"sel{b}_r{r}_c{g}")
                    for g in range(W)] for r in range(R)] for b in range(2)]
        for b in range(2):
            for r in range(R):
                with m.If(weights_go & (load_bank == b) & (load_row == r)):
                    for g in range(W):
                        m.d.sync += [weight[b][r][g].eq(self.weights.payload.w[g]),
                                     select[b][r][g].eq(self.weights.payload.sel[g])]

        # Partial sums enter after the input register; row r's wait until its cells'
        # products are ready: R-1-r cycles of skew plus the cell's steps before its adder.
        psum_in = _stage(m, self.data.payload.psum, "psum_in")
        row_psum = [_delay(m, psum_in[r], R - r + self.beat_cycles, f"psum_r{r}")
                    for r in range(R)]
        if self.mac == "parallel":
            self._parallel_cells(m, row_psum, weight, select, use_bank)
        else:
            self._bitserial_cells(m, row_psum, weight, select, use_bank, data_go, bit_index)

        # Deskew: row r waits r cycles so a vector's results leave together.
        acc = [_delay(m, row_psum[r], r, f"deskew_r{r}") for r in range(R)]
        result = Signal(self.result.payload.shape())
        m.d.comb += result.last.eq(pipe_last[-1])
        if self.out_bits is None:
            for r in range(R):
                m.d.comb += result.acc[r].eq(acc[r])
        else:
            top = (1 << self.out_bits) - 1
            for r in range(R):
                shifted = _stage(m, acc[r] >> self.shift, f"shifted_r{r}")
                clamped = Signal(self.out_bits, name=f"y_r{r}")
                with m.If(shifted < 0):
                    m.d.comb += clamped.eq(0)
                with m.Elif(shifted > top):
                    m.d.comb += clamped.eq(top)
                with m.Else():
                    m.d.comb += clamped.eq(shifted)
                m.d.comb += [result.acc[r].eq(_delay(m, acc[r], 2, f"out_acc_r{r}")),
                             result.y[r].eq(_stage(m, clamped, f"out_y_r{r}"))]

        m.d.comb += [
            out_fifo.w_data.eq(result),
            out_fifo.w_en.eq(pipe_valid[-1]),
            Value.cast(self.result.payload).eq(out_fifo.r_data),
            self.result.valid.eq(out_fifo.r_rdy),
            out_fifo.r_en.eq(self.result.ready),
        ]
        return m

    def _parallel_cells(self, m, row_psum, weight, select, use_bank):
        """Cells with a multiplier: a data beat goes in whole, one per cycle."""
        R, W = self.rows, self.cols
        # Input register, then skew: column g's data wait g cycles.
        x_in = _stage(m, self.data.payload.x, "x_in")
        bank_in = _stage(m, use_bank, "bank_in")
        for g in range(W):
            x = _delay(m, x_in[g], g, f"x_c{g}")
            bank = _delay(m, bank_in, g, f"bank_c{g}")
            # Data move up (row R-1 is the bottom), partial sums move right.
            for r in reversed(range(R)):
                streams = Array(x[a] for a in range(self.alpha))
                w_op = _stage(m, Mux(bank, weight[1][r][g], weight[0][r][g]), f"wop_r{r}_c{g}")
                sel = Mux(bank, select[1][r][g], select[0][r][g])
                x_op = _stage(m, streams[sel], f"xop_r{r}_c{g}")
                product = _stage(m, w_op * x_op, f"prod_r{r}_c{g}")
                row_psum[r] = _stage(m, (row_psum[r] + product)[:self.acc_bits].as_signed(),
                                     f"acc_r{r}_c{g}")
                if r > 0:
                    x, bank = _stage(m, x, f"x_r{r}_c{g}"), _stage(m, bank, f"bank_r{r}_c{g}")

    def _bitserial_cells(self, m, row_psum, weight, select, use_bank, data_go, bit_index):
        """Cells with a shift-add MAC: the data go in serially, LSB first, a bit per cycle.

        A cell registers its weight and the selected stream's bit, then adds the weight
        (bit 1) or nothing into a product register that shifts right each cycle, so the
        product is complete (``data_bits`` cycles after the first bit) without a
        multiplier; for signed data the last (sign) bit subtracts. The complete product
        is added to the partial sum passing by in that cycle.
        """
        R, W, D = self.rows, self.cols, self.data_bits
        # Edge: one shift register per stream, loaded with a beat and emptied LSB first.
        shifters = [[Signal(D, name=f"xs_c{g}_s{a}", reset_less=True)
                     for a in range(self.alpha)] for g in range(W)]
        bank_in = Signal(name="bank_in", reset_less=True)
        with m.If(data_go):
            m.d.sync += bank_in.eq(use_bank)
            for g in range(W):
                for a in range(self.alpha):
                    m.d.sync += shifters[g][a].eq(self.data.payload.x[g][a])
        with m.Else():
            for g in range(W):
                for a in range(self.alpha):
                    m.d.sync += shifters[g][a].eq(shifters[g][a] >> 1)
        first_in, sign_in = bit_index == 0, bit_index == D - 1
        for g in range(W):
            bits = _delay(m, Cat(shifters[g][a][0] for a in range(self.alpha)), g, f"x_c{g}")
            bank = _delay(m, bank_in, g, f"bank_c{g}")
            first = _delay(m, first_in, g, f"first_c{g}")
            sign = _delay(m, sign_in, g, f"sign_c{g}") if self.data_signed else C(0)
            for r in reversed(range(R)):
                w_op = _stage(m, Mux(bank, weight[1][r][g], weight[0][r][g]), f"wop_r{r}_c{g}")
                sel = Mux(bank, select[1][r][g], select[0][r][g])
                bit_op = _stage(m, bits.bit_select(sel, 1), f"xop_r{r}_c{g}")
                first_op = _stage(m, first, f"first_r{r}_c{g}")
                sign_op = _stage(m, sign, f"sign_r{r}_c{g}") if self.data_signed else C(0)
                # product = product / 2 + term * 2**(D-1); the low D-1 bits only shift.
                product = Signal(signed(self.weight_bits + D + 1), name=f"prod_r{r}_c{g}",
                                 reset_less=True)
                half = Mux(first_op, 0, product >> 1)
                term = Mux(bit_op, Mux(sign_op, -w_op, w_op), 0)
                m.d.sync += product.eq(Cat(half[:D - 1], (half >> (D - 1)) + term))
                row_psum[r] = _stage(m, (row_psum[r] + product)[:self.acc_bits].as_signed(),
                                     f"acc_r{r}_c{g}")
                if r > 0:
                    bits, bank, first = (_stage(m, bits, f"x_r{r}_c{g}"),
                                         _stage(m, bank, f"bank_r{r}_c{g}"),
                                         _stage(m, first, f"first_r{r}_c{g}_up"))
                    if self.data_signed:
                        sign = _stage(m, sign, f"sign_r{r}_c{g}_up")
