"""Proofs of the arrays (the column-combined and TQ arrays): beats conserved, values
equal to their sums, the weight banks a cell reads, the latency."""

from dataclasses import dataclass

import numpy as np
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import (C, Array, Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, Signal,
                          Value, signed, unsigned)
from amaranth.lib import stream

from codnn.golden.term_quant import truncate
from codnn.hw.common.delays import delay_line
from codnn.hw.common.ws_array import BANK_BUSY, BANK_EMPTY, BANK_FULL
from codnn.hw.formal.environment import stream_engine_top
from codnn.hw.formal.streams import Tracker, beats, in_flight, no_reset
from codnn.hw.systolic import ColumnCombinedArray
from codnn.hw.tq.layouts import sign_magnitude

__all__ = ["array_beats_top", "array_values_top", "array_banks_top", "array_latency_top"]


def array_beats_top(dut):
    """An array (``codnn.hw.common.ws_array.WeightStationaryArray``) under the environment of
    ``stream_engine_top`` (a reset at any cycle included): one result beat per data beat,
    never one before its data beat (results out at most data beats in), and at most
    ``fifo_depth`` data beats whose results have not left (the shell's credit)."""
    m = stream_engine_top(dut)
    flying = in_flight(m, dut.data, dut.result, "array",
                           width=(dut.fifo_depth + 1).bit_length() + 1)
    m.d.comb += [Assert(beats(m, dut.result, "result") <= beats(m, dut.data, "data")),
                 Assert(flying <= dut.fifo_depth),
                 Cover(flying == dut.fifo_depth)]      # the bound is reached (cover mode)
    return m


def array_values_top(dut, reset=True):
    """A weight-stationary array without an output stage (the column-combined array,
    ``codnn.hw.systolic.ColumnCombinedArray``, or the TQ array,
    ``codnn.hw.tq.array.TermQuantArray``) under ``stream_engine_top``'s environment, a
    reset at any cycle unless ``reset`` is False, against a model of its tiles: the weight
    beats since the reset, ``rows`` to a tile, and the data beats, a tile ending at
    ``last``. The property: the k-th result since the reset (any k < 16, an ``AnyConst``)
    is the k-th data beat's ``wrap(psum + sum of the row's products)`` (``_products``)
    with the weights of that beat's tile and its ``last``: no beat computes with another
    tile's bank (nor a bank being written), and after a reset nothing of the aborted work
    comes out."""
    m = stream_engine_top(dut)
    if not reset:
        no_reset(m)
    R = dut.rows
    tiles = 4                       # the shell holds at most 2 tiles ahead of the data
    row_layout = dut.weights.payload.shape()
    rows = [[Signal(row_layout, name=f"model_w{t}_r{r}") for r in range(R)]
            for t in range(tiles)]
    weight_count = Signal(range(tiles * R), name="model_weight_beats")
    data_tile = Signal(range(tiles), name="model_data_tile")
    weights, beat = dut.weights, dut.data
    with m.If(weights.valid & weights.ready):
        for t in range(tiles):
            for r in range(R):
                with m.If(weight_count == t * R + r):
                    m.d.sync += rows[t][r].eq(weights.payload)
        m.d.sync += weight_count.eq(Mux(weight_count == tiles * R - 1, 0, weight_count + 1))
    with m.If(beat.valid & beat.ready & beat.payload.last):
        m.d.sync += data_tile.eq(data_tile + 1)
    # The result the current data beat must give (its tile's weights), offered as a
    # stream beside the data.
    acc = [Signal(signed(len(dut.result.payload.acc[r])), name=f"model_acc_r{r}")
           for r in range(R)]
    for r in range(R):
        row = row_layout(_select(data_tile, [Value.cast(rows[t][r]) for t in range(tiles)]))
        m.d.comb += acc[r].eq(sum(_products(dut, row, beat.payload.x), beat.payload.psum[r]))
    expected = stream.Signature(unsigned(len(Cat(*acc)) + 1)).create(path=("expected",))
    m.d.comb += [expected.valid.eq(beat.valid), expected.ready.eq(beat.ready),
                 expected.payload.eq(Cat(*acc, beat.payload.last))]
    tracked = Tracker(m, expected, dut.result, AnyConst(4))
    with m.If(tracked.at_out):
        m.d.comb += Assert(tracked.seen_in & (Cat(*dut.result.payload.acc,
                                                  dut.result.payload.last)
                                              == tracked.payload))
    # Cover mode: a result of a beat past the second tile's first is checked.
    m.d.comb += Cover(tracked.at_out & (data_tile >= 2))
    return m


