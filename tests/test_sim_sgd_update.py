# amaranth: UnusedElaboratable=no
"""SgdUpdate in cocotb on Verilator and Icarus against section 11's golden update
(``codnn.sim.tb_sgd_update``: every float32 class, the settings changed per beat), its
cycles against ``weights + latency``."""

from codnn.hw.bfp import SgdUpdate
from codnn.sim.runner import simulate

SEED = 20261207


def _simulate(simulator, *, weights, idle, backpressure):
    print(f"seed={SEED}")
    return simulate(SgdUpdate(), top="sgd_update", testbench="codnn.sim.tb_sgd_update",
                    simulator=simulator, seed=SEED,
                    config={"weights": weights, "idle": idle, "backpressure": backpressure,
                            "latency": SgdUpdate.latency})


def test_verilator_under_stalls():
    assert _simulate("verilator", weights=3000, idle=0.3,
                     backpressure=0.3).report["weights"] == 3000


def test_icarus_matches_the_cycle_model(icarus):
    # With no stalls the testbench asserts cycles == weights + latency itself.
    result = _simulate(icarus, weights=500, idle=0.0, backpressure=0.0)
    assert result.report["cycles"] == 500 + SgdUpdate.latency
