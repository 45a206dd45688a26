"""The network engine's program: the compiler (codnn.model.compile) and the reference
interpreter (codnn.golden.network_program) against the golden integer network, buffer
allocation, the fit errors, the program file and the command line."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from codnn.cli import main
from codnn.golden.network import Add, Flatten, IntegerNetwork, Pool, TermQuantization
from codnn.golden.network_program import (ADD_WRITE_STEPS, HEADER_CYCLES,
                                          POOL_LINE_WORDS, POOL_WRITE_STEPS,
                                          RESULT_WRITE_STEPS, EngineConfig, GatherTable,
                                          NO_LANE, LayerStep, Program, ProgramError, Region,
                                          bias_bytes, bursts, check_program, decode_program,
                                          encode_program, gather_entries, image_word,
                                          layer_block, read_tile, run_program, step_cycles,
                                          table_words, tile_bytes)
from codnn.golden.program_format import (HEADER, HEADER_WORDS, STEP_WORDS, STEPS, VERSION,
                                         Op, format_table, pack, unpack, unused_bits)
from codnn.golden.systolic import Tile
from codnn.golden.workloads import (bottleneck_network, concat_network, pooled_network,
                                    projection_network, random_layer, residual_network)
from codnn.model.compile import CompileError, compile_network, fit_buffers, largest_buffers
from codnn.model.datasets import load_dataset
from codnn.model.onnx_import import load_onnx
from codnn.model.quantize import quantize_network

SEED = 20261127
MODELS = Path(__file__).resolve().parent.parent / "benchmarks" / "models"


def _check(compiled, network, images):
    for k, image in enumerate(images):
        got = run_program(compiled.program, compiled.image, image)
        want = network.run(image[None])[0]
        assert np.array_equal(got, want), f"image {k}: {got} != {want} (seed {SEED})"


@pytest.mark.parametrize("rows,cols,alpha,mac", [(4, 4, 2, "parallel"), (3, 5, 4, "bitserial"),
                                                 (16, 16, 8, "bitserial")])
def test_residual_network_program_equals_golden(rows, cols, alpha, mac):
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = residual_network(rng)
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=512,
                          acc_words=16, psum_words=64)
    compiled = compile_network(network, engine)
    _check(compiled, network, rng.integers(0, 256, (4, 3, 8, 8)))
    steps = {step.name: step for step in compiled.program.steps}
    assert "flat" not in steps                        # a flatten moves nothing
    assert steps["fc"].src == steps["gap"].dst and steps["fc"].dst.memory == "acc"
    # Live tensors never share words: conv_a's output is read by the add, after conv_b;
    # the add writes over conv_b's output, which nothing reads after it.
    a, b = steps["conv_a"].dst, steps["conv_b"].dst
    assert a.addr + a.words(rows) <= b.addr or b.addr + b.words(rows) <= a.addr
    assert steps["add"].dst in (a, b)
    if rows == 4:
        assert steps["conv_b"].col_blocks > 1 and steps["conv_b"].row_blocks == 2
        assert sum(cost.psum_words for cost in compiled.costs) > 0
    assert compiled.cycles == HEADER_CYCLES + sum(cost.cycles for cost in compiled.costs)
    # The image is whole words of the weight memory (an array row of cells each).
    word = image_word(engine)
    assert len(compiled.image) % word == 0
    assert all(step.weights % word == 0 for step in compiled.program.steps
               if step.op == "layer")


@pytest.mark.parametrize("rows", [4, 3, 16])
def test_branches_of_accumulators_compile_to_fused_adds(rows):
    # ResNet's blocks as quantized: each branch's last layer leaves its accumulators, and
    # the add is fused into the layer: a projection block's into its later layer (the
    # projection), which reads the other branch's accumulators from the accumulator
    # buffer, an identity block's into its last layer (over the identity's words). The
    # program equals golden, with or without fused pooling, and each accumulator word
    # is counted once written and once read.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = projection_network(rng)
    engine = EngineConfig(rows=rows, cols=3, alpha=2, act_words=256, acc_words=64,
                          psum_words=64)
    compiled = compile_network(network, engine)
    _check(compiled, network, rng.integers(0, 256, (4, 3, 8, 8)))
    assert [s.name for s in compiled.program.steps] == [
        "stem", "body_a", "projection", "body_b", "body_c", "gap", "fc"]
    steps = {step.name: step for step in compiled.program.steps}
    body_a, projection, body_c = steps["body_a"], steps["projection"], steps["body_c"]
    assert body_a.dst.memory == "acc" and projection.add_b == body_a.dst
    assert (projection.dst.memory, projection.ma, projection.mb) == ("act", 1200, 500)
    assert body_c.add_b == body_c.dst == projection.dst         # over the identity
    assert (body_c.ma, body_c.mb) == (1500, 70000)
    assert encode_program(compile_network(network, engine, fuse=False).program) == \
        encode_program(compiled.program)                        # no pooling to fuse
    words = body_a.dst.words(rows)
    costs = {cost.name: cost for cost in compiled.costs}
    assert sum(cost.acc_writes for cost in compiled.costs) == \
        sum(cost.acc_reads for cost in compiled.costs) + steps["fc"].dst.words(rows)
    assert costs["body_a"].acc_writes == costs["projection"].acc_reads == words
    assert costs["body_c"].acc_reads == 0
    with pytest.raises(CompileError, match=r"body_a: its output \(6 x 4 x 4: \d+ words of "
                                           r"\d+\) does not fit the accumulator buffer of "
                                           r"4 words"):
        compile_network(network, dataclasses.replace(engine, acc_words=4))


@pytest.fixture(scope="module")
def lenets():
    data = load_dataset("mnist")
    networks = {name: quantize_network(load_onnx(MODELS / f"{name}.onnx"),
                                       data.train_x[:200], alpha=8, gamma=0.5)
                for name in ("lenet5_mnist", "lenet5_mnist_cc")}
    return data, networks


def test_lenet_programs_equal_golden_and_packing_pays(lenets):
    data, networks = lenets
    engine = EngineConfig(rows=16, cols=16, alpha=8, mac="bitserial", weight_bytes=1 << 19)
    cycles, bytes_ = {}, {}
    for name, network in networks.items():
        compiled = compile_network(network, engine)
        q = network.quantize_input(data.test_x[:8])
        _check(compiled, network, q)
        cycles[name], bytes_[name] = compiled.cycles, compiled.traffic()
        print(name, cycles[name], bytes_[name], len(compiled.image))
    assert bytes_["lenet5_mnist_cc"]["weights"] < bytes_["lenet5_mnist"]["weights"] / 3
    assert cycles["lenet5_mnist"] / cycles["lenet5_mnist_cc"] > 2
    # The dense model's weights do not fit the default weight memory.
    with pytest.raises(CompileError, match=r"the weight image \(274016 bytes\) does not fit "
                                           r"the engine's on-chip weight memory of 131072 bytes"):
        compile_network(networks["lenet5_mnist"], dataclasses.replace(
            engine, weight_bytes=EngineConfig.weight_bytes))


@pytest.mark.parametrize("change,message", [
    ({"act_words": 150}, r"conv_a: its output \(8 x 8 x 8: 128 words of 4\) does not fit "
                         r"the activation buffer of 150 words \(64 already held by x\)"),
    ({"psum_words": 63}, r"conv_a: its partial sums \(64 positions, a word each\) do not "
                         r"fit the partial-sum buffer of 63 words"),
    ({"acc_words": 2}, r"fc: its output \(10: 3 words of 4\) does not fit the accumulator"),
    ({"alpha": 1}, r"conv_a: packed with alpha 2, the engine's array takes 1"),
    ({"out_bits": 6}, r"the network has 8-bit activations and 32-bit accumulators, the "
                      r"engine 6 and 32"),
    ({"rows": 0}, r"engine rows must be a positive integer, not 0"),
    ({"gather_ports": 9}, r"an engine's lane banks have 1..8 read ports, not 9"),
    ({"gather_ports": 0}, r"engine gather_ports must be a positive integer, not 0"),
])
def test_what_does_not_fit_is_refused_in_one_line(change, message):
    network = residual_network(np.random.default_rng(SEED))
    config = {"rows": 4, "cols": 4, "alpha": 2, "act_words": 512, "acc_words": 16,
              "psum_words": 64, **change}
    with pytest.raises(CompileError, match=message):
        compile_network(network, EngineConfig(**config))


def test_an_input_larger_than_the_buffer_is_named():
    network = residual_network(np.random.default_rng(SEED))
    with pytest.raises(CompileError, match=r"^the input \(3 x 8 x 8: 64 words of 4\) does not "
                                           r"fit the activation buffer of 63 words$"):
        compile_network(network, EngineConfig(rows=4, cols=4, alpha=2, act_words=63))


def test_term_quantized_layers_are_refused():
    network = residual_network(np.random.default_rng(SEED), tq=TermQuantization(8, 12, 3))
    with pytest.raises(CompileError, match="conv_b: term-quantized layers do not run"):
        compile_network(network, EngineConfig(rows=4, cols=4, alpha=2))


def test_program_file_round_trip_and_bad_programs():
    rng = np.random.default_rng(SEED)
    network = residual_network(rng)
    compiled = compile_network(network, EngineConfig(rows=4, cols=4, alpha=2, act_words=512,
                                                     acc_words=16, psum_words=64))
    program = Program.from_dict(json.loads(json.dumps(compiled.program.to_dict())))
    assert program == compiled.program
    image = rng.integers(0, 256, (3, 8, 8))
    with pytest.raises(ProgramError, match="the weight image has 10 bytes, the program "
                                           "reads"):
        run_program(program, compiled.image[:10], image)
    with pytest.raises(ProgramError, match=r"the image has shape \(8, 8\), the program "
                                           r"takes \(3, 8, 8\)"):
        run_program(program, compiled.image, image[0])
    with pytest.raises(ProgramError, match=r"image values must lie in 0..255"):
        run_program(program, compiled.image, image - 1)
    with pytest.raises(ProgramError, match="not a network engine program"):
        Program.from_dict({"steps": [{"op": "jump"}]})


def test_codnn_compile_writes_the_program_and_refuses_in_one_line(tmp_path, capsys):
    model = MODELS / "lenet5_mnist_cc.onnx"
    assert main(["compile", str(model), "--calibration", "100", "--check", "3",
                 "--fmax-mhz", "100", "-o", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["checked_inputs"] == 3
    assert report["images_per_s"] == pytest.approx(1e8 / report["cycles_per_image"])
    program = Program.from_dict(json.loads((tmp_path / "program.json").read_text()))
    assert (tmp_path / "weights.bin").stat().st_size == program.weight_image_bytes
    binary = decode_program((tmp_path / "program.bin").read_bytes())
    assert [step.op for step in binary.steps] == [step.op for step in program.steps]
    # Two convolutions, each with its pooling fused, and three dense layers.
    assert len(report["per_step"]) == len(program.steps) == 5
    assert [step.pool for step in program.steps] == [True, True, False, False, False]
    # The weight memory's read ports: on this bit-serial engine a second saves under 5 %
    # of the cycles (a dense tile waits for its weight bank anyway), so --weight-ports
    # auto builds one; asked for, two give the same program in fewer cycles. With
    # parallel MACs the dense layers' tiles are bound by their words: auto builds two.
    assert program.engine.weight_ports == 1
    runs = {}
    for name, extra in (("two", ["--weight-ports", "2"]), ("parallel", ["--mac", "parallel"]),
                        ("parallel_one", ["--mac", "parallel", "--weight-ports", "1"])):
        assert main(["compile", str(model), "--calibration", "100", *extra,
                     "-o", str(tmp_path / name), "--json"]) == 0
        runs[name] = json.loads(capsys.readouterr().out)
    assert report["cycles_per_image"] * 0.95 < runs["two"]["cycles_per_image"] \
        < report["cycles_per_image"]
    assert (tmp_path / "two" / "program.bin").read_bytes() == \
        (tmp_path / "program.bin").read_bytes()
    assert runs["two"]["engine"]["weight_ports"] == 2
    assert runs["parallel"]["engine"]["weight_ports"] == 2
    assert runs["parallel"]["cycles_per_image"] <= \
        0.95 * runs["parallel_one"]["cycles_per_image"]
    assert main(["compile", str(model), "--calibration", "100", "--act-words", "900",
                 "-o", str(tmp_path / "small")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("codnn: error: /features/features.0/Conv: its output (6 x 14 x "
                            "14: 196 words of 16) does not fit") and "\n" not in error
    assert not (tmp_path / "small").exists()


def _plain_torch_network(torch, kind):
    """A network as a user writes it in plain torch, batch norm left in: ``resnet`` (a
    stride-2 block with a 1 x 1 projection shortcut, ``adaptive_avg_pool2d``, a Linear
    head) or ``mobilenet`` (a stride-2 stem, an inverted residual block: a 1 x 1
    expansion, a depthwise 3 x 3, ReLU6, a linear bottleneck added without a ReLU after
    it, ``x.mean((2, 3))``, a Linear head)."""
    nn = torch.nn

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU())
            self.body = nn.Sequential(
                nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8))
            self.shortcut = nn.Sequential(nn.Conv2d(8, 8, 1, stride=2), nn.BatchNorm2d(8))
            self.head = nn.Linear(8, 10)

        def forward(self, x):
            x = self.stem(x)
            x = torch.relu(self.body(x) + self.shortcut(x))
            return self.head(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))

    class MobileNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1),
                                      nn.BatchNorm2d(8), nn.ReLU6())
            self.block = nn.Sequential(
                nn.Conv2d(8, 16, 1), nn.BatchNorm2d(16), nn.ReLU6(),
                nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU6(),
                nn.Conv2d(16, 8, 1), nn.BatchNorm2d(8))
            self.head = nn.Linear(8, 10)

        def forward(self, x):
            x = self.stem(x)
            return self.head((x + self.block(x)).mean((2, 3)))

    torch.manual_seed(SEED)
    model = (ResNet if kind == "resnet" else MobileNet)()
    with torch.no_grad():                   # batch norm statistics that are not the identity
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 2.0)
    return model.eval()


@pytest.mark.parametrize("kind", ["resnet", "mobilenet"])
def test_compile_sizes_the_buffers_of_plain_torch_networks(tmp_path, capsys, kind):
    """With no buffer flags, compile sizes each buffer to what the program needs (every
    check input through the program equal to golden); a buffer one word smaller does
    not compile or takes more cycles; a limit too small is refused naming the size."""
    import warnings
    torch = pytest.importorskip("torch")
    model = _plain_torch_network(torch, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 1, 28, 28),), str(tmp_path / "net.onnx"))
    capsys.readouterr()                     # what the exporter printed
    x = np.random.default_rng(SEED).uniform(0, 1, (40, 1, 28, 28)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    common = ["compile", str(tmp_path / "net.onnx"), "--data", str(tmp_path / "data.npz"),
              "--calibration", "30", "--rows", "8", "--cols", "8", "--alpha", "4"]
    assert main([*common, "--check", "10", "-o", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    chosen = report["buffers"]["chosen"]
    assert report["checked_inputs"] == 10
    assert chosen == {name: report["engine"][name] for name in chosen}
    program = Program.from_dict(json.loads((tmp_path / "out/program.json").read_text()))
    assert program.engine.act_words == chosen["act_words"]
    # A bank of 8-bit lanes per row, copied for each of its two gather read ports and the
    # result writer's.
    assert report["buffers"]["memory_bits"]["activations"] == 8 * 8 * 3 * chosen["act_words"]
    network = load_onnx(tmp_path / "net.onnx")
    integer = quantize_network(network, x[:30], alpha=4, gamma=0.5)
    for name in ("act_words", "acc_words"):
        smaller = dataclasses.replace(program.engine, **{name: chosen[name] - 1})
        try:
            assert compile_network(integer, smaller).cycles > report["cycles_per_image"]
        except CompileError:
            pass
    too_few = chosen["acc_words"] - 1
    assert main([*common, "--acc-words", str(too_few), "-o", str(tmp_path / "small")]) == 2
    error = capsys.readouterr().err.strip()
    assert f"does not fit the accumulator buffer of {too_few} words" in error, error
    assert error.endswith(f"it needs an accumulator buffer of {chosen['acc_words']} "
                          f"words"), error
    assert "\n" not in error and not (tmp_path / "small").exists()


@pytest.mark.parametrize("argv,message", [
    (["--board", "nosuch"], "Board must be one of icebreaker"),
    (["--board", "ulx3s-85f", "--weight-port", "axi"], "drop --weight-port axi"),
    (["--board", "ulx3s-85f", "--spill-words", "4096"], "and --spill-words")])
def test_compile_board_refuses_in_one_line(tmp_path, capsys, argv, message):
    assert main(["compile", str(MODELS / "lenet5_mnist_cc.onnx"), *argv, "-o",
                 str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1, error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("inputs,message", [
    ("negative", "inputs must be non-negative (the calibration sample reaches -1)"),
    ("nan", "inputs hold NaN or infinite values"),
    ("shape", "inputs have shape (1, 28, 27) per item; the model takes (1, 28, 28)")])
def test_compile_refuses_bad_calibration_inputs_in_one_line(tmp_path, capsys, inputs,
                                                             message):
    x = {"negative": -np.ones((4, 1, 28, 28)), "shape": np.zeros((4, 1, 28, 27)),
         "nan": np.full((4, 1, 28, 28), np.nan)}[inputs]
    np.savez(tmp_path / "d.npz", x=x, y=np.zeros(4, int))
    assert main(["compile", str(MODELS / "lenet5_mnist_cc.onnx"), "--data",
                 str(tmp_path / "d.npz"), "--calibration", "4", "--check", "1", "-o",
                 str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1, error
    assert not (tmp_path / "out").exists()


def test_fit_buffers_keeps_the_limits_it_is_not_asked_to_size():
    network = residual_network(np.random.default_rng(SEED))
    limits = largest_buffers(EngineConfig(rows=4, cols=4, alpha=2))
    compiled, engine = fit_buffers(lambda e: compile_network(network, e), limits,
                                   sized=("act_words",))
    assert (engine.acc_words, engine.psum_words, engine.weight_bytes) == (
        limits.acc_words, limits.psum_words, limits.weight_bytes)
    assert engine.act_words < limits.act_words == 1 << 16
    assert compiled.program.engine == engine
    _check(compiled, network, np.random.default_rng(SEED).integers(0, 256, (2, 3, 8, 8)))


def test_weight_image_worked_example():
    # docs/semantics.md section 9: a 1 x 1 array (one lane), alpha 2, bias 5, shift 9, a
    # 3 x 3 convolution over a 2 x 4 x 4 map whose column carries im2col rows 14 (c 1,
    # ky 1, kx 2: word offset 16 + 4 + 2) and 0 on its two streams, weight -2 on stream 1.
    # Its one lane bank reads row 14's word in slot 0 and row 0's in slot 1, and the
    # column's streams carry lane 0 in both.
    engine = EngineConfig(rows=1, cols=1, alpha=2)
    tile = Tile(0, 0, np.array([[-2]]), np.array([[1]]), np.array([[14, 0]]))
    entries = gather_entries(18, (2, 4, 4), 3, 1)
    offset, _, kyx = entries[[14, 0]].T
    table = GatherTable(offset[:, None], kyx[:, None] >> 4, kyx[:, None] & 15,
                        np.zeros((2, 1), np.int64))
    block = layer_block([tile], [table], [5], 9, engine)
    assert block.hex(" ") == "05 00 00 00 09 00 16 00 00 12 00 00 00 00 fe 01"
    back, read = read_tile(block, 6, engine)
    assert (back.weights.tolist(), back.selects.tolist()) == ([[-2]], [[1]])
    assert [v.tolist() for v in (read.offset, read.ky, read.kx, read.lane)] == [
        [[22], [0]], [[1], [0]], [[2], [0]], [[0], [0]]]


def test_concat_compiles_to_adds_into_whole_words():
    # Each part through the add's requantization into its channels' words of the output;
    # the program equals golden (tests/test_hw_network.py runs it on the engine). A part
    # that starts inside a word is refused in one line.
    rng = np.random.default_rng(SEED)
    network = concat_network(rng, 4)
    engine = EngineConfig(rows=4, cols=3, alpha=2, act_words=128, acc_words=4, psum_words=32)
    compiled = compile_network(network, engine)
    adds = [step for step in compiled.program.steps if step.op == "add"]
    assert [(s.ma, s.mb, s.dst.addr - adds[0].dst.addr) for s in adds] == \
        [(50000, 0, 0), (70000, 0, 16)]                  # part b at the second lane block
    _check(compiled, network, rng.integers(0, 256, (3, 2, 4, 4)))
    with pytest.raises(CompileError, match=r"cat: its part 1 starts at channel 3, not on a "
                                           r"word of 4 lanes"):
        compile_network(concat_network(np.random.default_rng(SEED), 3), engine)


def test_what_the_engine_cannot_hold_is_refused():
    rng = np.random.default_rng(SEED)
    network = residual_network(rng)
    steps = list(network.steps)
    steps[2] = Add("add", "b", "a", "s", ma=1 << 24, mb=3)
    with pytest.raises(CompileError, match=r"add: multipliers 16777216 and 3 outside the "
                                           r"engine's 24 unsigned bits"):
        compile_network(IntegerNetwork(tuple(steps), "x", "y", (3, 8, 8), 1.0, 1.0),
                        EngineConfig(rows=4, cols=4, alpha=2))
    steps = list(network.steps)
    steps[0] = dataclasses.replace(steps[0], shift=None)       # accumulators into a layer
    with pytest.raises(CompileError, match=r"conv_a: its output, accumulators \(no ReLU or "
                                           r"output stage after it\), feeds a step other "
                                           r"than an add"):
        compile_network(IntegerNetwork(tuple(steps), "x", "y", (3, 8, 8), 1.0, 1.0),
                        EngineConfig(rows=4, cols=4, alpha=2, acc_words=4096))
    multiplied = residual_network(np.random.default_rng(SEED), requant="multiplier")
    with pytest.raises(CompileError, match=r"conv_a: requantized by a multiplier; the "
                                           r"engine's output stage shifts only"):
        compile_network(multiplied, EngineConfig(rows=4, cols=4, alpha=2))
    steps = list(network.steps)
    steps[0] = dataclasses.replace(steps[0], shift=32)
    with pytest.raises(CompileError, match=r"conv_a: a shift outside the output stage's "
                                           r"0..31"):
        compile_network(IntegerNetwork(tuple(steps), "x", "y", (3, 8, 8), 1.0, 1.0),
                        EngineConfig(rows=4, cols=4, alpha=2))
    steps[0] = dataclasses.replace(steps[0], shift=48, multiplier=3)
    with pytest.raises(CompileError, match=r"conv_a: a shift outside the output stage's "
                                           r"0..47"):
        compile_network(IntegerNetwork(tuple(steps), "x", "y", (3, 8, 8), 1.0, 1.0),
                        EngineConfig(rows=4, cols=4, alpha=2, requant="multiplier"))
    big = random_layer(rng, "conv_16", "x", "a", 8, 3 * 256, shift=9, kernel=16, padding=8)
    steps = (big, *network.steps[1:])
    with pytest.raises(CompileError, match=r"conv_16: a 16 x 16 kernel; the engine's gather "
                                           r"takes at most 15 x 15"):
        compile_network(IntegerNetwork(steps, "x", "y", (3, 8, 8), 1.0, 1.0),
                        EngineConfig(rows=4, cols=4, alpha=2))


def test_binary_program_round_trip_and_bad_programs():
    rng = np.random.default_rng(SEED)
    network = residual_network(rng)
    engine = EngineConfig(rows=4, cols=4, alpha=2, mac="bitserial", act_words=512,
                          acc_words=16, psum_words=64)
    compiled = compile_network(network, engine)
    data = encode_program(compiled.program)
    assert len(data) == 4 * (HEADER_WORDS + STEP_WORDS * len(compiled.program.steps))
    back = decode_program(data, weight_bytes=engine.weight_bytes)
    renamed = tuple(dataclasses.replace(step, name=f"step{k}")
                    for k, step in enumerate(compiled.program.steps))
    assert back == dataclasses.replace(compiled.program, steps=renamed)
    image = rng.integers(0, 256, (3, 8, 8))
    assert np.array_equal(run_program(back, compiled.image, image),
                          run_program(compiled.program, compiled.image, image))
    with pytest.raises(ProgramError, match="a 72-byte header and whole words, not 70 bytes"):
        decode_program(data[:70])
    with pytest.raises(ProgramError, match=f"not a network engine program of version {VERSION}"):
        decode_program(b"\0" * 4 + data[4:])
    with pytest.raises(ProgramError, match=rf"a program of 7 steps has {len(data)} bytes, "
                                           rf"not {len(data) - 64}"):
        decode_program(data[:-64])
    bad_op = bytearray(data)
    bad_op[72] = 9
    with pytest.raises(ProgramError, match="step 0: unknown operation 9"):
        decode_program(bytes(bad_op))
    # The header's requantization: a code past the two, one the engine does not have.
    requant = bytearray(data)
    requant[4 * 13 + 1] = 2
    with pytest.raises(ProgramError, match="the header: unknown requantization 2"):
        decode_program(bytes(requant))
    requant[4 * 13 + 1] = 1
    assert decode_program(bytes(requant)).engine.requant == "multiplier"
    with pytest.raises(ProgramError, match="the header: requant multiplier; the engine has "
                                           "shift"):
        decode_program(bytes(requant), engine=engine)
    # A bit outside the step's fields: a pooling's flag past its two, a layer's past its
    # seven, a pooling's unused word, an add's, a layer's add operand word past its 29
    # address bits.
    for op, word, bit in ((Op.POOL, 0, 10), (Op.LAYER, 0, 15), (Op.POOL, 9, 3),
                          (Op.ADD, 13, 0), (Op.LAYER, 16, 29)):
        k = next(k for k, s in enumerate(compiled.program.steps) if s.op == op.name.lower())
        stray = bytearray(data)
        at = 4 * (HEADER_WORDS + k * STEP_WORDS + word) + bit // 8
        stray[at] |= 1 << bit % 8
        with pytest.raises(ProgramError, match=f"step {k}: a {op.name.lower()} step with "
                                               f"bits {1 << bit:#x} of word {word} set"):
            decode_program(bytes(stray))
    # What a field cannot hold is refused where it is encoded, not wrapped.
    far = dataclasses.replace(compiled.program, output=dataclasses.replace(
        compiled.program.output, addr=1 << 29))
    with pytest.raises(ProgramError, match="output.addr is 536870912, which does not fit "
                                           "29 bits"):
        encode_program(far)


def test_the_format_table_in_the_docs_is_the_code_s():
    """docs/semantics.md prints the binary program's fields as the one table defines them,
    and every operation's first region is at word 1 and its second at word 4 (the
    engine's checks share them)."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "semantics.md").read_text()
    assert format_table() in docs
    for layout in STEPS.values():
        regions = [item[0] for item in layout.values() if isinstance(item, tuple)]
        assert regions[:2] == [1, 4][:len(regions)]
    # Unpacking then packing keeps exactly the bits of the fields.
    rng = np.random.default_rng(SEED)
    for layout, count in ((HEADER, HEADER_WORDS), *((f, STEP_WORDS) for f in STEPS.values())):
        words = [int(w) for w in rng.integers(0, 1 << 32, count)]
        kept = [w & ~u for w, u in zip(words, unused_bits(layout, count))]
        assert pack(layout, unpack(layout, words), count) == kept


