# amaranth: UnusedElaboratable=no
"""The network engine in cocotb on both simulators: a compiled network run from its
program and weight image, every output equal to golden and every run's cycles equal to
the model (sim/tb_network_engine.py), a reset in the middle of a run."""

import numpy as np
import pytest

from codnn.golden.network_program import FETCH_CYCLES, HEADER_CYCLES, EngineConfig
from codnn.golden.workloads import (bottleneck_network, padded_network, pooled_network,
                                    projection_network, residual_network)
from codnn.hw.network import NetworkEngine
from codnn.model.batch_schedule import SCHEDULES, compile_batch
from codnn.model.compile import compile_network
from codnn.model.engine_rtl import run_on_engine
from codnn.sim.runner import simulate

SEED = 20261129


def _engine(rows, cols, alpha, mac):
    return EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=512,
                        acc_words=128, psum_words=64)


def _run(simulator, tmp_path, *, rows, cols, alpha, mac, images=2, workload=residual_network,
         engine=None, **config):
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED} rows={rows} cols={cols} alpha={alpha} mac={mac} {config}")
    network = workload(rng, alpha=min(alpha, 2))
    compiled = compile_network(network, engine or _engine(rows, cols, alpha, mac))
    x = rng.integers(0, 256, (images, *network.input_shape))
    x[0, 1] = 255
    if not config:
        return run_on_engine(compiled, x, simulator=simulator, seed=SEED), compiled
    return _simulate(simulator, tmp_path, compiled, x, **config), compiled


def _simulate(simulator, tmp_path, compiled, x, **config):
    """The testbench's report for ``x`` run through ``compiled`` with ``config`` (a reset
    in flight, an external memory...)."""
    np.save(tmp_path / "weights.npy", np.frombuffer(compiled.image, np.uint8))
    np.save(tmp_path / "inputs.npy", x)
    run = {"program": compiled.program.to_dict(), "image": str(tmp_path / "weights.npy"),
           "inputs": str(tmp_path / "inputs.npy"), **config}
    port = config.get("weight_port", "onchip")
    return simulate(NetworkEngine.for_program(compiled.program, weight_port=port),
                    top="network_engine",
                    testbench="codnn.sim.tb_network_engine", simulator=simulator,
                    config=run, seed=SEED).report


def test_engine_on_verilator_with_a_reset_in_flight(tmp_path):
    # Reset a few hundred cycles into the first image (a layer's tiles in the array, its
    # partial sums half written), then two images from fresh starts.
    report, compiled = _run("verilator", tmp_path, rows=4, cols=4, alpha=2, mac="bitserial",
                            reset_after=700)
    assert report["resets"] == 1 and report["cycles"] == [compiled.cycles] * 2


def test_windows_padded_unequally_before_and_after_on_verilator(tmp_path):
    # A stride-2 convolution padded (0, 1) (TensorFlow's SAME), ceil-mode max and average
    # pooling, a convolution padded on two sides of four: every output equal to golden,
    # cycles to the model, on six rows (more than the four of most tests), with a reset
    # a few hundred cycles into the first image and two images from fresh starts after.
    report, compiled = _run("verilator", tmp_path, rows=6, cols=3, alpha=2, mac="parallel",
                            workload=padded_network, reset_after=400)
    paddings = [s.padding for s in compiled.program.steps if s.op in ("layer", "pool")]
    assert paddings[:4] == [(0, 1), (0, 1), (1, 0, 0, 1), (1, 0)]
    assert report["resets"] == 1 and report["cycles"] == [compiled.cycles] * 2


def test_fused_pooling_on_verilator_with_a_reset_in_flight(tmp_path):
    # Convolutions with their pooling fused, on six rows (more than four, lanes of two
    # blocks), parallel MACs, maps of odd sides: a reset a few hundred cycles into the
    # first image (inside the first layer's pooled writes, its line of pairs half
    # filled), then two images from fresh starts, equal to golden in the model's cycles.
    engine = EngineConfig(rows=6, cols=3, alpha=2, mac="parallel", act_words=1024,
                          acc_words=16, psum_words=256)
    report, compiled = _run("verilator", tmp_path, rows=6, cols=3, alpha=2, mac="parallel",
                            workload=pooled_network, engine=engine, reset_after=400)
    assert [s.pool for s in compiled.program.steps] == [True, True, False]
    first = HEADER_CYCLES + compiled.costs[0].cycles
    assert 400 < first, first                       # the reset lands in the first layer
    assert report["resets"] == 1 and report["cycles"] == [compiled.cycles] * 2


