# amaranth: UnusedElaboratable=no
"""The column-combined array in cocotb against golden: outputs and cycle counts.

Each configuration runs twice on one compiled model: with random idle cycles and
backpressure (every output compared), and without (cycles must equal the cycle model; the
testbench asserts it).
"""

import pytest

from codnn.hw.systolic import ColumnCombinedArray
from codnn.sim.runner import simulate
from codnn.synth.devices import get_device

#: The larger bit-serial and ECP5 configurations run in ``make test-long``.
LONG = pytest.mark.long
ARRAY_KEYS = ("rows", "cols", "alpha", "weight_bits", "data_bits", "data_signed",
              "acc_bits", "mac", "out_bits", "requant")


def _run(simulator, seed, *, stalls, vectors, **config):
    config = {"weight_bits": 8, "data_bits": 8, "data_signed": False, "acc_bits": 32,
              "mac": "parallel", "out_bits": None, "shift": 6, "requant": "shift",
              "gamma": 0.5, "vectors": vectors,
              "idle": 0.3 if stalls else 0.0, "backpressure": 0.4 if stalls else 0.0,
              **config}
    dut = ColumnCombinedArray(**{k: config[k] for k in ARRAY_KEYS})
    print(f"seed={seed} config={config}")
    platform = get_device(config["device"]) if "device" in config else None
    return simulate(dut, top="systolic", testbench="codnn.sim.tb_systolic", simulator=simulator,
                    config=config, seed=seed, platform=platform).report


CONFIGS = {
    # the dense baseline, a single cell
    "1x1-dense": dict(rows=1, cols=1, alpha=1, layer_rows=3, layer_cols=5, sparsity=0.3),
    # non-square, signed data, output stage, multi-tile
    "4x8-a4-signed": dict(rows=4, cols=8, alpha=4, data_signed=True, out_bits=8,
                          layer_rows=9, layer_cols=70, sparsity=0.75),
    # tall-narrow, alpha 8, a realistic magnitude-pruned layer over many tiles, a shift
    # per output channel (0 and 23, the extremes, in one tile; 13 for the third block)
    "8x3-a8-layer": dict(rows=8, cols=3, alpha=8, layer_rows=20, layer_cols=300,
                         sparsity=0.85, acc_bits=24, out_bits=8,
                         shift=[13, 0, 23, 9, 12, 14, 1, 16] + [11, 12, 13, 10, 15, 0, 22, 8]
                         + [13] * 4),
    # alpha 2, small widths, accumulator wrap-around and saturation, per-row shifts
    "3x2-a2-narrow": dict(rows=3, cols=2, alpha=2, weight_bits=4, data_bits=4,
                          acc_bits=10, out_bits=4, shift=[2, 9, 0, 5, 2, 1, 3],
                          layer_rows=7, layer_cols=19, sparsity=0.5),
    # bit-serial MACs: unsigned alpha 4 with an output stage (a shift per output channel),
    # signed alpha 8 wrapping
    "4x8-a4-bitserial": dict(rows=4, cols=8, alpha=4, mac="bitserial", out_bits=8,
                             shift=[6, 11, 31, 0, 9, 10, 5, 8, 12], layer_rows=9,
                             layer_cols=70, sparsity=0.75),
    "8x3-a8-bitserial-signed": dict(rows=8, cols=3, alpha=8, mac="bitserial",
                                    data_signed=True, data_bits=5, acc_bits=14,
                                    layer_rows=20, layer_cols=200, sparsity=0.85),
    # as synthesized for the ECP5-25F: 28 cells on MULT18X18D blocks (simulated with
    # sim/primitives/MULT18X18D.v), the other 4 with pipelined LUT multipliers
    "4x8-a4-signed-ecp5": dict(rows=4, cols=8, alpha=4, data_signed=True, out_bits=8,
                               shift=9, layer_rows=9, layer_cols=70, sparsity=0.75,
                               device="ecp5-25k"),
    "8x4-a2-ecp5": dict(rows=8, cols=4, alpha=2, data_bits=7, weight_bits=6, acc_bits=20,
                        layer_rows=17, layer_cols=40, sparsity=0.6, device="ecp5-25k"),
    # the output stage multiplying before it shifts: a multiplier and a shift per output
    # channel, 0, 1, 2 and 65535 among the multipliers, shifts 0 to 47 (past the
    # accumulator's 32 bits), over three row blocks; parallel, and bit-serial with a row
    # each in its own output FIFO
    "4x3-a2-multiplier": dict(rows=4, cols=3, alpha=2, out_bits=8, requant="multiplier",
                              shift=[20, 8, 47, 0, 24, 31, 33, 16, 19],
                              multiplier=[65535, 1, 65535, 0, 40000, 2, 65535, 32768, 777],
                              layer_rows=9, layer_cols=30, sparsity=0.6),
    "5x2-a2-bitserial-multiplier": dict(rows=5, cols=2, alpha=2, mac="bitserial", out_bits=8,
                                        requant="multiplier", shift=[21, 9, 40, 26, 3, 18],
                                        multiplier=[50001, 3, 65535, 60000, 1, 12345],
                                        layer_rows=6, layer_cols=20, sparsity=0.5),
    # 1-bit data: a beat a cycle, nine row sums in flight on nine lanes
    "1x1-bitserial-1bit": dict(rows=1, cols=1, alpha=2, mac="bitserial", data_bits=1,
                               layer_rows=3, layer_cols=5, sparsity=0.3),
    # a row sum no wider than a beat (one lane), signed, wrapping, saturating
    "3x2-a2-bitserial-narrow": dict(rows=3, cols=2, alpha=2, mac="bitserial",
                                    weight_bits=4, data_bits=6, data_signed=True,
                                    acc_bits=6, out_bits=4, shift=2, layer_rows=7,
                                    layer_cols=19, sparsity=0.5),
}


