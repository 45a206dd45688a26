"""codnn.golden.systolic: the array's functional model and cycle model."""

import numpy as np
import pytest

from codnn.golden.column_combining import pack
from codnn.golden.systolic import (
    REQUANT_BITS,
    cycle_model,
    latency,
    mac_timing,
    make_tiles,
    output_stage,
    run_layer,
    serial_lanes,
    serial_word_bits,
    wrap,
)


def test_wrap_is_twos_complement():
    assert wrap([127, 128, -129, 255], 8).tolist() == [127, -128, 127, -1]


def test_output_stage_is_relu_shift_and_saturation():
    acc = np.array([-5, 0, 2047, 2048, 4095, 1 << 20])
    assert output_stage(acc, 4, 8).tolist() == [0, 0, 127, 128, 255, 255]
    assert output_stage(np.array([-1]), 0, 8).tolist() == [0]


def test_output_stage_takes_a_shift_per_row():
    acc = np.array([[4096, -4096], [4096, 100], [4096, 4096]])
    assert output_stage(acc, [4, 5, 12], 8).tolist() == [[255, 0], [128, 3], [1, 1]]
    assert output_stage(acc[:, 0], [4, 5, 12], 8).tolist() == [255, 128, 1]


def test_output_stage_multiplies_before_the_shift():
    # (acc * m) >> shift, floor, per row; m = 1 is the shift-only stage; the largest
    # multiplier and a negative product saturate as the shift-only stage does.
    acc = np.array([[4096, -4096, 100], [1 << 30, 3, 0]])
    assert output_stage(acc, [12, 20], 8, [3, 40000]).tolist() == [[3, 0, 0], [255, 0, 0]]
    assert output_stage(acc, 4, 8, 1).tolist() == output_stage(acc, 4, 8).tolist()
    m = (1 << REQUANT_BITS) - 1
    assert output_stage(np.array([1000, -1]), 24, 8, m).tolist() == [3, 0]   # 65535000 >> 24
    assert output_stage(np.array([(1 << 31) - 1]), 47, 8, m).tolist() == [0]


@pytest.mark.parametrize("rows,cols,alpha", [(1, 1, 1), (4, 8, 2), (8, 3, 8), (3, 2, 4)])
def test_layer_result_equals_pruned_dense_product(rows, cols, alpha):
    rng = np.random.default_rng(rows * 100 + cols)
    F = np.where(rng.random((10, 30)) < 0.7, 0, rng.integers(-127, 128, (10, 30)))
    packed = pack(F, alpha, 0.5)
    X = rng.integers(0, 256, (30, 6))
    bias = rng.integers(-100, 100, 10)
    per_tile, acc = run_layer(packed, X, rows=rows, cols=cols, acc_bits=32, bias=bias)
    assert np.array_equal(acc, packed.dense() @ X + bias[:, None])
    assert len(per_tile) == len(make_tiles(packed, rows, cols))


def test_accumulator_wraps():
    F = np.array([[127, 127]])
    packed = pack(F, 1, 0)
    _, acc = run_layer(packed, np.array([[255], [255]]), rows=1, cols=2, acc_bits=12)
    assert acc.tolist() == wrap([[127 * 255 * 2]], 12).tolist()


