# amaranth: UnusedElaboratable=no
"""BlockAccumulate in cocotb on Verilator and Icarus against section 11's golden
(``codnn.sim.tb_block_accumulate``: exponents over their whole range, every width,
overflowing, subnormal and tied terms, sums of every class), its cycles against
``pairs + latency``."""

import pytest

from codnn.hw.bfp import BlockAccumulate
from codnn.sim.runner import simulate

SEED = 20261207


def _simulate(simulator, *, g, m, pairs, idle, backpressure):
    dut = BlockAccumulate(g=g, m=m)
    print(f"seed={SEED}")
    return simulate(dut, top="block_accumulate", testbench="codnn.sim.tb_block_accumulate",
                    simulator=simulator, seed=SEED,
                    config={"g": g, "m": m, "pairs": pairs, "idle": idle,
                            "backpressure": backpressure, "latency": dut.latency})


def test_verilator_under_stalls_and_the_cycle_model():
    assert _simulate("verilator", g=16, m=8, pairs=3000, idle=0.3,
                     backpressure=0.3).report["pairs"] > 3000
    result = _simulate("verilator", g=16, m=8, pairs=1000, idle=0.0, backpressure=0.0)
    assert result.report["cycles"] == result.report["pairs"] + BlockAccumulate().latency


@pytest.mark.parametrize("g,m", [(1, 2), (5, 4)])
def test_icarus_other_shapes(icarus, g, m):
    result = _simulate(icarus, g=g, m=m, pairs=300, idle=0.0, backpressure=0.0)
    assert result.report["cycles"] == result.report["pairs"] + BlockAccumulate(g=g,
                                                                               m=m).latency