@pytest.mark.parametrize("name,simulator", [
    ("1x1-dense", "verilator"), ("4x8-a4-signed", "verilator"),
    pytest.param("8x3-a8-layer", "verilator", marks=LONG), ("3x2-a2-narrow", "icarus"),
    pytest.param("1x1-dense", "icarus", marks=LONG),
    pytest.param("4x8-a4-bitserial", "verilator", marks=LONG),
    pytest.param("8x3-a8-bitserial-signed", "verilator", marks=LONG),
    pytest.param("1x1-bitserial-1bit", "verilator", marks=LONG),
    pytest.param("8x3-a8-bitserial-signed", "icarus", marks=LONG),
    ("3x2-a2-bitserial-narrow", "verilator"), ("4x3-a2-multiplier", "verilator"),
    ("5x2-a2-bitserial-multiplier", "verilator"),
    pytest.param("4x8-a4-signed-ecp5", "verilator", marks=LONG), ("8x4-a2-ecp5", "icarus"),
])
def test_array_equals_golden(name, simulator, request):
    if simulator == "icarus":
        request.getfixturevalue("icarus")
    config = CONFIGS[name]
    stalled = _run(simulator, 11, stalls=True, vectors=13, **config)
    steady = _run(simulator, 12, stalls=False, vectors=13, **config)
    assert steady["cycles"] == steady["model_cycles_without_stalls"]
    # Stalls never speed a run up; a beat every few cycles may absorb them all, but the
    # backpressure must have held results.
    assert stalled["cycles"] >= stalled["model_cycles_without_stalls"]
    assert stalled["results_held"] > 0 and steady["results_held"] == 0
    assert steady["tiles"] >= 1 and steady["beats"] == 13 * steady["tiles"]


@pytest.mark.parametrize("name", [pytest.param("4x8-a4-bitserial", marks=LONG),
                                  pytest.param("8x3-a8-bitserial-signed", marks=LONG),
                                  pytest.param("8x3-a8-layer", marks=LONG),
                                  "3x2-a2-bitserial-narrow",
                                  pytest.param("4x3-a2-multiplier", marks=LONG)])
def test_reset_in_flight_then_a_fresh_layer(name):
    # A reset (the host link's RESET, a board's button) with the beats of three tiles in
    # the array, results held in the FIFOs, and later tiles' weights loading; then the
    # whole layer again from its first weight, every result and the cycle count checked.
    config = CONFIGS[name]
    report = _run("verilator", 13, stalls=False, vectors=13, reset_in_flight=2 * 13 + 5,
                  **config)
    assert report["cycles"] == report["model_cycles_without_stalls"]
    stalled = _run("verilator", 14, stalls=True, vectors=13, reset_in_flight=2 * 13 + 5,
                   **config)
    assert stalled["cycles"] >= stalled["model_cycles_without_stalls"]