@pytest.mark.long
def test_engine_on_icarus(tmp_path, icarus):
    report, compiled = _run(icarus, tmp_path, rows=3, cols=2, alpha=2, mac="parallel",
                            images=1)
    assert report["cycles"] == [compiled.cycles]


@pytest.mark.parametrize("step", ["projection", "body_c"])
def test_resnet_blocks_on_icarus_with_a_reset_in_a_fused_add(tmp_path, icarus, step):
    # Adds of a branch's accumulators, fused into a layer: a projection block's (its
    # operand the other branch's accumulators) and an identity block's (over the
    # identity's activations). The first run is reset four cycles before the end of the
    # layer the add is fused into (its last words' products in flight), then two images
    # run from fresh starts.
    reset = _cycles_into(projection_network, _engine(4, 3, 2, "parallel"), step, -4)
    report, compiled = _run(icarus, tmp_path, rows=4, cols=3, alpha=2, mac="parallel",
                            workload=projection_network, reset_after=reset)
    assert any(s.name == step and s.add_b is not None for s in compiled.program.steps)
    assert report["resets"] == 1 and report["cycles"] == [compiled.cycles] * 2


def _cycles_into(workload, engine, name, into):
    """Cycles from a run's start to ``into`` cycles into step ``name`` of ``workload``'s
    program (past its descriptor), or with ``into`` negative that many before its end."""
    costs = compile_network(workload(np.random.default_rng(SEED)), engine).costs
    k = next(j for j, c in enumerate(costs) if c.name == name)
    start = HEADER_CYCLES + sum(c.cycles for c in costs[:k])
    return start + (FETCH_CYCLES + into if into >= 0 else costs[k].cycles + into)


@pytest.mark.long
def test_linear_bottlenecks_on_icarus_with_a_reset_in_a_signed_add(tmp_path, icarus):
    # Six rows (an output FIFO per row, words of six lanes): adds with signed operands and
    # results and a 3 x 3 padded with the code 128. The first run is reset ten cycles
    # into the add of two signed operands, then two images run from fresh starts.
    into_add = _cycles_into(bottleneck_network, _engine(6, 2, 2, "parallel"), "join_b", 10)
    report, compiled = _run(icarus, tmp_path, rows=6, cols=2, alpha=2, mac="parallel",
                            workload=bottleneck_network, reset_after=into_add)
    assert report["resets"] == 1 and report["cycles"] == [compiled.cycles] * 2


@pytest.mark.long
def test_engine_with_its_weights_in_external_memory_on_verilator(tmp_path):
    # The weight image in cocotbext-axi's AxiRamRead behind the engine's AXI4 read port:
    # words of 10 bytes at a stride of 16, a run of words across a 4 KB page (two
    # bursts). Every output equals golden, every run's cycles the model with the
    # memory's measured latency, and the port's byte counter the weight words read. The
    # first run is reset 700 cycles in (engine and memory share the reset), then two
    # images run from fresh starts.
    report, compiled = _run("verilator", tmp_path, rows=3, cols=5, alpha=2, mac="bitserial",
                            weight_port="axi", reset_after=700)
    latency = report["memory_latency"]
    assert latency > 0 and report["resets"] == 1
    assert report["cycles"] == [report["model_cycles"]] * 2
    assert report["model_cycles"] > compiled.cycles
    assert report["weight_bytes_per_image"] == 16 * compiled.traffic()["weights"] // 10


