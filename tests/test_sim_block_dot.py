# amaranth: UnusedElaboratable=no
"""The block floating point dot-product unit in cocotb on Verilator and Icarus against
codnn.golden.block_float.block_dot (the testbench's own edges: zero and cancelling blocks, the
largest sums, exponent extremes, wrapping counters, the rounding mode changed per beat),
and its parameter checks."""

import pytest

from codnn.hw.bfp import BlockDot
from codnn.sim.runner import simulate

SEED = 20261125


def _simulate(simulator, *, g, m, out_m, blocks, idle, backpressure):
    dut = BlockDot(g=g, m=m, out_m=out_m)
    print(f"seed={SEED}")
    return simulate(dut, top="block_dot", testbench="codnn.sim.tb_block_dot",
                    simulator=simulator, seed=SEED,
                    config={"g": g, "m": m, "out_m": out_m, "blocks": blocks, "idle": idle,
                            "backpressure": backpressure, "latency": dut.latency})


def test_verilator_fast_settings_under_stalls():
    result = _simulate("verilator", g=16, m=4, out_m=8, blocks=2000, idle=0.3,
                       backpressure=0.3)
    assert result.report["blocks"] == 2000


@pytest.mark.parametrize("g, m, out_m", [(5, 2, 3), (1, 7, 12), (16, 8, 2)])
def test_icarus_other_shapes_match_the_cycle_model(icarus, g, m, out_m):
    # With no stalls the testbench asserts cycles == blocks + latency itself.
    result = _simulate(icarus, g=g, m=m, out_m=out_m, blocks=400, idle=0.0,
                       backpressure=0.0)
    assert result.report["cycles"] == 400 + BlockDot(g=g, m=m, out_m=out_m).latency


def test_icarus_under_stalls(icarus):
    result = _simulate(icarus, g=16, m=4, out_m=8, blocks=300, idle=0.2, backpressure=0.2)
    assert result.report["blocks"] == 300


def test_latency_and_parameters():
    assert BlockDot().latency == 10 and BlockDot(g=1).latency == 7
    assert BlockDot(g=16, m=4).sum_bits == 12
    with pytest.raises(TypeError, match="Block size"):
        BlockDot(g=0)
    with pytest.raises(ValueError, match="Mantissa width must lie in 1..23"):
        BlockDot(m=24)
    with pytest.raises(ValueError, match="Result mantissa width"):
        BlockDot(out_m=30)
