"""Functional and cycle model of the column-combined systolic array (docs/semantics.md section 2).

A packed layer (``codnn.golden.column_combining.PackedLayer`` with integer weights) runs on a
``rows x cols`` weight-stationary array as tiles: row block ``i`` (array rows) times
column block ``j`` (array columns = groups). A tile's data beat carries, for every array
column, the ``alpha`` data values of its group's channels (zero for missing ones) and, for
every row, the partial sum it adds to (``psum_in``): the bias for the first column block of
a row block, the previous column block's result after that.

Arithmetic: two's complement, products and sums wrap to ``acc_bits`` exactly like the RTL
(wrapping is modular, so the order of accumulation does not matter). Output stage:
``clamp(acc >> shift, 0, 2**out_bits - 1)`` with an arithmetic (floor) shift, a shift per
output channel (array row).

The cycle model mirrors the RTL's control (``codnn.hw.systolic.array``) edge by edge, with both
input streams always valid and the output always ready: weights load a row per cycle into
the free one of two banks (a beat is written the edge after it is accepted, and the bank
counts as loaded from then on); data beats enter one per cycle while their tile's bank is
loaded and the output FIFO has room for them (credits), one per ``beat_cycles`` (the
bit-serial MAC takes ``data_bits`` cycles per beat); a bank frees when its tile's last
result leaves the cells. A beat spends ``pipeline_depth`` cycles in the skew registers and
cells, then ``FIFO_LATENCY`` in the output FIFO.
"""

import collections
from dataclasses import dataclass

import numpy as np

__all__ = ["MAC_KINDS", "MAX_CELLS", "select_bits", "FIFO_LATENCY", "Tile", "check_fits",
           "make_tiles", "tile_beats", "wrap", "REQUANT_BITS", "output_stage", "run_tile",
           "run_layer", "PARALLEL_PRODUCT_STEPS", "OUTPUT_STAGE_STEPS", "REQUANT_PRODUCT_STEPS",
           "REQUANT_KINDS", "output_stage_steps", "serial_word_bits", "serial_lanes",
           "mac_timing",
           "pipeline_depth", "latency", "cycle_model", "CycleReport"]


#: Bits of the output stage's requantization multiplier (unsigned).
REQUANT_BITS = 16


def wrap(values, bits):
    """Wrap integers to ``bits``-bit two's complement."""
    values = np.asarray(values, dtype=object if bits > 62 else np.int64)
    half = 1 << (bits - 1)
    return ((values + half) % (1 << bits)) - half


def output_stage(acc, shift, out_bits, multiplier=1):
    """``clamp((acc * multiplier) >> shift, 0, 2**out_bits - 1)`` (arithmetic shift:
    floor); ``shift`` and ``multiplier`` are each one integer, or one per row (per output
    channel: along the first axis of ``acc``). A multiplier of 1 is the shift-only stage
    the arrays build; ``multiplier`` is 0 .. ``2**REQUANT_BITS - 1`` (semantics section
    7)."""
    acc = np.asarray(acc, dtype=np.int64)
    shift, multiplier = (np.asarray(v, dtype=np.int64) for v in (shift, multiplier))
    shift, multiplier = (v.reshape((-1,) + (1,) * (acc.ndim - 1)) if v.ndim == 1 else v
                         for v in (shift, multiplier))
    return np.clip((acc * multiplier) >> shift, 0, (1 << out_bits) - 1)


def select_bits(alpha):
    """Bits of a cell's stream select in a weight beat (at least 1)."""
    return max(1, (alpha - 1).bit_length())


@dataclass(frozen=True)
class Tile:
    """One tile of a packed layer on the array.

    Attributes
    ----------
    row_block, col_block : int
    weights : numpy.ndarray, shape (rows, cols)
        Integer weight of each cell (0 where the layer has no row or group there).
    selects : numpy.ndarray, shape (rows, cols)
        Stream select of each cell (0 where empty).
    channels : numpy.ndarray, shape (cols, alpha)
        Original channel feeding each stream of each array column, -1 for none.
    """

    row_block: int
    col_block: int
    weights: np.ndarray
    selects: np.ndarray
    channels: np.ndarray

    @property
    def used_cells(self):
        return int(np.count_nonzero(self.weights))