def _products(dut, row, x):
    """The products one array row adds to its partial sum for the data ``x`` (semantics
    sections 2 and 3): the column-combined array's ``w[g] * x[g][sel[g]]``; the TQ
    array's, for each weight term of each queue, ``(-1)**neg * 2**exp`` times the data
    value it names, truncated to its top ``beta`` terms (a table, as
    ``codnn.golden.term_quant.truncate``)."""
    if isinstance(dut, ColumnCombinedArray):
        return [row[g].w * _select(row[g].sel, [x[g][a] for a in range(dut.alpha)])
                for g in range(dut.cols)]
    mb = dut.mag_bits
    table = Array(C(int(v), mb + 1)
                  for v in truncate(np.arange(1 << mb), dut.beta, dut.encoding, mb))
    products = []
    for c in range(dut.cols):
        for i in range(dut.alpha):
            term = row[c][i]
            value = sign_magnitude(mb)(_select(term.idx, [Value.cast(x[c][j])
                                                          for j in range(dut.g)]))
            magnitude = table[value.mag] << term.exp
            negative = term.neg ^ value.neg
            products.append(Mux(term.valid, Mux(negative, -magnitude, magnitude), 0))
    return products


def array_banks_top(dut):
    """The column-combined array (``codnn.hw.systolic.ColumnCombinedArray``) with its
    inputs driven anyhow at every cycle (``valid``, ``last``, ``ready``: no stream rule
    assumed), a reset at any cycle, beside ghost numbers: each tile's number (mod 4) as
    its weights are taken (``wt``) and as its data are (``dt``), and each cell's number of
    the tile whose weights it last wrote in each bank, from the cell's own write enable.
    The property: whenever a cell reads a bank for a beat in flight (``_read_stages``),
    it reads the beat's bank, and that bank holds the beat's tile's weights in that cell:
    no tile computes with a bank being written or with another tile's. With it, the
    invariants that make it inductive: the banks' states and the tiles they hold
    (``_WeightBanks``)."""
    if not isinstance(dut, ColumnCombinedArray):
        raise ValueError("The weight-bank proof takes the column-combined array")
    m = Module()
    m.submodules.dut = dut
    for port in (dut.weights.valid, dut.weights.payload, dut.data.valid, dut.data.payload,
                 dut.result.ready, *([dut.shift] if dut.out_bits is not None else [])):
        m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
    m.submodules.banks = _WeightBanks(dut)
    return m


def _read_stages(dut, r, c):
    """For each bank that cell (r, c) of ``dut`` reads with (``formal_state.reads``, in
    the order first read), the stages of the valid pipe whose beat it reads for: stage i
    holds the beat taken i + 1 cycles ago, stage -1 the beat being taken. A parallel cell
    reads its weight for the beat at stage ``c + rows-1 - r`` and its stream select a
    cycle ahead; a bit-serial cell reads its weight for each of a beat's ``data_bits``
    bits, the first at stage ``c + rows - r`` (the edge registers the beat first)."""
    if dut.mac == "parallel":
        weight = c + dut.rows - 1 - r
        return [[weight], [weight - 1]]
    return [[c + dut.rows - r + bit for bit in range(dut.data_bits)]]


@dataclass(frozen=True)
class _Ghosts:
    """``_WeightBanks``' ghost numbers: weight tiles taken (``wt``) and data tiles ended
    (``dt``), both mod 4; the tile number a weight write to cell (r, c) carries
    (``carried``); the data tile of the valid pipe's stages (``d_line``); the tile bank
    ``b``'s row ``r`` holds in cell ``c`` (``ghost[b][r][c]``) and the cycles since that
    row was last taken (``age[b][r]``, saturating)."""

    wt: Signal
    dt: Signal
    carried: list
    d_line: list
    ghost: list
    age: list