def test_engine_with_a_stalling_external_memory_on_icarus(tmp_path, icarus):
    # The memory stalls its address and data channels at random: the same outputs.
    report, _ = _run(icarus, tmp_path, rows=4, cols=3, alpha=2, mac="parallel", images=1,
                     weight_port="axi", memory_pauses=True)
    assert report["cycles"][0] >= report["model_cycles"]


@pytest.mark.long
def test_activations_spilled_to_external_memory_on_verilator(tmp_path):
    # A buffer of 150 words for a network whose live tensors need more: the compiler
    # sends a shortcut to external memory (cocotbext-axi's AxiRam on the activation port)
    # and loads it back for its add. Every output equals golden, every run's cycles the
    # model with the memory's measured latencies, and the port's byte counters the
    # compiler's traffic. The first run is reset inside its first store.
    engine = EngineConfig(rows=6, cols=2, alpha=2, mac="parallel", act_words=150,
                          acc_words=128, psum_words=64, spill_words=1024)
    compiled = compile_network(bottleneck_network(np.random.default_rng(SEED)), engine)
    ops = [step.op for step in compiled.program.steps]
    store = ops.index("store")
    into_store = (HEADER_CYCLES + sum(c.cycles for c in compiled.costs[:store])
                  + FETCH_CYCLES + 8)
    report, compiled = _run("verilator", tmp_path, rows=6, cols=2, alpha=2, mac="parallel",
                            workload=bottleneck_network, engine=engine,
                            reset_after=into_store)
    traffic = compiled.traffic()
    assert "load" in ops and report["resets"] == 1
    assert min(report["act_latencies"]) > 0
    assert report["cycles"] == [report["model_cycles"]] * 2
    assert report["spill_bytes"] == [traffic["spill_read"], traffic["spill_written"]] != [0, 0]


@pytest.mark.long
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_batch_schedules_move_the_modelled_bytes_on_verilator(tmp_path, schedule):
    # A batch of 6 images through ResNet-style blocks (adds of accumulators fused into
    # their layers, each for several images at once), its input
    # in cocotbext-axi's AxiRam behind the activation port, the weight image in an
    # AxiRamRead: layer by layer (each layer's sub-batch through every tile, every tensor
    # out and back) and MBS's groups (tensors kept on chip, weights read per smaller
    # sub-batch). Every logit of the batch equals golden, the run's cycles the model, and
    # both ports' byte counters the compiler's traffic; MBS moves fewer bytes in all. The
    # first run is reset inside a layer step of several images, then the batch runs
    # from a fresh start.
    engine = EngineConfig(rows=4, cols=3, alpha=2, mac="parallel", act_words=640,
                          acc_words=128, psum_words=128, spill_words=1 << 16)
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED} schedule={schedule}")
    network = projection_network(rng)
    plans = {s: compile_batch(network, engine, 6, s) for s in SCHEDULES}
    totals = {s: sum(p.compiled.traffic()[k] for k in ("weights", "spill_read",
                                                       "spill_written"))
              for s, p in plans.items()}
    assert totals["mbs"] < totals["layer"], totals
    compiled = plans[schedule].compiled
    assert compiled.program.input.memory == "ext" and compiled.program.images == 6
    # Both blocks' adds fused into their layers, each run for a sub-batch at once.
    assert {s.name for s in compiled.program.steps if s.op == "layer" and s.add_b is not None
            and s.images > 1} == {"projection", "body_c"}
    x = rng.integers(0, 256, (1, 6, *network.input_shape))
    k = next(k for k, s in enumerate(compiled.program.steps) if s.op == "layer"
             and s.images > 1)
    into_step = HEADER_CYCLES + sum(c.cycles for c in compiled.costs[:k]) + FETCH_CYCLES + 60
    report = _simulate("verilator", tmp_path, compiled, x, weight_port="axi",
                       reset_after=into_step)
    assert report["resets"] == 1
    traffic = compiled.traffic()
    word = 2 * engine.cols
    assert report["cycles"] == [report["model_cycles"]]
    assert report["spill_bytes"] == [traffic["spill_read"], traffic["spill_written"]]
    assert report["weight_bytes_per_image"] == traffic["weights"] // word * 8
    assert np.array_equal(report["output"], network.run(x[0]))