def _widest_streams(program, image):
    """Per layer step, the most stream slots a column of its tiles reads (from the
    image)."""
    e = program.engine
    widest = []
    for step in program.steps:
        if not isinstance(step, LayerStep):
            continue
        at, most = step.weights, 1
        for _ in range(step.row_blocks):
            at += bias_bytes(e)
            for _ in range(step.col_blocks):
                lane = read_tile(image, at, e)[1].lane
                at += tile_bytes(e)
                used = [np.flatnonzero(column != NO_LANE) for column in lane.T]
                most = max([most] + [int(u[-1]) + 1 for u in used if u.size])
        widest.append(most)
    return widest


def test_a_layer_reads_the_rounds_its_widest_group_needs():
    # docs/semantics.md section 9: a layer's gather takes ceil(slots / 2) rounds of reads
    # per position, its tiles' columns reading streams in ``slots`` slots (those past
    # them carry 0), at one round a cycle with parallel MACs; the compiler packs a layer
    # more narrowly (every weight kept) where that takes fewer cycles. A layer given fewer rounds loses its wider groups' streams, and 0
    # rounds or more than the engine's ceil(alpha / 2) are refused.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = residual_network(rng, alpha=6)
    engine = EngineConfig(rows=4, cols=4, alpha=8, mac="parallel", act_words=512,
                          acc_words=16, psum_words=64)
    compiled = compile_network(network, engine)
    layers = [s for s in compiled.program.steps if isinstance(s, LayerStep)]
    widest = _widest_streams(compiled.program, compiled.image)
    assert [s.rounds for s in layers] == [-(-w // 2) for w in widest]
    packed = [max(map(len, layer.packed.groups)) for layer in network.array_layers]
    assert all(w <= p for w, p in zip(widest, packed)) and widest != packed
    print(f"widest groups as packed {packed}, as compiled {widest}")
    image = rng.integers(0, 256, (3, 8, 8))
    want = network.run(image[None])[0]
    assert np.array_equal(run_program(compiled.program, compiled.image, image), want)
    full = [dataclasses.replace(s, rounds=4) if isinstance(s, LayerStep) else s
            for s in compiled.program.steps]
    slow = dataclasses.replace(compiled.program, steps=tuple(full))
    assert np.array_equal(run_program(slow, compiled.image, image), want)
    faster = [a - b for a, b in zip(step_cycles(slow), step_cycles(compiled.program))]
    for step, saved in zip(compiled.program.steps, faster):
        if isinstance(step, LayerStep):
            tiles = step.row_blocks * step.col_blocks
            assert saved == tiles * ((4 - step.rounds) * step.positions), step.name
    # With bit-serial MACs (a beat every 8 cycles) the wide groups stay.
    serial = compile_network(network, dataclasses.replace(engine, mac="bitserial"))
    wide = next(s for s in serial.program.steps if isinstance(s, LayerStep) and s.rounds > 1)
    assert np.array_equal(run_program(serial.program, serial.image, image), want)
    short = [dataclasses.replace(s, rounds=1) if s is wide else s
             for s in serial.program.steps]
    cut = dataclasses.replace(serial.program, steps=tuple(short))
    assert not np.array_equal(run_program(cut, serial.image, image), want)
    for rounds in (0, 5):
        bad = [dataclasses.replace(s, rounds=rounds) if s is wide else s
               for s in serial.program.steps]
        with pytest.raises(ProgramError, match=f"{rounds} rounds of gather reads; the "
                                               f"engine reads 1..4 per position"):
            run_program(dataclasses.replace(serial.program, steps=tuple(bad)),
                        serial.image, image)


def _small_conv_model(tmp_path, rng):
    """A conv net written as ONNX (conv, ReLU, max pool, flatten, dense) and six inputs:
    ``m.onnx`` and ``d.npz`` in ``tmp_path``."""
    from onnx import TensorProto, helper, numpy_helper, save
    inits = {"w": rng.normal(0, 0.4, (4, 2, 3, 3)), "fw": rng.normal(0, 0.3, (5, 4 * 3 * 3))}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
         str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "d.npz", x=rng.uniform(0, 1, (6, 2, 6, 6)))


@pytest.mark.long
def test_codnn_compile_runs_the_engine_rtl(tmp_path, capsys, icarus):
    # The small conv net through codnn compile on a small engine, two inputs through the
    # RTL on Icarus.
    _small_conv_model(tmp_path, np.random.default_rng(SEED))
    assert main(["compile", str(tmp_path / "m.onnx"), "--data", str(tmp_path / "d.npz"),
                 "--rows", "3", "--cols", "4", "--alpha", "2", "--mac", "parallel",
                 "--act-words", "128", "--check", "3", "--rtl", "2", "--simulator", icarus,
                 "-o", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rtl"] == {"images": 2, "simulator": "icarus", "cycles_equal_model": True}
    # The same with the weights in external memory (cocotbext-axi's AXI RAM).
    assert main(["compile", str(tmp_path / "m.onnx"), "--data", str(tmp_path / "d.npz"),
                 "--rows", "3", "--cols", "4", "--alpha", "2", "--mac", "parallel",
                 "--act-words", "128", "--check", "1", "--rtl", "1", "--simulator", icarus,
                 "--weight-port", "axi", "--memory-latency", "2", "-o",
                 str(tmp_path / "axi"), "--json"]) == 0
    external = json.loads(capsys.readouterr().out)
    assert external["rtl"] == {"images": 1, "simulator": "icarus", "cycles_equal_model": True,
                               "memory_latency": 2}
    assert external["cycles_per_image"] > report["cycles_per_image"]
    assert external["bytes_per_image"]["external_weights"] == \
        report["bytes_per_image"]["weights"]                 # words of 8 bytes: no padding
    assert main(["compile", str(tmp_path / "m.onnx"), "--data", str(tmp_path / "d.npz"),
                 "--check", "1", "--rtl", "2", "-o", str(tmp_path / "bad")]) == 2
    assert "--rtl 2 needs as many --check inputs, not 1" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


@pytest.mark.long
def test_codnn_compile_runs_on_the_simulated_board_top(tmp_path, capsys):
    # The same net on the network engine's board top in simulation: the program and the
    # weight image over the simulated UART, then an input, its class and its logits.
    _small_conv_model(tmp_path, np.random.default_rng(SEED))
    common = ["compile", str(tmp_path / "m.onnx"), "--data", str(tmp_path / "d.npz"),
              "--rows", "3", "--cols", "4", "--alpha", "2", "--mac", "parallel",
              "--act-words", "128", "--check", "2"]
    assert main([*common, "--board-sim", "--device-images", "1", "-o", str(tmp_path / "o"),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    device = report["device"]
    assert device["result"] == "pass" and len(device["images"]) == 1
    assert device["images"][0]["cycles"] == report["cycles_per_image"]
    assert main([*common, "--board-sim", "--device-images", "3", "-o",
                 str(tmp_path / "bad")]) == 2
    assert "--device-images 3 needs as many --check inputs, not 2" in capsys.readouterr().err
    assert main([*common, "--board-sim", "--port", "/dev/null", "-o",
                 str(tmp_path / "bad")]) == 2
    assert "--port or --board-sim, not both" in capsys.readouterr().err


def test_tensors_that_do_not_fit_wait_in_external_memory():
    # Two linear-bottleneck blocks need 180 words of 6 lanes; with 150 the compiler stores
    # each block's shortcut while its depthwise layer runs and loads it back for the add
    # (the first block's fused into its projection layer).
    # The program (and its binary form) equals the golden network, the loads and stores
    # are counted as external traffic, and too small an external memory is refused by
    # name.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = bottleneck_network(rng)
    engine = EngineConfig(rows=6, cols=2, alpha=2, act_words=150, acc_words=128,
                          psum_words=64, spill_words=1024)
    with pytest.raises(CompileError, match="does not fit the activation buffer of 150"):
        compile_network(network, dataclasses.replace(engine, spill_words=0))
    compiled = compile_network(network, engine)
    moves = [(s.op, s.name) for s in compiled.program.steps if s.op in ("load", "store")]
    assert moves == [("store", "spatial_a/store s"), ("load", "project_a/load s"),
                     ("store", "spatial_b/store j"), ("load", "join_b/load j")]
    images = rng.integers(0, 256, (3, *network.input_shape))
    _check(compiled, network, images)
    decoded = decode_program(encode_program(compiled.program))
    assert decoded.engine.spill_words == 2 * 6 * 6            # what the stores reach
    assert np.array_equal(run_program(decoded, compiled.image, images[0]),
                          network.run(images[:1])[0])
    traffic = compiled.traffic()
    assert traffic["spill_read"] == traffic["spill_written"] == 2 * 36 * 8
    with pytest.raises(CompileError, match=r"spatial_b: j \(36 words\) does not fit the "
                                           r"external activation memory of 40 words"):
        compile_network(network, dataclasses.replace(engine, spill_words=40))
    with pytest.raises(CompileError, match="spill_words must be a non-negative integer"):
        compile_network(network, dataclasses.replace(engine, spill_words=-1))


@pytest.mark.parametrize("addr,count,stride,want", [
    (0, 600, 4, [(0, 256), (256, 256), (512, 88)]),
    (1020, 10, 4, [(1020, 4), (1024, 6)]),          # across a 4 KB page of 1024 words
    (3, 0, 8, []),
    (7, 3, 4096, [(7, 1), (8, 1), (9, 1)]),         # a word a page
])
def test_bursts_stay_in_their_page(addr, count, stride, want):
    assert bursts(addr, count, stride) == want


@pytest.mark.parametrize("rows,cols,alpha,mac", [(4, 4, 2, "parallel"), (3, 5, 4, "bitserial"),
                                                 (16, 16, 8, "bitserial")])
def test_fused_pooling_equals_the_pooling_steps(rows, cols, alpha, mac):
    # Each convolution that only a 2 x 2 max pooling reads is one layer step that writes
    # the pooled map (maps of odd sides: the last row, or the last column, dropped), equal
    # to the network and to the program with pooling steps; it costs its layer's cycles
    # and the last window's write tail, and writes the pooled words only.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = pooled_network(rng)
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=1024,
                          acc_words=16, psum_words=256)
    fused, apart = (compile_network(network, engine, fuse=f) for f in (True, False))
    assert [(s.op, s.pool) for s in fused.program.steps] == [("layer", True)] * 2 + [
        ("layer", False)]
    assert [s.op for s in apart.program.steps] == ["layer", "pool", "layer", "pool", "layer"]
    images = rng.integers(0, 256, (4, 3, 11, 13))
    _check(fused, network, images)
    _check(apart, network, images)
    back = decode_program(encode_program(fused.program), engine=engine)
    assert [s.pool for s in back.steps] == [True, True, False]
    assert np.array_equal(run_program(back, fused.image, images[0]), network.run(images[:1])[0])
    costs = {c.name: c for c in apart.costs}
    period = 1 if mac == "parallel" else 9
    tails = {"conv_a": 0, "conv_b": max(0, POOL_WRITE_STEPS - period)}  # 11 x 13, 4 x 5 maps
    for step, cost in zip(fused.program.steps[:2], fused.costs):
        assert cost.cycles == costs[step.name].cycles + tails[step.name], step.name
        pooling = costs[step.name.replace("conv", "pool")]
        assert cost.act_writes == step.dst.words(rows) == pooling.act_writes
        assert cost.act_reads == costs[step.name].act_reads
    assert fused.cycles < apart.cycles


def test_fused_pooling_is_refused_where_it_cannot_run():
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=4, cols=4, alpha=2, act_words=1024, acc_words=16,
                          psum_words=256)
    compiled = compile_network(pooled_network(rng), engine)
    program, data = compiled.program, encode_program(compiled.program)

    def flip(k, *bits):
        edited = bytearray(data)
        for bit in bits:
            edited[4 * (HEADER_WORDS + k * STEP_WORDS) + bit // 8] ^= 1 << bit % 8
        return bytes(edited)
    # The odd flags say the window's map: conv_a's 11 x 13, fc's none (no pooling).
    for k, bit in ((0, 10), (0, 11), (2, 10), (2, 11)):
        with pytest.raises(ProgramError, match=f"step {k}: odd map flags"):
            decode_program(flip(k, bit))
    with pytest.raises(ProgramError, match=r"step 2 \(step2\): a layer with fused pooling "
                                           r"is a convolution with an output stage"):
        decode_program(flip(2, 9), engine=engine)
    # Unpooled (its flags cleared), conv_a's 11 x 13 map is not its 5 x 6 result.
    with pytest.raises(ProgramError, match=r"step 0 \(step0\): its dst map is 5 x 6; the "
                                           r"window gives 11 x 13"):
        decode_program(flip(0, 9, 10, 11), engine=engine)
    steps = list(program.steps)
    raw = dataclasses.replace(steps[0], output_stage=False,
                              dst=dataclasses.replace(steps[0].dst, memory="acc", addr=0))
    with pytest.raises(ProgramError, match="a layer with fused pooling is a convolution "
                                           "with an output stage"):
        check_program(dataclasses.replace(program, steps=(raw, *steps[1:]), engine=(
            dataclasses.replace(engine, acc_words=128))))
    # A result wider than the line of partial maxima: a 3 x 2 x 1026 source.
    wide = dataclasses.replace(
        steps[0], src=dataclasses.replace(steps[0].src, addr=0, shape=(3, 2, 1026)),
        dst=dataclasses.replace(steps[0].dst, addr=3000, shape=(10, 1, 513)),
        positions=2 * 1026)
    big = dataclasses.replace(program, engine=dataclasses.replace(engine, act_words=8192,
                                                                  psum_words=4096),
                              steps=(wide,), input=wide.src, output=wide.dst)
    with pytest.raises(ProgramError, match=f"its pooled map is 513 wide; fused pooling "
                                           f"keeps a row of at most {POOL_LINE_WORDS}"):
        check_program(big)
    narrow = dataclasses.replace(wide, src=dataclasses.replace(wide.src, shape=(3, 2, 1024)),
                                 dst=dataclasses.replace(wide.dst, shape=(10, 1, 512)),
                                 positions=2 * 1024)
    check_program(dataclasses.replace(big, steps=(narrow,), input=narrow.src,
                                      output=narrow.dst))


def test_a_tiles_table_beside_its_cells_halves_a_dense_layers_loads():
    # With the weight memory's two read ports a dense tile (one position) loads in
    # max(t + 1, rows) cycles, its table beside its cells, instead of t + rows (on an
    # 8 x 8 array, where the weight words and not the weight banks' turnaround bound a
    # dense layer's tiles); a convolution's tiles load while the one before streams and
    # gain little. The program is the same, and runs either way.
    rng = np.random.default_rng(SEED)
    network = pooled_network(rng)
    two, one = (EngineConfig(rows=8, cols=8, alpha=4, act_words=1024, acc_words=16,
                             psum_words=256, weight_ports=n) for n in (2, 1))
    fast, slow = compile_network(network, two), compile_network(network, one)
    assert encode_program(fast.program) == encode_program(slow.program)
    assert fast.image == slow.image
    t = table_words(two)
    dense = fast.program.steps[-1]
    tiles = dense.row_blocks * dense.col_blocks
    saved = slow.costs[-1].cycles - fast.costs[-1].cycles
    assert tiles > 1 and saved >= (tiles - 1) * (t + two.rows - max(t + 1, two.rows)), (
        saved, tiles, t)
    assert all(f.cycles <= s.cycles for f, s in zip(fast.costs, slow.costs))
    with pytest.raises(ProgramError, match="1 or 2 read ports, not 3"):
        dataclasses.replace(two, weight_ports=3).check()


@pytest.mark.parametrize("workload,rows", [("projection", 4), ("bottleneck", 6),
                                           ("projection", 3)])
def test_fused_adds_equal_the_add_after_the_layer(workload, rows):
    # Every add of a layer's accumulators fused into a layer: the result equals the
    # network; each fused layer writes activations, not accumulators, reads its operand's
    # words where they are (activations, or the other branch's accumulators) and takes
    # the cycles of the same layer into the accumulator buffer plus the add's longer
    # write; the binary form keeps every operand.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = {"projection": projection_network,
               "bottleneck": bottleneck_network}[workload](rng)
    engine = EngineConfig(rows=rows, cols=3, alpha=2, act_words=512, acc_words=128,
                          psum_words=64)
    compiled = compile_network(network, engine)
    images = rng.integers(0, 256, (3, *network.input_shape))
    _check(compiled, network, images)
    adds = {s.name: s for s in network.steps if isinstance(s, Add)}
    fused = [(s, c) for s, c in zip(compiled.program.steps, compiled.costs)
             if s.op == "layer" and s.add_b is not None]
    assert len(fused) == {"projection": 2, "bottleneck": 1}[workload]
    assert {s.op for s in compiled.program.steps} == {"layer", "pool"} | (
        {"add"} if workload == "bottleneck" else set())    # two offset-binary codes' add
    for layer, cost in fused:
        assert (layer.dst.memory, layer.output_stage) == ("act", False)
        words = layer.dst.words(rows)
        raw = dataclasses.replace(layer, dst=Region("acc", 0, layer.dst.shape), add_b=None,
                                  ma=0, mb=0, signed_b=False, signed_out=False)
        alone = step_cycles(dataclasses.replace(compiled.program, steps=(raw,)))[0]
        assert cost.cycles == alone + ADD_WRITE_STEPS - RESULT_WRITE_STEPS
        assert cost.acc_writes == 0
        assert (cost.acc_reads if layer.add_b.memory == "acc" else cost.act_reads) >= words
        assert {layer.ma, layer.mb} <= {v for a in adds.values() for v in (a.ma, a.mb)}
    back = decode_program(encode_program(compiled.program), engine=engine)
    assert [s.add_b for s in back.steps if s.op == "layer"] == [
        s.add_b for s in compiled.program.steps if s.op == "layer"]
    assert np.array_equal(run_program(back, compiled.image, images[0]),
                          network.run(images[:1])[0])


def test_fused_add_is_refused_where_it_cannot_run():
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=4, cols=3, alpha=2, act_words=512, acc_words=128,
                          psum_words=64)
    compiled = compile_network(projection_network(rng), engine)
    program = compiled.program
    fused = {s.add_b.memory: j for j, s in enumerate(program.steps)
             if s.op == "layer" and s.add_b is not None}
    k = fused["act"]                                # the identity block's
    layer = program.steps[k]
    span = layer.dst.words(engine.rows)

    def checked(j, step):
        check_program(dataclasses.replace(program, steps=(
            *program.steps[:j], step, *program.steps[j + 1:])))

    def moved(addr, memory="act"):
        return dataclasses.replace(layer.add_b, memory=memory, addr=addr)
    checked(k, dataclasses.replace(layer, add_b=moved(layer.dst.addr)))  # over the result
    beside = layer.dst.addr + span if layer.dst.addr + 2 * span <= engine.act_words else \
        layer.dst.addr - span
    checked(k, dataclasses.replace(layer, add_b=moved(beside)))         # just beside it
    checked(k, dataclasses.replace(layer, add_b=moved(layer.dst.addr, "acc")))  # no overlap
    for edit, message in (
            ({"output_stage": True}, "no output stage and no fused pooling"),
            ({"add_b": moved(engine.act_words - span + 1)}, r"its add operand \(words"),
            ({"add_b": moved(engine.acc_words - span + 1, "acc")}, r"its add operand \(words"),
            ({"add_b": moved((layer.dst.addr + beside) // 2)}, "overlaps its dst"),
            ({"add_b": moved(beside + (1 if beside < layer.dst.addr else -1))},
             "overlaps its dst"),
            ({"add_b": dataclasses.replace(moved(0), shape=(6, 2, 8))}, "is not its dst's"),
            ({"add_b": moved(0, "ext")}, "must be in the activation buffer or"),
            ({"ma": 1 << 24}, "multipliers 16777216"),
            ({"add_b": None}, "one without writes the accumulator buffer")):
        with pytest.raises(ProgramError, match=f"step {k} .*{message}"):
            checked(k, dataclasses.replace(layer, **edit))
    projection = program.steps[fused["acc"]]       # reads the other branch's accumulators
    with pytest.raises(ProgramError, match="an add operand in the accumulator buffer is not "
                                           "an offset-binary activation"):
        checked(fused["acc"], dataclasses.replace(projection, signed_b=True))
    other = next(j for j, s in enumerate(program.steps) if s.op == "layer" and s.add_b is None
                 and s.output_stage)
    with pytest.raises(ProgramError, match="add multipliers or flags on a layer without"):
        check_program(dataclasses.replace(program, steps=tuple(
            dataclasses.replace(s, signed_out=True) if j == other else s
            for j, s in enumerate(program.steps))))
    # In the binary form, the add flag cleared: an operand's word without it, or its
    # multipliers on a layer without an add.
    for j, message in ((fused["acc"], f"step {fused['acc']}: an add operand at word"),
                       (k, f"step {k} .*one without writes the accumulator buffer")):
        data = bytearray(encode_program(program))
        data[4 * (HEADER_WORDS + j * STEP_WORDS) + 1] &= ~(1 << 4)      # bit 12: add
        with pytest.raises(ProgramError, match=message):
            decode_program(bytes(data), engine=engine)


def test_accumulators_read_other_than_by_one_add_are_refused_in_one_line():
    # A layer without an output stage leaves accumulators, which the engine adds only as
    # a layer writes them (a fused add): one read by two adds, added to itself or pooled
    # is refused by name, before anything runs.
    rng = np.random.default_rng(SEED)

    def layer(*args, **kwargs):
        return random_layer(rng, *args, alpha=2, **kwargs)
    stem = layer("stem", "x", "s", 4, 3 * 9, shift=9, kernel=3, padding=1)
    body = layer("body", "s", "a", 4, 4 * 9, shift=None, kernel=3, padding=1)
    tail = (Pool("gap", "k", "g", "avg", kernel=0), Flatten("flat", "g", "f"),
            layer("fc", "f", "y", 10, 4, shift=None))
    engine = EngineConfig(rows=4, cols=3, alpha=2, act_words=512, acc_words=128,
                          psum_words=64)
    for middle, message in (
            ((Add("one", "a", "s", "j", 1000, 2000), Add("two", "a", "j", "k", 1000, 2000)),
             "body: its accumulators feed one, an add that cannot be fused"),
            ((Add("self", "a", "a", "k", 1000, 2000),),
             "body: its accumulators feed self, an add that cannot be fused"),
            ((Pool("pool", "a", "k", "max", kernel=1),),
             "body: its output, accumulators .* feeds a step other than an add")):
        network = IntegerNetwork((stem, body, *middle, *tail), "x", "y", (3, 6, 6), 1.0, 1.0)
        with pytest.raises(CompileError, match=message) as refused:
            compile_network(network, engine)
        assert "\n" not in str(refused.value)