def test_cycle_model_by_hand():
    # rows=2, cols=3: 7 register stages, then 2 through the FIFO: latency 9. Weights at
    # edges 0,1, written at 1,2; data at 3..12; the last result is taken at 21.
    assert cycle_model([10], rows=2, cols=3, out_stage=False).cycles == 22
    assert latency(2, 3, True) == 11
    # Tile 2's weights load during tile 1 (edges 2,3) and its beats follow at 13..22.
    # Tile 3's wait for bank 0, free once tile 1's last beat (accepted at 12) leaves the
    # cells at edge 19: they load at 20,21 and are written by 22, in time for its beats at
    # 23..32; the last result is taken 9 edges later, at 41.
    report = cycle_model([10, 10, 10], rows=2, cols=3, out_stage=False)
    assert report.cycles == 42 and report.beats == 30 and report.tiles == 3
    assert report.overall_util == pytest.approx(30 * 6 / (42 * 6))
    # Short tiles: tile 2's beat waits for its weights (edges 2,3, written by 4) until 5;
    # tile 3's weights wait for tile 1 (accepted at 3) to leave the cells at 10; they load
    # at 11,12, are written by 13, its beat enters at 14 and leaves the FIFO at 23.
    assert cycle_model([1, 1, 1], rows=2, cols=3, out_stage=False).cycles == 24
    # Where the cycles go: waiting for weights (edges 0..2; for [1, 1, 1] also 4 and
    # 6..13), a tile's data going in, the pipeline after the last beat (9 edges).
    spent = [(r.loading, r.streaming, r.draining) for r in (
        cycle_model(t, rows=2, cols=3, out_stage=False) for t in ([10], [10] * 3, [1] * 3))]
    assert spent == [(3, 10, 9), (3, 30, 9), (12, 3, 9)]
    # Parallel MACs: 3 product steps, two more register stages than the default 1.
    assert cycle_model([10], rows=2, cols=3, out_stage=False, product_steps=3).cycles == 24


def test_bitserial_cycle_model_by_hand():
    # 4-bit serial MACs: a beat every 4 cycles and 3 more product steps (10 register
    # stages). Data at 3, 7, ..., 39; the last leaves the cells at 49 and the FIFO at 51.
    assert cycle_model([10], rows=2, cols=3, out_stage=False, beat_cycles=4).cycles == 52
    assert latency(2, 3, False, beat_cycles=4) == 12
    # The bit-serial array: a cycle of edge, and row sums of 8 + 4 + 2 = 14 bits (8-bit
    # weights, 4-bit data, 3 columns) that leave bit-serially, then 2 steps to the result:
    # 16 product steps instead of 4, so everything is 12 + 1 cycles later.
    timing = mac_timing("bitserial", data_bits=4, weight_bits=8, cols=3, acc_bits=32)
    assert timing == {"beat_cycles": 4, "edge_latency": 1, "product_steps": 16}
    assert cycle_model([10], rows=2, cols=3, out_stage=False, **timing).cycles == 52 + 13
    assert latency(2, 3, False, **timing) == 12 + 13


@pytest.mark.parametrize("widths, word, lanes", [
    ((8, 8, 8, 32), 19, 3),       # 8-bit weights and data, 8 columns: 16 + 3 bits
    ((8, 8, 16, 32), 20, 3),
    ((8, 8, 8, 16), 16, 2),       # the accumulator is narrower than the row sum
    ((4, 6, 2, 6), 6, 1),         # a word a beat
    ((8, 1, 1, 32), 9, 9),        # 1-bit data: a beat a cycle, 9 words in flight
])
def test_serial_row_sum_width_and_lanes(widths, word, lanes):
    keys = dict(zip(("weight_bits", "data_bits", "cols", "acc_bits"), widths))
    assert serial_word_bits(**keys) == word and serial_lanes(**keys) == lanes


def test_weight_parts_cycle_model_by_hand():
    # Weights in 3 parts: rows=2 beats at edges 0 and 3, the last part sent at 5 and
    # written by 6; data at 7..16 (4 edges after the one-part case's 3..12); the last
    # result is taken at 25.
    assert cycle_model([10], rows=2, cols=3, out_stage=False, weight_cycles=3).cycles == 26
    # Three tiles: tile 2's weights (edges 6, 9; written by 12) are ready before its beats
    # (17..26); tile 3's wait for tile 1 to leave the cells at 23, load at 24 and 27 and
    # are written by 30, so its beats wait until 31..40; the last result is taken at 49.
    assert cycle_model([10] * 3, rows=2, cols=3, out_stage=False,
                       weight_cycles=3).cycles == 50


def test_cycle_model_rejects_empty_tiles():
    with pytest.raises(ValueError, match="at least one data beat"):
        cycle_model([3, 0], rows=2, cols=2, out_stage=False)