class _WeightBanks(Elaboratable):
    """``array_banks_top``'s ghost numbers and properties, built once ``dut`` has been
    elaborated for the formal platform (its ``formal_state``)."""

    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        g = self._ghosts(m)
        self._reads(m, g)
        self._bank_states(m, g)
        self._writes(m, g)
        return m

    def _ghosts(self, m):
        """The ghost numbers (``_Ghosts``), and that a tile's weights go to the bank of
        its number."""
        dut = self.dut
        k, R, C = dut.formal_state, dut.rows, dut.cols
        wt, dt = Signal(2, name="ghost_weight_tile"), Signal(2, name="ghost_data_tile")
        with m.If(k.weights_go & (k.load_row == R - 1)):
            m.d.sync += wt.eq(wt + 1)
        with m.If(k.data_go & dut.data.payload.last):
            m.d.sync += dt.eq(dt + 1)
        # The tile number a weight write carries: a beat's tag reaches cell (r, c) 1 + c +
        # R-1-r cycles after the beat is taken; a beat in the valid pipe's stage i was
        # taken i + 1 cycles ago.
        w_line = delay_line(m, wt, R + C, "ghost_weight_tile")
        carried = [[w_line[c + R - r] for c in range(C)] for r in range(R)]
        d_line = delay_line(m, dt, dut.pipeline_depth, "ghost_data_tile")
        ghost = [[[Signal(2, name=f"ghost_b{b}_r{r}_c{c}", reset_less=True)
                   for c in range(C)] for r in range(R)] for b in range(2)]
        for r in range(R):
            for c in range(C):
                enable, bank = k.writes[r][c]
                with m.If(enable):
                    banks = Array([ghost[0][r][c], ghost[1][r][c]])
                    m.d.sync += banks[bank].eq(carried[r][c])
                    # A tile's weights go to the bank of its number.
                    m.d.comb += Assert(bank == carried[r][c][0])
        # The row's write to cell (r, c) shows once its age is c + R - r.
        age = [[Signal(range(R + C + 1), name=f"ghost_age_b{b}_r{r}") for r in range(R)]
               for b in range(2)]
        for b in range(2):
            for r in range(R):
                with m.If(k.weights_go & (k.load_bank == b) & (k.load_row == r)):
                    m.d.sync += age[b][r].eq(0)
                with m.Elif(age[b][r] != R + C):
                    m.d.sync += age[b][r].eq(age[b][r] + 1)
                m.d.comb += Assert(age[b][r] <= R + C)
        return _Ghosts(wt, dt, carried, d_line, ghost, age)

    def _holds(self, g, b, r, number):
        """Row ``r`` of bank ``b``, once written, holds tile ``number`` in every cell."""
        R = self.dut.rows
        return [Assert((g.age[b][r] < c + R - r) | (g.ghost[b][r][c] == number))
                for c in range(self.dut.cols)]

    def _tile(self, g, bank):
        """The number of the tile a FULL or BUSY ``bank`` holds."""
        k = self.dut.formal_state
        full = k.bank_state[bank] == BANK_FULL
        return Mux(k.use_bank == bank, Mux(full, g.dt, g.dt - 2),
                   Mux(full, g.dt + 1, g.dt - 1))[:2]

    def _reads(self, m, g):
        """The property, at every read of a bank for a beat in flight; cover mode: the
        last cell reads a bank again, for a beat of the third tile."""
        dut = self.dut
        k, R, C = dut.formal_state, dut.rows, dut.cols
        for r in range(R):
            for c in range(C):
                for read, stages in zip(k.reads[r][c], _read_stages(dut, r, c), strict=True):
                    for s in stages:
                        if s < 0:
                            valid, bank, number = k.data_go, k.use_bank, g.dt
                        else:
                            valid, bank = k.pipe_valid[s], k.pipe_bank[s]
                            number = g.d_line[s + 1]
                        held = Mux(read, g.ghost[1][r][c], g.ghost[0][r][c])
                        m.d.comb += Assert(~valid | ((read == bank) & (held == number)))
        final = max(max(stages) for stages in _read_stages(dut, 0, C - 1))
        m.d.comb += Cover(k.pipe_valid[final] & (g.d_line[final + 1] == 2))

    def _bank_states(self, m, g):
        """The invariants: the banks' states, and the tile each bank holds."""
        dut = self.dut
        k, R = dut.formal_state, dut.rows
        wt, dt = g.wt, g.dt
        ahead = (wt - dt)[:2]
        m.d.comb += [Assert(k.use_bank == dt[0]), Assert(k.load_bank == wt[0]),
                     Assert(ahead <= 2)]
        for b in range(2):
            state, mine = k.bank_state[b], k.use_bank == b
            m.d.comb += [
                Assert(state != 3),
                Assert(~(mine & (state == BANK_FULL)) | (ahead != 0)),
                Assert(~(~mine & (state == BANK_FULL)) | (ahead == 2)),
                Assert(~(mine & (state == BANK_BUSY)) | (ahead == 0)),
                Assert(~(~mine & (state == BANK_BUSY)) | (ahead != 2)),
            ]
            # Each row of a FULL or BUSY bank, and of a bank loaded at the next edge, holds
            # its tile once written; so does each row taken of the tile being loaded.
            with m.If((state == BANK_FULL) | (state == BANK_BUSY)):
                held = self._tile(g, b)
                m.d.comb += [check for r in range(R) for check in self._holds(g, b, r, held)]
            with m.If(k.loaded & (k.loaded_bank == b)):
                m.d.comb += [check for r in range(R)
                             for check in self._holds(g, b, r, (wt - 1)[:2])]
            for r in range(R):
                with m.If((k.load_bank == b) & (k.load_row > r)):
                    m.d.comb += self._holds(g, b, r, wt)
        # A tile being loaded: its bank is EMPTY.
        with m.If(k.load_row != 0):
            m.d.comb += Assert(k.bank_state[k.load_bank] == BANK_EMPTY)
        # The tiles taken ahead of the data: each bank FULL, or loaded at the next edge.
        for bank, taken in ((k.use_bank, ahead != 0), (~k.use_bank, ahead == 2)):
            with m.If(taken):
                m.d.comb += Assert((k.bank_state[bank] == BANK_FULL)
                                   | (k.loaded & (k.loaded_bank == bank)))
        # A loaded tile's bank is EMPTY until the edge after, and it is the tile before wt.
        with m.If(k.loaded):
            m.d.comb += [Assert(k.bank_state[k.loaded_bank] == BANK_EMPTY),
                         Assert(k.loaded_bank != wt[0]),
                         Assert(ahead == Mux(k.loaded_bank == k.use_bank, 1, 2))]
        # A beat in flight: its bank is FULL with its tile (not yet ended) or BUSY.
        for i in range(dut.pipeline_depth):
            bank = k.pipe_bank[i]
            state = k.bank_state[bank]
            with m.If(k.pipe_valid[i]):
                m.d.comb += [
                    Assert((state == BANK_BUSY) | ((state == BANK_FULL) & ~k.pipe_last[i]
                                                   & (bank == k.use_bank))),
                    Assert(g.d_line[i + 1] == self._tile(g, bank))]

    def _writes(self, m, g):
        """A weight write is of the tile its bank holds (the tail of its load: FULL or
        BUSY), or of the tile loading, or of the one just loaded (EMPTY); once no beat
        taken before a reset can still be writing."""
        k, R, C = self.dut.formal_state, self.dut.rows, self.dut.cols
        settled = Signal(range(R + C + 1), name="ghost_since_reset")
        with m.If(settled != R + C):
            m.d.sync += settled.eq(settled + 1)
        m.d.comb += Assert(settled <= R + C)
        for r in range(R):
            for c in range(C):
                enable, bank = k.writes[r][c]
                with m.If(enable & (settled == R + C)):
                    m.d.comb += Assert(g.carried[r][c] == Mux(
                        k.bank_state[bank] != BANK_EMPTY, self._tile(g, bank),
                        Mux(bank == k.load_bank, g.wt, g.wt - 1))[:2])


def _select(index, values):
    """``values[index]`` as a chain of multiplexers (the last one past the end)."""
    chosen = values[-1]
    for k in reversed(range(len(values) - 1)):
        chosen = Mux(index == k, values[k], chosen)
    return chosen


def array_latency_top(dut):
    """An array under ``stream_engine_top``'s environment (a reset at any cycle) with its
    result sink always ready: each result leaves exactly ``dut.latency`` cycles after its
    data beat was taken (the documented latency), and no result leaves otherwise."""
    m = stream_engine_top(dut)
    m.d.comb += Assume(dut.result.ready)
    taken = [Signal(name=f"taken_{k}") for k in range(dut.latency)]
    m.d.sync += taken[0].eq(dut.data.valid & dut.data.ready)
    m.d.sync += [taken[k].eq(taken[k - 1]) for k in range(1, dut.latency)]
    m.d.comb += Assert(dut.result.valid == taken[-1])
    return m
