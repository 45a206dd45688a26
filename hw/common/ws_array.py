"""The shell every weight-stationary array of codnn shares: double-buffered weights, data
beats accepted on credits, partial sums skewed in and deskewed out, an optional output
stage and an output FIFO per row. A subclass supplies its cells."""

from dataclasses import dataclass

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from codnn.golden.systolic import (MAX_CELLS, REQUANT_BITS, REQUANT_KINDS,
                                   REQUANT_PRODUCT_STEPS, output_stage_steps)
from codnn.hw.common.counters import counter
from codnn.hw.common.delays import delay, memory_delay, stage
from codnn.hw.common.multiplier import SPLIT_PRODUCT_STEPS, split_product
from codnn.hw.common.output_stage import output_stage, over_mask
from codnn.hw.common.params import positive_int

__all__ = ["MAX_CELLS", "BANK_EMPTY", "BANK_FULL", "BANK_BUSY", "WeightStationaryArray",
           "column_stage", "count_phase", "row_groups", "group_copies"]


#: A weight bank's states: EMPTY -> FULL (loaded) -> BUSY (its tile's last beat taken) -> EMPTY.
BANK_EMPTY, BANK_FULL, BANK_BUSY = 0, 1, 2
# Partial sums that wait at least this many cycles wait in block RAM, not in registers.
_MEMORY_DELAY = 16
# Arrays of up to this many rows keep one output FIFO and one copy of each control bit at
# the right edge; larger arrays have one per row (docs/timing-closure.md: one per row
# places larger arrays faster, and small iCE40 arrays no longer place).
_SHARED_ROWS = 4


def row_groups(rows):
    """The groups of rows that share an output FIFO and the copies of the right edge's
    control bits, as ranges: all rows in one group up to four rows, else a row each."""
    return [range(rows)] if rows <= _SHARED_ROWS else [range(r, r + 1) for r in range(rows)]


def group_copies(m, chain, count, name):
    """``count`` copies of the last register of ``chain`` (a 1-bit signal's delay line,
    a list of registers), for groups of rows that each take their own: copy k is the
    bit ``k + 1`` registers before the end, passed through ``k + 1`` registers of its
    own that hold its complement (1 after reset). No two copies, and no copy and the
    chain, have a register with the same input, which yosys would merge into one
    register that drives every group.

    Latency: the same as ``chain[-1]``. ``chain`` must be at least ``count + 1`` long.
    """
    copies = []
    for k in range(count):
        bit = ~chain[-2 - k]
        for d in range(k + 1):
            copy = Signal(init=1, name=f"{name}_{k}_n{d}")
            m.d.sync += copy.eq(bit)
            bit = copy
        copies.append(~bit)
    return copies


def column_stage(m, value, name):
    """``stage`` for the first register of a column's own copy of a signal that the
    columns share and delay each by its own count (a beat's bank, a phase flag, a
    weight beat's tag).

    Where such copies pass the same number of registers they are registers with equal
    inputs, and yosys merges those into one that drives cells across the array. A
    column's first register of its own starts at all ones (the shared delays at 0), so it
    stays apart, and so does all of the column's copy after it. The initial value does
    nothing: the copies shift every cycle and hold a beat's value by the time the beat
    reaches them (a weight tag's starts valid but names a row its copy never reaches).
    """
    shape = value.shape()
    if isinstance(shape, data.Layout):
        return data.View(shape, column_stage(m, Value.cast(value), name))
    return stage(m, value, name, init=-1 if shape.signed else (1 << shape.width) - 1)


def count_phase(m, phase, at_end, data_go, beat_cycles):
    """Count ``phase`` (``range(beat_cycles)``, initially ``beat_cycles - 1``), the cycles
    since the last accepted beat (``data_go``), saturating at ``beat_cycles - 1``, and keep
    ``at_end`` (initially 1) equal to ``phase == beat_cycles - 1`` as a register."""
    with m.If(data_go):
        m.d.sync += [phase.eq(0), at_end.eq(0)]
    with m.Elif(~at_end):
        m.d.sync += [phase.eq(phase + 1), at_end.eq(phase == beat_cycles - 2)]


