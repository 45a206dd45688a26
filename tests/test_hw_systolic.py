# amaranth: UnusedElaboratable=no
"""The column-combined array's parameters and signature (its behaviour: test_sim_systolic)."""

import re

import pytest
from amaranth.back import verilog

from codnn.golden.systolic import latency, mac_timing
from codnn.hw.systolic import ColumnCombinedArray
from codnn.synth.devices import get_device


def test_signature_widths():
    dut = ColumnCombinedArray(rows=4, cols=8, alpha=4, out_bits=8)
    assert dut.latency == 4 + 8 + 4 + 2 + 2 and dut.sel_bits == 2
    assert dut.fifo_depth == dut.pipeline_depth + 3
    assert len(dut.data.payload.as_value()) == 8 * 4 * 8 + 4 * 32 + 1
    assert len(dut.weights.payload.as_value()) == 8 * 8 + 8 * 2
    assert len(dut.result.payload.as_value()) == 4 * 32 + 4 * 8 + 1
    # rows + cols + input register + 3 product steps + FIFO
    assert ColumnCombinedArray(rows=1, cols=1).latency == 1 + 1 + 1 + 3 + 2


def test_bitserial_takes_data_bits_cycles_per_beat():
    dut = ColumnCombinedArray(rows=2, cols=3, mac="bitserial", data_bits=4)
    # rows + cols + input register + edge register + a 14-bit row sum that leaves
    # bit-serially and 2 steps to the result + FIFO
    assert dut.beat_cycles == 4 and dut.latency == 2 + 3 + 1 + 1 + 14 + 2 + 2
    assert (dut.word_bits, dut.lanes) == (14, 4)
    widths = {"weight_bits": 8, "cols": 3, "acc_bits": 32}
    assert dut.latency == latency(2, 3, False,
                                  **mac_timing("bitserial", data_bits=4, **widths))
    assert ColumnCombinedArray(rows=2, cols=3).latency == latency(
        2, 3, False, **mac_timing("parallel", data_bits=8, **widths))
    assert ColumnCombinedArray(rows=2, cols=3).beat_cycles == 1


@pytest.mark.parametrize("kwargs,error,message", [
    ({"rows": 0, "cols": 1}, TypeError, "Row count must be a positive integer, not 0"),
    ({"rows": 1, "cols": -2}, TypeError, "Column count must be a positive integer, not -2"),
    ({"rows": 1, "cols": 1, "alpha": 1.5}, TypeError, "Alpha must be a positive integer"),
    ({"rows": 1, "cols": 1, "weight_bits": 1}, ValueError, "Weight width must be at least 2"),
    ({"rows": 1, "cols": 1, "acc_bits": 1}, ValueError, "Accumulator width must be at least 2"),
    ({"rows": 1, "cols": 1, "data_bits": 0}, TypeError, "Data width must be a positive"),
    ({"rows": 1, "cols": 1, "data_signed": 1}, TypeError, "Data signedness must be a bool"),
    ({"rows": 1, "cols": 1, "mac": "systolic"}, ValueError, "MAC kind must be one of"),
    ({"rows": 1, "cols": 1, "out_bits": 40}, ValueError, "must not exceed the accumulator"),
    ({"rows": 1, "cols": 1, "out_bits": 0}, TypeError, "Output width must be a positive"),
])
def test_invalid_parameters(kwargs, error, message):
    with pytest.raises(error, match=message):
        ColumnCombinedArray(**kwargs)


def test_ecp5_cells_take_dsp_blocks_then_lut_multipliers():
    # ecp5-25k has 28 MULT18X18D: a 4 x 8 array puts 28 products on them, 4 in LUTs.
    text = verilog.convert(ColumnCombinedArray(rows=4, cols=8), name="systolic",
                           platform=get_device("ecp5-25k"), emit_src=False)
    assert len(re.findall(r"^\s*MULT18X18D\b", text, re.MULTILINE)) == 28
    assert len(re.findall(r"reg \[\d+:0\] prod_r\d_c\d_part0\b", text)) == 4
    for device in ("ice40-up5k", None):       # one multiplier per cell, mapped by yosys
        text = verilog.convert(ColumnCombinedArray(rows=2, cols=2), name="systolic",
                               platform=device and get_device(device), emit_src=False)
        assert "MULT18X18D" not in text and "_part0" not in text
        assert len(re.findall(r"\* \$signed", text)) == 4
