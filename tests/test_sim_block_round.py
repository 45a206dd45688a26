# amaranth: UnusedElaboratable=no
"""BlockRound in cocotb on Verilator and Icarus against
``codnn.golden.block_float.to_block_float`` (``codnn.sim.tb_block_round``), its cycles
against ``blocks + latency``."""

from codnn.hw.bfp import BlockRound
from codnn.sim.runner import simulate

SEED = 20261207


def _simulate(simulator, *, g, m, blocks, idle, backpressure):
    dut = BlockRound(g=g, m=m)
    print(f"seed={SEED}")
    return simulate(dut, top="block_round", testbench="codnn.sim.tb_block_round",
                    simulator=simulator, seed=SEED,
                    config={"g": g, "m": m, "blocks": blocks, "idle": idle,
                            "backpressure": backpressure, "latency": dut.latency})


def test_verilator_under_stalls():
    assert _simulate("verilator", g=16, m=8, blocks=1500, idle=0.3,
                     backpressure=0.3).report["blocks"] == 1500


def test_icarus_matches_the_cycle_model(icarus):
    # With no stalls the testbench asserts cycles == blocks + latency itself.
    result = _simulate(icarus, g=5, m=4, blocks=300, idle=0.0, backpressure=0.0)
    assert result.report["cycles"] == 300 + BlockRound(g=5, m=4).latency
