"""Map each layer of an integer network onto a column-combined array and onto a dense
array of the same size (the paper's baseline: ``alpha = 1``, the same pruned weights
unpacked), with the figures of ``codnn.golden.systolic``'s cycle model.

A layer runs as one stream of tiles: row blocks of ``rows`` filters outer, column blocks of
``cols`` groups inner; a tile's weights load into the free one of the two banks while the
other computes (double buffering), and every column block after the first takes the
previous block's results as its partial sums (``psum_in``), so a layer taller or wider
than the array needs no host work. A convolution's vectors are its im2col columns, one per
output position. On the TQ array a column is a group of ``g`` input channels, and a
vector takes ``alpha`` cycles (``codnn.golden.tq_array.tq_timing``); on the column-combined
TQ array (a TQ layer packed with ``alpha > 1``) a column is a group of ``g`` packed
columns, whose cell takes their ``g * alpha`` data values and a select with each weight
term. The host pools,
flattens, adds residuals and pads; those steps are listed
with no cycles (they are not on the array).
"""

from dataclasses import dataclass

import numpy as np

from codnn.golden.column_combining import PackedLayer
from codnn.golden.network import ArrayLayer
from codnn.golden.systolic import cycle_model, mac_timing, make_tiles, select_bits
from codnn.golden.term_quant import group
from codnn.golden.tq_array import term_slot_bits, tq_timing

__all__ = ["LayerSchedule", "dense_layer", "schedule_network"]


@dataclass(frozen=True)
class LayerSchedule:
    """One layer on the packed array (``cycles``, ``tiles``, ...) and on the dense one
    (``dense_*``). Bytes are what the streams carry: weights with their selects, data
    (``cols x alpha`` values a vector) and partial sums in (``rows`` accumulators a
    vector); ``column_fill`` is each used array column's share of filled cells;
    ``spent`` where the cycles go (``codnn.golden.systolic.CycleReport``: loading, streaming,
    draining)."""

    name: str
    kind: str
    filters: int
    columns: int
    groups: int
    vectors: int
    tiles: int
    row_blocks: int
    col_blocks: int
    cycles: int
    macs: int
    utilization: float
    weight_bytes: int
    data_bytes: int
    psum_bytes: int
    column_fill: tuple
    dense_tiles: int
    dense_cycles: int
    dense_utilization: float
    spent: dict

    @property
    def macs_per_cycle(self):
        return self.macs / self.cycles

    @property
    def tile_ratio(self):
        return self.tiles / self.dense_tiles

    @property
    def cycle_ratio(self):
        return self.cycles / self.dense_cycles


def dense_layer(packed):
    """The dense baseline of a packed layer: its pruned weights, one column per group."""
    F = packed.dense()
    return PackedLayer(P=F, idx=np.zeros(F.shape, dtype=np.int64),
                       groups=tuple((c,) for c in range(F.shape[1])), alpha=1, gamma=0.0,
                       columns=F.shape[1], pruned=0)