@dataclass(slots=True)
class _Stages:
    """What the array's stages share, each field set by the stage named above it (and
    read by the weight-bank proof as ``formal_state``)."""

    # _handshakes: the banks' states, which loads and which computes, the beat phase and
    # the weight part, and the streams' handshakes.
    bank_state: Array = None
    load_bank: Signal = None
    use_bank: Signal = None
    load_row: Signal = None
    phase: Value = None
    at_end: Value = None
    part: Value = None
    part_idle: Value = None
    weights_go: Value = None
    data_go: Value = None
    # _valid_pipeline: (valid, bank, last) per cell stage; a tile's last beat out.
    pipe_valid: list = None
    pipe_bank: list = None
    pipe_last: list = None
    tile_done: Value = None
    # _weight_beat: the beat (or part) going in, its tag, the last part's bank and row.
    weights_q: Signal = None
    tag: Signal = None
    last_part: Value = None
    last_bank: Value = None
    last_row: Value = None
    # _bank_states: a bank whole (and which), each row's shift (and multiplier) per bank.
    loaded: Signal = None
    loaded_bank: Signal = None
    row_shift: list = None
    row_multiplier: list = None
    # _weight_banks: each cell's weight writes (where, bank) and the banks it reads.
    writes: list = None
    reads: list = None
    # _row_psums: each row's skew.
    skew: list = None


