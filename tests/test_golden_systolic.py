"""golden.systolic: the array's functional model and cycle model."""

import numpy as np
import pytest

from golden.column_combining import pack
from golden.systolic import cycle_model, latency, make_tiles, output_stage, run_layer, wrap


def test_wrap_is_twos_complement():
    assert wrap([127, 128, -129, 255], 8).tolist() == [127, -128, 127, -1]


def test_output_stage_is_relu_shift_and_saturation():
    acc = np.array([-5, 0, 2047, 2048, 4095, 1 << 20])
    assert output_stage(acc, 4, 8).tolist() == [0, 0, 127, 128, 255, 255]
    assert output_stage(np.array([-1]), 0, 8).tolist() == [0]


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
    # edges 0,1; data at 2..11; the last result is taken at 20.
    assert cycle_model([10], rows=2, cols=3, out_stage=False).cycles == 21
    assert latency(2, 3, True) == 11
    # Tile 2's weights load during tile 1 (edges 2,3) and its beats follow at 12..21.
    # Tile 3's wait for bank 0, free once tile 1's last beat (accepted at 11) leaves the
    # cells at edge 18: they load at 19,20, in time for its beats at 22..31; the last
    # result is taken 9 edges later, at 40.
    report = cycle_model([10, 10, 10], rows=2, cols=3, out_stage=False)
    assert report.cycles == 41 and report.beats == 30 and report.tiles == 3
    assert report.overall_util == pytest.approx(30 * 6 / (41 * 6))
    # Short tiles: tile 3's weights wait for tile 1 (accepted at 2) to leave the cells at
    # 9; they load at 10,11, its beat enters at 12 and leaves the FIFO at 21.
    assert cycle_model([1, 1, 1], rows=2, cols=3, out_stage=False).cycles == 22


def test_bitserial_cycle_model_by_hand():
    # 4-bit serial MACs: a beat every 4 cycles and 3 more product steps (10 register
    # stages). Data at 2, 6, ..., 38; the last leaves the cells at 48 and the FIFO at 50.
    assert cycle_model([10], rows=2, cols=3, out_stage=False, beat_cycles=4).cycles == 51
    assert latency(2, 3, False, beat_cycles=4) == 12


def test_cycle_model_rejects_empty_tiles():
    with pytest.raises(ValueError, match="at least one data beat"):
        cycle_model([3, 0], rows=2, cols=2, out_stage=False)