def _run(packed, vectors, *, rows, cols, alpha, mac, data_bits, weight_bits, acc_bits,
         requant):
    tiles = make_tiles(packed, rows, cols, alpha)
    used = [tile.used_cells for tile in tiles]
    # The array has its output stage whether or not a layer uses it (the logits read the
    # accumulators beside it), so every layer takes its cycles.
    report = cycle_model([vectors] * len(tiles), rows=rows, cols=cols, out_stage=True,
                         used_cells=used, requant=requant,
                         **mac_timing(mac, data_bits=data_bits, weight_bits=weight_bits,
                                      cols=cols, acc_bits=acc_bits))
    return tiles, report, {
        "weight_bytes": len(tiles) * rows * cols * (weight_bits + select_bits(alpha)) // 8,
        "data_bytes": report.beats * cols * alpha * data_bits // 8,
        "psum_bytes": report.beats * rows * acc_bits // 8}


def _tq_groups(layer):
    """A TQ layer's weight groups, ``N x G x g``: of the layer's columns, or on the
    column-combined TQ array of its packed columns."""
    packed = layer.packed
    return group(packed.P if packed.alpha > 1 else packed.dense(), layer.tq.g)


def _run_tq(layer, vectors, *, rows, cols, acc_bits, requant):
    """The TQ array's tiles (row blocks x column blocks of ``g``-column groups) and cycle
    report; a cell is used where its group has a nonzero weight. On the column-combined
    TQ array each term slot carries a select too, and each cell ``g * alpha`` data
    values a beat."""
    tq, streams = layer.tq, layer.packed.alpha
    nonzero = _tq_groups(layer).any(axis=2)                              # N x G
    N, G = nonzero.shape
    used = [int(nonzero[i:i + rows, j:j + cols].sum())
            for i in range(0, N, rows) for j in range(0, max(G, 1), cols)]
    report = cycle_model([vectors] * len(used), rows=rows, cols=cols, out_stage=True,
                         used_cells=used, requant=requant,
                         **tq_timing(tq.alpha, tq.beta, tq.mag_bits))
    slot_bits = term_slot_bits(tq.mag_bits, tq.g) + (select_bits(streams) if streams > 1
                                                     else 0)
    return report, {
        "weight_bytes": len(used) * rows * -(-cols * tq.alpha * slot_bits // 8),
        "data_bytes": report.beats * -(-cols * tq.g * streams * (tq.mag_bits + 1) // 8),
        "psum_bytes": report.beats * rows * acc_bits // 8}


def _vectors(layer, shapes):
    """Vectors per image of an array layer: its output positions."""
    shape = shapes[layer.output]
    return int(np.prod(shape[1:])) if len(shape) == 3 else 1


def schedule_network(network, *, rows, cols, alpha, mac="parallel", data_bits=8,
                     weight_bits=8, batch=1):
    """Per-layer schedules of ``network`` for ``batch`` images, and the host's steps.

    Returns ``(layers, host)``: a ``LayerSchedule`` per array layer, and ``(name, kind)``
    of every host step."""
    q = np.zeros((1, *network.input_shape), dtype=np.int64)
    shapes = {name: value.shape[1:] for name, value in network.run(q, keep=True).items()}
    layers, host = [], []
    common = {"rows": rows, "cols": cols, "mac": mac, "data_bits": data_bits,
              "weight_bits": weight_bits, "acc_bits": network.acc_bits,
              "requant": network.requant}
    for step in network.steps:
        if not isinstance(step, ArrayLayer):
            host.append((step.name, type(step).__name__))
            continue
        vectors = _vectors(step, shapes) * batch
        if step.tq is None:
            tiles, report, moved = _run(step.packed, vectors, alpha=alpha, **common)
            blocks = (1 + max(t.row_block for t in tiles), 1 + max(t.col_block for t in tiles))
            groups = len(step.packed.groups)
        else:
            report, moved = _run_tq(step, vectors, rows=rows, cols=cols,
                                    acc_bits=network.acc_bits, requant=network.requant)
            groups = _tq_groups(step).shape[1]
            blocks = (-(-step.packed.rows // rows), max(1, -(-groups // cols)))
        _, dense, _ = _run(dense_layer(step.packed), vectors, alpha=1, **common)
        filled = np.count_nonzero(step.packed.P, axis=0) / step.packed.rows \
            if step.tq is None else np.zeros(0)
        layers.append(LayerSchedule(
            name=step.name, kind="conv" if step.kernel else "dense",
            filters=step.packed.rows, columns=step.packed.columns,
            groups=groups,
            vectors=vectors, tiles=report.tiles, row_blocks=blocks[0], col_blocks=blocks[1],
            cycles=report.cycles,
            macs=report.useful_macs, utilization=report.overall_util,
            column_fill=tuple(float(f) for f in filled), dense_tiles=dense.tiles,
            dense_cycles=dense.cycles, dense_utilization=dense.overall_util,
            spent={k: getattr(report, k) for k in ("loading", "streaming", "draining")},
            **moved))
    return layers, host
