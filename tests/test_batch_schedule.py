"""Batch programs (codnn.model.batch_schedule): a batch through the network engine's
program layer by layer or in MBS groups equals the integer network image for image, the
binary form keeps the batch, the bytes follow the schedule, and what cannot be is
refused in one line (the RTL runs are in tests/test_sim_network.py)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from codnn.cli import main
from codnn.golden.network import Flatten
from codnn.golden.network_program import (EngineConfig, LayerStep, ProgramError,
                                          decode_program, encode_program, run_program)
from codnn.golden.program_format import HEADER_WORDS, STEP_WORDS
from codnn.golden.workloads import projection_network, residual_network
from codnn.model.batch_schedule import SCHEDULES, compile_batch
from codnn.model.compile import CompileError, compile_network, fuse_steps

SEED = 20261128
ENGINE = EngineConfig(rows=4, cols=3, alpha=2, act_words=1024, acc_words=256,
                      psum_words=256, spill_words=1 << 20)


def _bytes(compiled):
    t = compiled.traffic()
    return t["weights"] + t["spill_read"] + t["spill_written"]


@pytest.mark.parametrize("workload", [residual_network, projection_network])
@pytest.mark.parametrize("images", [1, 7])
def test_batch_programs_equal_the_network(workload, images):
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = workload(rng)
    x = rng.integers(0, 256, (images, *network.input_shape))
    x[0, 0] = 255
    single = compile_network(network, ENGINE)
    for schedule in SCHEDULES:
        plan = compile_batch(network, ENGINE, images, schedule)
        program = plan.compiled.program
        assert plan.compiled.image == single.image            # one weight image for all
        got = run_program(program, plan.compiled.image, x if images > 1 else x[0])
        assert np.array_equal(got.reshape(images, -1), network.run(x).reshape(images, -1))
        back = decode_program(encode_program(program))
        assert back.images == images and back.input == program.input
        assert [s.images for s in back.steps if s.op == "layer"] == \
            [s.images for s in program.steps if s.op == "layer"]
        # Every group's layers run its sub-batches; the groups cover every step once.
        assert [n for names in plan.names for n in names] == [
            s.name for s in fuse_steps(network).steps if not isinstance(s, Flatten)]
        layers = [s for s in program.steps if isinstance(s, LayerStep)]
        assert sum(s.images for s in layers) == images * len(network.array_layers)
    if images > 1:
        layer, mbs = (compile_batch(network, ENGINE, images, s).compiled for s in SCHEDULES)
        assert _bytes(mbs) < _bytes(layer)
        assert mbs.traffic()["spill_written"] < layer.traffic()["spill_written"]


def test_layer_by_layer_reads_weights_once_per_sub_batch():
    # With room for the whole batch, layer by layer reads each layer's weights once for
    # the batch: the weight bytes of one image's program, and every tensor between
    # groups goes out once and comes back once per reader.
    rng = np.random.default_rng(SEED)
    network = residual_network(rng)
    engine = dataclasses.replace(ENGINE, act_words=4096, psum_words=1024)
    single = compile_network(network, engine)
    plan = compile_batch(network, engine, 4, "layer")
    assert all(g.sub_batch == 4 for g in plan.groups)
    assert plan.compiled.traffic()["weights"] == single.traffic()["weights"]
    t = plan.compiled.traffic()
    assert t["spill_read"] > t["spill_written"] > 0


def test_bad_batches_are_refused_in_one_line():
    network = residual_network(np.random.default_rng(SEED))
    for images, message in ((0, "a batch is 1..256 images, not 0"),
                            (257, "a batch is 1..256 images, not 257"),
                            (True, "a batch is 1..256 images, not True")):
        with pytest.raises(CompileError, match=message):
            compile_batch(network, ENGINE, images)
    with pytest.raises(CompileError, match="schedule must be one of layer, mbs"):
        compile_batch(network, ENGINE, 2, "fifo")
    with pytest.raises(CompileError, match="needs an engine with external activation"):
        compile_batch(network, dataclasses.replace(ENGINE, spill_words=0), 2)
    with pytest.raises(CompileError, match=r"the outputs of 200 images \(600 words\) do "
                                           r"not fit the engine's acc buffer of 128"):
        compile_batch(network, dataclasses.replace(ENGINE, acc_words=128), 200)
    with pytest.raises(CompileError, match="does not fit the engine's buffers"):
        compile_batch(network, dataclasses.replace(ENGINE, act_words=40), 2)


def test_bad_batch_programs_are_refused():
    rng = np.random.default_rng(SEED)
    network = residual_network(rng)
    program = compile_batch(network, ENGINE, 3).compiled
    x = rng.integers(0, 256, (3, *network.input_shape))
    with pytest.raises(ProgramError, match=r"the image has shape \(3, 8, 8\), the program "
                                           r"takes \(3, 3, 8, 8\)"):
        run_program(program.program, program.image, x[0])
    for images, message in ((0, "a program runs 1..256 images, not 0"),
                            (257, "a program runs 1..256 images, not 257")):
        with pytest.raises(ProgramError, match=message):
            run_program(dataclasses.replace(program.program, images=images), program.image,
                        np.zeros((images, *network.input_shape), np.int64))
    small = dataclasses.replace(program.program, engine=dataclasses.replace(
        ENGINE, acc_words=2))
    with pytest.raises(ProgramError, match=r"the header: its output \(words 0..8\) lies past "
                                           r"the acc memory.s 2 words"):
        run_program(small, program.image, x)
    data = bytearray(encode_program(program.program))
    k = next(k for k, s in enumerate(program.program.steps) if s.op == "layer"
             and s.images > 1)
    at = 4 * (HEADER_WORDS + STEP_WORDS * k + 15)
    data[at] ^= 1
    with pytest.raises(ProgramError, match=f"step {k}: image strides"):
        decode_program(bytes(data))


def test_codnn_compile_writes_a_batch_program(tmp_path, capsys):
    # LeNet-5 over a batch of 5 (the 3 check inputs, repeated), MBS's groups: the report
    # gives per-image and per-run figures and the groups; the binary keeps the batch.
    model = Path(__file__).resolve().parent.parent / "benchmarks/models/lenet5_mnist_cc.onnx"
    common = ["compile", str(model), "--calibration", "100", "--check", "3", "--batch", "5"]
    assert main([*common, "--spill-words", "100000", "--acc-words", "64",
                 "--fmax-mhz", "100", "-o", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    batch = report["batch"]
    assert batch["images"] == 5 and batch["schedule"] == "mbs"
    assert report["checked_inputs"] == 5
    assert report["cycles_per_image"] == pytest.approx(batch["cycles_per_run"] / 5)
    assert report["images_per_s"] == pytest.approx(1e8 * 5 / batch["cycles_per_run"])
    assert sum(len(g["steps"]) for g in batch["groups"]) == 5     # the poolings fused
    assert decode_program((tmp_path / "program.bin").read_bytes()).images == 5
    assert main([*common, "-o", str(tmp_path / "bad")]) == 2
    assert "--batch needs --spill-words" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