def check_fits(packed, *, alpha, weight_bits):
    """Check that a packed layer can run on an array with ``alpha`` streams per column and
    ``weight_bits``-bit weights.

    Raises
    ------
    ValueError
        If the layer was packed with a larger alpha, or a weight is not an integer in
        ``-2**(weight_bits-1) .. 2**(weight_bits-1)-1``.
    """
    if packed.alpha > alpha:
        raise ValueError(f"the layer was packed with alpha={packed.alpha}, the array takes "
                         f"at most {alpha} streams per column")
    P = np.asarray(packed.P)
    if not np.all(np.equal(np.mod(P, 1), 0)):
        raise ValueError(f"weights must be integers for the array (quantize them to "
                         f"{weight_bits} bits first)")
    low, high = -(1 << (weight_bits - 1)), (1 << (weight_bits - 1)) - 1
    if P.size and (P.min() < low or P.max() > high):
        raise ValueError(f"weights {int(P.min())}..{int(P.max())} do not fit {weight_bits} "
                         f"bits ({low}..{high})")


def make_tiles(packed, rows, cols, alpha=None):
    """Cut a packed layer into tiles, row blocks outer, column blocks inner, for an array
    with ``alpha`` streams per column (default the layer's own alpha; a larger one leaves
    the streams past each group's channels at zero)."""
    N, G = packed.P.shape
    alpha = packed.alpha if alpha is None else alpha
    if alpha < packed.alpha:
        raise ValueError(f"the layer was packed with alpha={packed.alpha}, the array takes "
                         f"at most {alpha} streams per column")
    table = np.full((G, alpha), -1, dtype=np.int64)
    for g, group in enumerate(packed.groups):
        table[g, :len(group)] = group
    result = []
    for i in range(-(-N // rows)):
        for j in range(max(1, -(-G // cols))):
            r0, g0 = i * rows, j * cols
            w = np.zeros((rows, cols), dtype=np.int64)
            s = np.zeros((rows, cols), dtype=np.int64)
            ch = np.full((cols, alpha), -1, dtype=np.int64)
            block_P = packed.P[r0:r0 + rows, g0:g0 + cols]
            w[:block_P.shape[0], :block_P.shape[1]] = block_P
            s[:block_P.shape[0], :block_P.shape[1]] = packed.idx[r0:r0 + rows, g0:g0 + cols]
            ch[:min(cols, G - g0)] = table[g0:g0 + cols]
            result.append(Tile(i, j, w, s, ch))
    return result


def tile_beats(tile, X):
    """Data of a tile's beats: ``(T, cols, alpha)`` integers from channels ``X`` (C x T)."""
    X = np.asarray(X)
    gathered = X[np.maximum(tile.channels, 0)]                   # cols x alpha x T
    gathered = np.where(tile.channels[:, :, None] >= 0, gathered, 0)
    return np.moveaxis(gathered, 2, 0)


def run_tile(tile, beats, psum, acc_bits):
    """Results ``(T, rows)`` of a tile: ``wrap(psum + sum_g w[r,g] * x[g, sel[r,g]])``."""
    beats = np.asarray(beats, dtype=np.int64)                    # T x cols x alpha
    selected = np.take_along_axis(beats[:, None, :, :],           # T x rows x cols
                                  tile.selects[None, :, :, None], axis=3)[..., 0]
    return wrap(np.asarray(psum, dtype=np.int64)
                + (tile.weights[None] * selected).sum(axis=2), acc_bits)


def run_layer(packed, X, *, rows, cols, acc_bits=32, bias=None, alpha=None):
    """Run a packed layer tile by tile; return ``(per_tile, acc)``.

    ``per_tile`` lists ``(tile, beats, psum_in, results)`` in stream order, the beats laid
    out for ``alpha`` streams per column (``make_tiles``); ``acc`` is the layer's ``N x T``
    accumulator result (before any output stage).
    """
    X = np.asarray(X, dtype=np.int64)
    N, T = packed.P.shape[0], X.shape[1]
    bias = np.zeros(N, dtype=np.int64) if bias is None else np.asarray(bias, dtype=np.int64)
    acc = np.zeros((N, T), dtype=np.int64)
    per_tile = []
    for tile in make_tiles(packed, rows, cols, alpha):
        r0 = tile.row_block * rows
        n = min(rows, N - r0)
        if tile.col_block == 0:
            psum = np.zeros((T, rows), dtype=np.int64)
            psum[:, :n] = bias[r0:r0 + n][None, :]
        else:
            psum = per_tile[-1][3]
        beats = tile_beats(tile, X)
        results = run_tile(tile, beats, psum, acc_bits)
        per_tile.append((tile, beats, psum, results))
        acc[r0:r0 + n] = results[:, :n].T
    return per_tile, acc


#: Edges from a result's write into the array's output FIFOs to its first
#: possible read.
FIFO_LATENCY = 2


#: The most cells an array may have (elaborating the gateware takes about 20 ms a cell;
#: the models' tables grow with it too).
MAX_CELLS = 128 * 128

#: The MAC kinds of the array: a product per cell per cycle, or data and partial sums
#: bit-serial.
MAC_KINDS = ("parallel", "bitserial")

#: Register steps of the parallel MAC's pipelined multiplier, operands to product.
PARALLEL_PRODUCT_STEPS = 3
#: Register steps of the output stage (a coarse, then a fine shift and the clamp), and of
#: the product with the requantization multiplier before it (a stage with one: its
#: 17-bit pieces' products, their sum).
OUTPUT_STAGE_STEPS, REQUANT_PRODUCT_STEPS = 2, 2
#: The output stage's requantizations: a shift, or a multiplier and a shift.
REQUANT_KINDS = ("shift", "multiplier")


def output_stage_steps(out_stage, requant="shift"):
    """Register steps of an array's output stage: none without one, ``OUTPUT_STAGE_STEPS``
    shifting, ``REQUANT_PRODUCT_STEPS`` more with a multiplier."""
    if requant not in REQUANT_KINDS:
        raise ValueError(f"requant must be one of {', '.join(REQUANT_KINDS)}, not {requant!r}")
    if not out_stage:
        return 0
    return OUTPUT_STAGE_STEPS + REQUANT_PRODUCT_STEPS * (requant == "multiplier")


def serial_word_bits(*, weight_bits, data_bits, cols, acc_bits):
    """Width of the row sums that bit-serial cells pass along a row, LSB first: a product
    fits ``weight_bits + data_bits`` bits and a row of ``cols`` of them
    ``ceil(log2(cols))`` more; never more than ``acc_bits`` (results wrap to it)."""
    return min(acc_bits, weight_bits + data_bits + (cols - 1).bit_length())


def serial_lanes(*, weight_bits, data_bits, cols, acc_bits):
    """Row-sum lanes of a bit-serial row: a beat every ``data_bits`` cycles while each row
    sum takes ``serial_word_bits`` cycles to pass, so that many are in flight at once."""
    word = serial_word_bits(weight_bits=weight_bits, data_bits=data_bits, cols=cols,
                            acc_bits=acc_bits)
    return -(-word // data_bits)


def mac_timing(mac, *, data_bits, weight_bits, cols, acc_bits):
    """The timing of a systolic MAC kind as ``cycle_model``'s and ``latency``'s keywords
    ``beat_cycles``, ``edge_latency`` and ``product_steps``: ``parallel`` takes a beat per
    cycle and ``PARALLEL_PRODUCT_STEPS`` to a product; ``bitserial`` a beat per
    ``data_bits`` cycles, after a cycle of edge (a beat is registered before it loads the
    streams' shift registers), and a row's sum leaves the last column bit-serially over
    ``serial_word_bits`` cycles, then takes 2 steps to its word and to the sum with the
    partial sum (``product_steps`` = word bits + 2)."""
    if mac == "parallel":
        return {"beat_cycles": 1, "edge_latency": 0, "product_steps": PARALLEL_PRODUCT_STEPS}
    word = serial_word_bits(weight_bits=weight_bits, data_bits=data_bits, cols=cols,
                            acc_bits=acc_bits)
    return {"beat_cycles": data_bits, "edge_latency": 1, "product_steps": word + 2}


def pipeline_depth(rows, cols, out_stage, beat_cycles=1, edge_latency=0,
                   product_steps=None, requant="shift"):
    """Register stages from an accepted data beat to the array's output FIFO: the input
    register, the data edge (``edge_latency``), skew and cells (``rows + cols +
    product_steps``: a cell takes an operand step and ``product_steps`` steps to its
    product before its adder) and the output stage's (``output_stage_steps``: 2, 4 with
    ``requant`` ``"multiplier"``). ``product_steps`` (default ``beat_cycles``) is 3 for
    parallel MACs, the row sum's width + 2 for bit-serial ones (``mac_timing``), ``alpha +
    2`` for TQ cells (``codnn.golden.tq_array.tq_timing``)."""
    steps = beat_cycles if product_steps is None else product_steps
    return rows + cols + 1 + edge_latency + steps + output_stage_steps(out_stage, requant)


def latency(rows, cols, out_stage, beat_cycles=1, edge_latency=0, product_steps=None,
            requant="shift"):
    """Cycles from a data beat's acceptance to its result being valid at the output."""
    return (pipeline_depth(rows, cols, out_stage, beat_cycles, edge_latency, product_steps,
                           requant) + FIFO_LATENCY)


@dataclass(frozen=True)
class CycleReport:
    """Cycle-model figures in SCALE-Sim's terms.

    ``cycles``: from the first weight beat accepted to the last result taken, both edges
    included. ``overall_util``: useful MACs / (cycles x rows x cols).
    ``mapping_efficiency``: used cells / (tiles x rows x cols).
    Where the cycles go (they sum to ``cycles``): ``loading``, data waiting for a tile's
    weights; ``streaming``, a tile's data going in (beats, and the cycles between them);
    ``draining``, after the last beat, until the last result.
    """

    cycles: int
    tiles: int
    beats: int
    useful_macs: int
    overall_util: float
    mapping_efficiency: float
    loading: int = 0
    streaming: int = 0
    draining: int = 0


def cycle_model(tile_sizes, *, rows, cols, out_stage, beat_cycles=1, edge_latency=0,
                product_steps=None, weight_cycles=1, used_cells=None, requant="shift"):
    """Exact cycles the RTL takes for tiles of ``tile_sizes`` beats each (all > 0), with
    a data beat accepted at most every ``beat_cycles`` cycles (1: parallel MACs,
    ``data_bits``: bit-serial), ``edge_latency`` cycles of data edge before the cells,
    ``product_steps`` from a cell's operands to its product (``pipeline_depth``) and a
    weight beat accepted at most every ``weight_cycles`` cycles (its parts written one a
    cycle); ``requant`` the output stage's (``output_stage_steps``).

    Both input streams are always valid, the output always ready. Edge ``e`` = 0 is the
    first weight beat's acceptance.
    """
    tile_sizes = [int(t) for t in tile_sizes]
    if not tile_sizes or min(tile_sizes) < 1:
        raise ValueError("Every tile needs at least one data beat")
    L = pipeline_depth(rows, cols, out_stage, beat_cycles, edge_latency, product_steps,
                       requant)
    depth = L + FIFO_LATENCY + 1          # output FIFO entries, as in the RTL
    EMPTY, FULL, BUSY = 0, 1, 2
    bank = [EMPTY, EMPTY]
    load_bank = use_bank = 0
    load_row = 0
    filled = None                         # (bank, edge it turns FULL) once loaded
    weight_tiles = data_tile = beat_in_tile = 0
    pipe = [None] * L            # pipe[k]: (bank, last) of the beat accepted k+1 edges ago
    queue = collections.deque()           # edge at which each FIFO entry can be read
    occupancy = outputs = 0
    next_beat = 0                         # first edge the serializer takes a beat
    next_weight = 0                       # first edge a weight beat can be accepted
    total = sum(tile_sizes)
    spent = {"loading": 0, "streaming": 0, "draining": 0}
    e = 0
    while True:
        spent["draining" if data_tile == len(tile_sizes) else
              "loading" if bank[use_bank] != FULL else "streaming"] += 1
        result_go = bool(queue) and queue[0] <= e
        weights_go = (weight_tiles < len(tile_sizes) and bank[load_bank] == EMPTY
                      and e >= next_weight)
        data_go = (data_tile < len(tile_sizes) and bank[use_bank] == FULL
                   and occupancy < depth and e >= next_beat)
        leaving = pipe[-1]
        # updates at edge e
        if result_go:
            queue.popleft()
            outputs += 1
            if outputs == total:
                break
        if leaving is not None:
            queue.append(e + FIFO_LATENCY)
            if leaving[1]:
                bank[leaving[0]] = EMPTY
        occupancy += int(data_go) - int(result_go)
        new = None
        if data_go:
            next_beat = e + beat_cycles
            beat_in_tile += 1
            last = beat_in_tile == tile_sizes[data_tile]
            new = (use_bank, last)
            if last:
                bank[use_bank] = BUSY
                use_bank ^= 1
                data_tile += 1
                beat_in_tile = 0
        if filled is not None and filled[1] == e:    # a cycle after its last part
            bank[filled[0]] = FULL
            filled = None
        if weights_go:
            next_weight = e + weight_cycles
            if load_row == rows - 1:
                filled = (load_bank, e + weight_cycles)
                load_bank ^= 1
                load_row = 0
                weight_tiles += 1
            else:
                load_row += 1
        pipe = [new] + pipe[:-1]
        e += 1
    cycles = e + 1
    useful = sum(u * t for u, t in zip(used_cells or [rows * cols] * len(tile_sizes),
                                       tile_sizes))
    used = sum(used_cells) if used_cells is not None else rows * cols * len(tile_sizes)
    return CycleReport(cycles=cycles, tiles=len(tile_sizes), beats=total, useful_macs=useful,
                       overall_util=useful / (cycles * rows * cols),
                       mapping_efficiency=used / (len(tile_sizes) * rows * cols), **spent)