class WeightStationaryArray(wiring.Component):
    """A ``rows x cols`` weight-stationary array: partial sums enter row r at the left
    (``psum``), move right one cell per cycle and leave at the right edge.

    Weights are double-buffered: a ``weights`` beat writes one array row (row 0 first) of
    the bank not in use (the beats move right and up through registers, as the data do;
    all rows of column c are written ``c + 1`` cycles after the tile's last beat is
    accepted), so the next tile loads while the current one computes. Data beats
    of a tile are accepted once its bank is loaded; the beat flagged ``last`` ends the tile
    and the next beats use the other bank. A bank is free to load again when its tile's
    last result has left the cells. Each data beat carries its bank with it through the
    array, so tiles follow one another without draining.

    The array never stalls (no clock enable on its thousands of registers): results go
    into output FIFOs of ``pipeline_depth + 3`` entries, one per row (one for all rows up
    to four; 2 cycles from write to read), and a data beat is accepted only while the
    beats in flight and in the FIFOs leave room for it (credits), so output backpressure
    throttles the input instead. A beat is accepted at most every ``beat_cycles`` cycles
    (cells that take several cycles per beat).

    With ``out_bits``, results also carry ``y = clamp(acc >> shift, 0, 2**out_bits - 1)``
    (arithmetic shift, in two steps) with a shift per array row and tile: row r of a tile
    uses the value ``shift`` had when the tile's weight beat for row r was accepted (so
    each output channel can have its own, and it may change from one beat to the next;
    held steady, it is the layer's one shift). With ``requant="multiplier"`` as well,
    ``y = clamp((acc * multiplier) >> shift, ...)``, ``multiplier`` (16 bits, unsigned)
    taken with the row's weight beat as ``shift`` is and ``shift`` up to ``acc_bits +
    15``: the product of the accumulator's and the multiplier's 17-bit pieces, summed,
    ``REQUANT_PRODUCT_STEPS`` (2) steps before the output stage.

    Latency: ``pipeline_depth + 2`` cycles from a data beat's acceptance to its result on
    ``result``, ``pipeline_depth = rows + cols + 1 + edge_latency + product_steps`` (+2
    with an output stage, +4 with the multiplier): the input register, the subclass's
    edge, the skew of the columns and rows, an operand step and ``product_steps`` steps to
    a cell's product (``beat_cycles`` unless the subclass says otherwise).

    With ``weight_cycles`` > 1 a cell's weight is an array of that many parts, written
    one part a cycle: a ``weights`` beat is accepted at most every ``weight_cycles``
    cycles, only one part per column moves through the array, and each cell keeps both
    banks in a small memory (distributed RAM on ECP5) that it reads a part at a time.

    Partial sums that wait ``_MEMORY_DELAY`` cycles or more for their cells' products
    wait in a memory delay line (one for all rows up to four rows, one per row above:
    ``row_groups``), then in the rows' skew registers.
    With ``rows_aligned`` the cells deskew their rows themselves (bit-serial row sums,
    whose skew registers are a bit wide): every row's partial sum reaches ``_cells`` in
    one cycle, and every row's result is due in one cycle.

    A subclass passes the layouts of a cell's weight and of a column's data, and
    implements ``_cells``.

    Elaborated for the ``"formal"`` platform, the array keeps its control signals in
    ``formal_state`` (the bank states, the valid pipe, each cell's weight writes and the
    banks its cells read), for the weight-bank proof
    (``codnn.hw.formal.arrays.array_banks_top``).
    """

    def __init__(self, *, rows, cols, acc_bits, out_bits, cell_weight, column_data,
                 beat_cycles, edge_latency, product_steps=None, weight_cycles=1,
                 rows_aligned=False, requant="shift"):
        if rows * cols > MAX_CELLS:
            raise ValueError(f"An array of {rows} x {cols} cells is larger than codnn builds "
                             f"(at most {MAX_CELLS} cells, e.g. 128 x 128, which takes minutes "
                             f"to elaborate)")
        if out_bits is not None:
            positive_int(out_bits, "Output width")
            if out_bits > acc_bits:
                raise ValueError(f"Output width ({out_bits}) must not exceed the accumulator "
                                 f"width ({acc_bits})")
        self._rows, self._cols, self._acc_bits, self._out_bits = rows, cols, acc_bits, out_bits
        if requant not in REQUANT_KINDS:
            raise ValueError(f"Requantization must be one of {', '.join(REQUANT_KINDS)}, "
                             f"not {requant!r}")
        self._stage_steps = output_stage_steps(out_bits is not None, requant)
        self._multiply = out_bits is not None and requant == "multiplier"
        assert SPLIT_PRODUCT_STEPS == REQUANT_PRODUCT_STEPS
        self._cell_weight = cell_weight
        positive_int(weight_cycles, "Weight cycle count")
        if weight_cycles > 1 and not (isinstance(cell_weight, data.ArrayLayout)
                                      and cell_weight.length == weight_cycles):
            raise ValueError(f"A cell weight written in {weight_cycles} cycles must be an "
                             f"array of {weight_cycles} parts")
        self._weight_cycles = weight_cycles
        self._rows_aligned = rows_aligned
        self._beat_cycles, self._edge_latency = beat_cycles, edge_latency
        self._product_steps = beat_cycles if product_steps is None else product_steps
        result_fields = {"acc": data.ArrayLayout(signed(acc_bits), rows)}
        if out_bits is not None:
            result_fields["y"] = data.ArrayLayout(unsigned(out_bits), rows)
        result_fields["last"] = 1
        members = {
            "weights": In(stream.Signature(data.ArrayLayout(cell_weight, cols))),
            "data": In(stream.Signature(data.StructLayout({
                "x": data.ArrayLayout(column_data, cols),
                "psum": data.ArrayLayout(signed(acc_bits), rows),
                "last": 1}))),
            "result": Out(stream.Signature(data.StructLayout(result_fields))),
        }
        if out_bits is not None:
            members["shift"] = In(range(acc_bits + REQUANT_BITS * self._multiply))
        if self._multiply:
            members["multiplier"] = In(unsigned(REQUANT_BITS))
        super().__init__(members)

    rows = property(lambda self: self._rows, doc="Array rows.")
    cols = property(lambda self: self._cols, doc="Array columns.")
    acc_bits = property(lambda self: self._acc_bits, doc="Accumulator width.")
    out_bits = property(lambda self: self._out_bits, doc="Output stage width or None.")
    requant = property(lambda self: REQUANT_KINDS[self._multiply],
                       doc="The output stage's requantization: shift or multiplier.")
    beat_cycles = property(lambda self: self._beat_cycles,
                           doc="Cycles per data beat in steady state.")
    edge_latency = property(lambda self: self._edge_latency,
                            doc="Cycles of data edge between the input register and the cells.")
    product_steps = property(lambda self: self._product_steps,
                             doc="Register steps from a cell's operands to its product.")
    weight_cycles = property(lambda self: self._weight_cycles,
                             doc="Cycles per weight beat (parts of a cell's weight).")

    @property
    def pipeline_depth(self):
        """Register stages from an accepted data beat to the output FIFOs."""
        return (self.rows + self.cols + 1 + self._edge_latency + self._product_steps
                + self._stage_steps)

    @property
    def fifo_depth(self):
        """Entries of each output FIFO: enough that an always-ready output never
        throttles."""
        return self.pipeline_depth + 3

    @property
    def latency(self):
        """Cycles from a data beat's acceptance to its result being valid on ``result``."""
        return self.pipeline_depth + 2

    def _cells(self, m, row_psum, weight, use_bank, data_go, phase, at_end, platform):
        """Build the edge and the cells for ``platform`` (``elaborate``'s).
        ``weight(r, c, bank)`` is cell (r, c)'s weight in ``bank`` (a view of the cell
        weight layout); with ``weight_cycles`` > 1, ``weight(r, c, bank, part)`` is its
        part ``part``, read without a register (call it once per cell); ``phase``
        counts 0, 1, ... cycles since the last accepted beat, saturating at
        ``beat_cycles - 1``; ``at_end`` is ``phase == beat_cycles - 1``, a register.
        Replace each ``row_psum[r]`` with the row's partial sum after the last column.
        With ``rows_aligned``, every ``row_psum[r]`` holds a beat's partial sum
        ``pipeline_depth - 1`` cycles after its acceptance (``- 3`` with an output stage,
        ``- 5`` with the multiplier),
        and every row's result is due a cycle later."""
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        k = _Stages()
        self._handshakes(m, k)
        self._valid_pipeline(m, k)
        self._weight_beat(m, k)
        self._bank_states(m, k)
        weight = self._weight_banks(m, k)
        row_psum = self._row_psums(m, k)
        self._cells(m, row_psum, weight, k.use_bank, k.data_go, k.phase, k.at_end, platform)
        self._results(m, k, row_psum)
        if platform == "formal":
            self.formal_state = k       # read by the weight-bank proof, elaborated next
        return m

    def _handshakes(self, m, k):
        """Credits (accept a data beat only while one more fits the cells and the FIFO),
        the two weight banks' states and which one loads and which one computes, the beat
        phase and the weight part; the streams' ``ready`` from them."""
        # Credits: beats in the cells or the FIFO; accept only while one more fits.
        # room (a beat more fits the FIFO) is a register, set with the occupancy.
        occupancy = Signal(range(self.fifo_depth + 1), name="occupancy")
        room = Signal(init=1, name="room")
        # Control: two weight banks, each EMPTY -> FULL (loaded) -> BUSY (in use) -> EMPTY.
        k.bank_state = Array(Signal(2, name=f"bank{b}_state") for b in range(2))
        k.load_bank = Signal(name="load_bank")
        k.use_bank = Signal(name="use_bank")
        k.load_row = counter(self.rows, name="load_row")
        # Cycles since the last accepted beat; the next is accepted once it has had
        # beat_cycles of them (with one cycle a beat, always: no register).
        # at_end (phase == beat_cycles - 1) is a register, set with the phase.
        if self.beat_cycles > 1:
            k.phase = Signal(range(self.beat_cycles), init=self.beat_cycles - 1, name="phase")
            k.at_end = Signal(init=1, name="at_end")
        else:
            k.phase, k.at_end = C(0, 1), C(1, 1)
        # With weight parts: the part the next edge sends (0: ready for a beat).
        # part_idle (part == 0) is a register, set with the part.
        if self._weight_cycles > 1:
            k.part = Signal(range(self._weight_cycles), name="weight_part")
            k.part_idle = Signal(init=1, name="part_idle")
        else:
            k.part, k.part_idle = C(0, 1), C(1, 1)
        m.d.comb += [
            self.weights.ready.eq((k.bank_state[k.load_bank] == BANK_EMPTY) & k.part_idle),
            self.data.ready.eq(room & (k.bank_state[k.use_bank] == BANK_FULL) & k.at_end),
        ]
        k.weights_go = self.weights.valid & self.weights.ready
        k.data_go = self.data.valid & self.data.ready
        result_go = self.result.valid & self.result.ready
        if self.beat_cycles > 1:
            count_phase(m, k.phase, k.at_end, k.data_go, self.beat_cycles)
        with m.If(k.data_go & ~result_go):
            m.d.sync += [occupancy.eq(occupancy + 1),
                         room.eq(occupancy < self.fifo_depth - 1)]
        with m.Elif(result_go & ~k.data_go):
            m.d.sync += [occupancy.eq(occupancy - 1), room.eq(1)]

    def _valid_pipeline(self, m, k):
        """(valid, bank, last) of each beat in flight, a register stage per cell stage;
        ``tile_done`` when a tile's last beat leaves the cells."""
        depth = self.pipeline_depth
        k.pipe_valid = [Signal(name=f"pipe{i}_valid") for i in range(depth)]
        k.pipe_bank = [Signal(name=f"pipe{i}_bank") for i in range(depth)]
        k.pipe_last = [Signal(name=f"pipe{i}_last") for i in range(depth)]
        m.d.sync += [k.pipe_valid[0].eq(k.data_go), k.pipe_bank[0].eq(k.use_bank),
                     k.pipe_last[0].eq(self.data.payload.last)]
        for i in range(1, depth):
            m.d.sync += [k.pipe_valid[i].eq(k.pipe_valid[i - 1]),
                         k.pipe_bank[i].eq(k.pipe_bank[i - 1]),
                         k.pipe_last[i].eq(k.pipe_last[i - 1])]
        k.tile_done = k.pipe_valid[-1] & k.pipe_last[-1]

    def _weight_beat(self, m, k):
        """A weight beat (or its first part) goes into the array the edge it is accepted,
        with its tag (valid, bank, row, part); further parts follow an edge apart from a
        register that holds the beat. With parts, only the part counter and the tag's
        valid bit depend on the handshake: the beat's registers load (and the first part
        goes out) whenever no part is left to send, and without a valid tag nothing is
        written. Sets ``weights_q``, ``tag`` and the last part's (bank, row)."""
        P = self._weight_cycles
        k.tag = tag = Signal(data.StructLayout({
            "valid": 1, "bank": 1, "row": range(max(2, self.rows)),
            **({"part": range(P)} if P > 1 else {})}), name="weights_tag_c0")
        payload = self.weights.payload
        if P == 1:
            k.weights_q = stage(m, payload, "weights_q")
            m.d.sync += [tag.valid.eq(k.weights_go), tag.bank.eq(k.load_bank),
                         tag.row.eq(k.load_row)]
            k.last_part, k.last_bank, k.last_row = k.weights_go, k.load_bank, k.load_row
            return
        part, part_idle = k.part, k.part_idle
        held = Signal.like(payload, name="weights_held", reset_less=True)
        k.weights_q = Signal(data.ArrayLayout(self._cell_weight.elem_shape, self.cols),
                             name="weights_q", reset_less=True)
        with m.If(part_idle):
            m.d.sync += [held.eq(payload), tag.part.eq(0),
                         tag.bank.eq(k.load_bank), tag.row.eq(k.load_row)]
            m.d.sync += [k.weights_q[c].eq(payload[c][0]) for c in range(self.cols)]
        with m.Else():
            m.d.sync += tag.part.eq(part)
            m.d.sync += [k.weights_q[c].eq(held[c][part]) for c in range(self.cols)]
        with m.If(k.weights_go):
            m.d.sync += [part.eq(1), part_idle.eq(0)]
        with m.Elif(~part_idle):
            m.d.sync += [part.eq(Mux(part == P - 1, 0, part + 1)),
                         part_idle.eq(part == P - 1)]
        m.d.sync += tag.valid.eq(k.weights_go | ~part_idle)
        k.last_part, k.last_bank, k.last_row = (part == P - 1), tag.bank, tag.row

    def _bank_states(self, m, k):
        """The banks' EMPTY -> FULL -> BUSY -> EMPTY steps, the bank in use, each row's
        output-stage shift per bank, and the next row and bank to load."""
        R = self.rows
        # A tile's weights are written in column 0 the edge after its last beat's last
        # part is sent; its bank is FULL from then on.
        k.loaded = loaded = Signal(name="loaded")
        k.loaded_bank = loaded_bank = Signal(name="loaded_bank")
        m.d.sync += [loaded.eq(k.last_part & (k.last_row == R - 1)),
                     loaded_bank.eq(k.last_bank)]
        last_in = k.data_go & self.data.payload.last
        for b in range(2):
            with m.If(k.tile_done & (k.pipe_bank[-1] == b)):
                m.d.sync += k.bank_state[b].eq(BANK_EMPTY)
            with m.Elif(last_in & (k.use_bank == b)):
                m.d.sync += k.bank_state[b].eq(BANK_BUSY)
            with m.Elif(loaded & (loaded_bank == b)):
                m.d.sync += k.bank_state[b].eq(BANK_FULL)
        with m.If(last_in):
            m.d.sync += k.use_bank.eq(~k.use_bank)
        # Each row's output-stage shift (and multiplier), per bank, taken with the row's
        # weight beat.
        if self.out_bits is not None:
            k.row_shift = [[Signal.like(self.shift, name=f"shift{b}_r{r}")
                            for r in range(R)] for b in range(2)]
            k.row_multiplier = [[Signal.like(self.multiplier, name=f"multiplier{b}_r{r}")
                                 for r in range(R)] for b in range(2)] if self._multiply \
                else None
            for b in range(2):
                for r in range(R):
                    with m.If(k.weights_go & (k.load_bank == b) & (k.load_row == r)):
                        m.d.sync += k.row_shift[b][r].eq(self.shift)
                        if self._multiply:
                            m.d.sync += k.row_multiplier[b][r].eq(self.multiplier)
        with m.If(k.weights_go):
            with m.If(k.load_row == R - 1):
                m.d.sync += [k.load_row.eq(0), k.load_bank.eq(~k.load_bank)]
            with m.Else():
                m.d.sync += k.load_row.eq(k.load_row + 1)

    def _weight_banks(self, m, k):
        """The weight banks, written a row (and a part) at a time: registers, or with
        parts a memory per cell addressed by (bank, part). Returns ``weight(r, c, bank[,
        part])``, a cell's weight (``_cells``)."""
        R, W, P = self.rows, self.cols, self._weight_cycles
        if P == 1:
            banks = [[[Signal(self._cell_weight, name=f"w{b}_r{r}_c{c}") for c in range(W)]
                      for r in range(R)] for b in range(2)]
        else:
            part_bits = ceil_log2(P)
            banks = [[memory.Memory(shape=self._cell_weight.elem_shape,
                                    depth=2 << part_bits, init=[]) for c in range(W)]
                     for r in range(R)]
            for r in range(R):
                for c in range(W):
                    m.submodules[f"w_r{r}_c{c}"] = banks[r][c]
        # A weight beat and its tag travel right a column per cycle and up each column a
        # row per cycle, as the data do: row r of column c writes the beat that reaches it
        # when the tag names row r. Part k of beat n reaches row R-1 of column c 1 + c
        # edges after it is sent and row n R-1-n edges later, so every row of column c is
        # written 1 + c edges after the tile's last part is sent, and no write net spans
        # more than a cell.
        beat, tag = [k.weights_q[c] for c in range(W)], k.tag      # columns c.. of the beat
        # Each cell's write (enable, bank) and the banks it reads with (each once, in the
        # order first read), for the weight-bank proof.
        k.writes = [[None] * W for _ in range(R)]
        k.reads = [[[] for _ in range(W)] for _ in range(R)]
        for c in range(W):
            value, value_tag = beat[0], tag                 # entering row R-1
            for r in reversed(range(R)):
                here = value_tag.valid & (value_tag.row == r)
                k.writes[r][c] = (here, value_tag.bank)
                if P == 1:
                    for b in range(2):
                        with m.If(here & (value_tag.bank == b)):
                            m.d.sync += banks[b][r][c].eq(value)
                else:
                    write = banks[r][c].write_port()
                    m.d.comb += [write.addr.eq(Cat(value_tag.part, value_tag.bank)),
                                 write.data.eq(value), write.en.eq(here)]
                if r > 0:
                    value = stage(m, value, f"weights_r{r - 1}_c{c}")
                    # Each column has its own copy of the tag, as of the bank (the tags
                    # on an anti-diagonal are equal). The copy's first register starts
                    # with a valid tag naming a row past R-2, so it writes nothing.
                    own = column_stage if r == R - 1 else stage
                    value_tag = own(m, value_tag, f"weights_tag_r{r - 1}_c{c}")
            if c < W - 1:
                beat = [stage(m, v, f"weights_c{c + 1}_{i}")
                        for i, v in enumerate(beat[1:], c + 1)]
                tag = stage(m, tag, f"weights_tag_c{c + 1}")

        def weight(r, c, bank, part=None):
            if not any(bank is read for read in k.reads[r][c]):
                k.reads[r][c].append(bank)
            if P == 1:
                raw = Mux(bank, Value.cast(banks[1][r][c]), Value.cast(banks[0][r][c]))
                return data.View(self._cell_weight, raw)
            read = banks[r][c].read_port(domain="comb")
            address = Signal(part_bits, name=f"w_part_r{r}_c{c}")
            m.d.comb += [address.eq(part), read.addr.eq(Cat(address, bank))]
            return read.data
        return weight

    def _row_psums(self, m, k):
        """Each row's partial sum, delayed to meet its cells' products (the skew: row r
        waits ``R-1-r`` cycles more, unless the cells align the rows); sets ``skew``."""
        R, depth = self.rows, self.pipeline_depth
        psum_in = stage(m, self.data.payload.psum, "psum_in")
        if self._rows_aligned:
            # Every row's partial sum waits until a cycle before the cells' results.
            wait = depth - 2 - self._stage_steps
        else:
            # Row r's partial sum waits until its cells' products are ready: R-1-r
            # cycles of skew (below), the edge, and the cell's steps before its adder.
            wait = 1 + self._edge_latency + self._product_steps      # row R-1's
        if wait >= _MEMORY_DELAY:
            # A register after the memory: its read data reach no adder. A ring per group
            # of rows (``row_groups``), each with counters of its own (they count from
            # their own values, so yosys keeps them apart), so that no address register
            # spans a large array's rows.
            line = Signal.like(psum_in, name="psum_line")
            flat, bits = Value.cast(line), self.acc_bits
            for g, rows in enumerate(row_groups(R)):
                delayed = memory_delay(m, Cat(psum_in[r] for r in rows), wait - 1,
                                       f"psum_line{g}")
                m.d.comb += flat[rows[0] * bits:(rows[-1] + 1) * bits].eq(delayed)
            psum_in, wait = line, 1
        # Skew in, deskew out: row r's partial sum waits R-1-r cycles more and its result r
        # (row R-1, the bottom, leaves the cells first), unless the cells align the rows.
        k.skew = [0 if self._rows_aligned else r for r in range(R)]
        return [delay(m, psum_in[r], k.skew[R - 1 - r] + wait, f"psum_r{r}") for r in range(R)]

    def _results(self, m, k, row_psum):
        """Each row's result deskewed, through the output stage (with the shift its row
        took with the tile's weights) when there is one, into the output FIFOs."""
        R, depth, skew = self.rows, self.pipeline_depth, k.skew
        result = Signal(self.result.payload.shape())
        m.d.comb += result.last.eq(k.pipe_last[-1])
        if self.out_bits is None:
            for r in range(R):
                m.d.comb += result.acc[r].eq(delay(m, row_psum[r], skew[r], f"deskew_r{r}"))
        else:
            # The output stage acts on each row as it leaves the cells, with the shift its
            # row took with the tile's weights: row r's partial sum holds its beat when
            # the beat is pipe_bank[base - 1 - skew[r]] (``base`` the depth without the
            # stage), and its value (or, with the multiplier, its product, two steps
            # later) is in the output stage's first step; the shift and mask (bit k of
            # the value lands at or above out_bits) are registered a cycle before, from
            # the bank that beat used, and so is the multiplier.
            base = depth - self._stage_steps
            bits = self.acc_bits + REQUANT_BITS * self._multiply

            def own(values, r, at):
                return Mux(k.pipe_bank[at - skew[r]], values[1][r], values[0][r])
            for r in reversed(range(R)):
                value, at = row_psum[r], base - 2
                if self._multiply:
                    factor = stage(m, own(k.row_multiplier, r, at), f"multiplier_r{r}")
                    value = split_product(m, row_psum[r], factor, f"requant_r{r}")
                    at += REQUANT_PRODUCT_STEPS
                row_shift = own(k.row_shift, r, at)
                shift = stage(m, row_shift, f"shift_r{r}")
                mask = stage(m, over_mask(row_shift, self.out_bits, bits), f"over_mask_r{r}")
                y = output_stage(m, value, shift, mask, self.out_bits, f"r{r}")
                m.d.comb += [
                    result.acc[r].eq(delay(m, row_psum[r], skew[r] + self._stage_steps,
                                           f"deskew_r{r}")),
                    result.y[r].eq(delay(m, y, skew[r], f"deskew_y_r{r}"))]
        self._output_fifos(m, result, k.pipe_valid)

    def _output_fifos(self, m, result, pipe_valid):
        """An output FIFO per group of rows (``row_groups``; the first holds ``last``),
        buffered so that it maps to block RAM: in an array of more than four rows each
        FIFO's level and pointers drive one row's memory, and only ``result.ready``
        reaches every FIFO. The FIFOs are written and read together, so they hold the
        same beats; each has a write enable of its own (``group_copies``).
        """
        def group_fields(beat, rows):
            return Cat(*(Cat(beat.acc[r], *([beat.y[r]] if self.out_bits is not None else []))
                         for r in rows), *([beat.last] if rows.start == 0 else []))
        groups = row_groups(self.rows)
        writes = group_copies(m, pipe_valid, len(groups), "fifo_w_en")
        for k, (rows, write) in enumerate(zip(groups, writes)):
            fields = group_fields(result, rows)
            m.submodules[f"fifo_{k}"] = group_fifo = fifo.SyncFIFOBuffered(
                width=len(fields), depth=self.fifo_depth)
            m.d.comb += [group_fifo.w_data.eq(fields), group_fifo.w_en.eq(write),
                         group_fields(self.result.payload, rows).eq(group_fifo.r_data),
                         group_fifo.r_en.eq(self.result.ready)]
            if k == 0:
                m.d.comb += self.result.valid.eq(group_fifo.r_rdy)
