"""Training for the arrays (codnn.train, PyTorch CPU): the models through the ONNX import,
column-combining runs (sparsity reached, groups that the import and the packer keep, the
report's tiles equal codnn infer's), resume equal to an uninterrupted run, the
term-quantized forward pass against golden, and bad settings and checkpoints."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from codnn.golden.column_combining import pack
from codnn.golden.tq_array import reveal_packed
from codnn.golden.network import TermQuantization
from codnn.golden.term_quant import group, quantize, reveal, truncate, ungroup
from codnn.model.infer import infer
from codnn.model.onnx_import import load_onnx
from codnn.golden.block_float import block_float
from codnn.train import TrainError
from codnn.train.block_float import BlockFloat
from codnn.train.block_float import attach as attach_bfp
from codnn.train.block_float import quantize_tensor
from codnn.train.export import export_onnx
from codnn.train.models import MODELS, array_layers, build_model
from codnn.train.run import ColumnCombine, TrainSpec, train
from codnn.train.arithmetic import detach
from codnn.model.quantize import LayerScales, quantize_network
from codnn.train.term_quant import attach, calibrate, revealed_weights, truncated_data

SEED = 20261125
#: The smallest column-combining run: 1 dense epoch, prune points at 0.7 and 0.8.
TINY_CC = TrainSpec("lenet5", "digits", epochs=1, column_combine=ColumnCombine(
    alpha=4, sparsity=0.8, points=2, retrain_epochs=1, final_epochs=1))


@pytest.mark.parametrize("name", MODELS)
def test_models_import_and_match_torch(tmp_path, name):
    torch.manual_seed(SEED)
    model = build_model(name, (1, 8, 8))
    for module in model.modules():              # non-trivial batch-norm statistics to fold
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    export_onnx(model, tmp_path / "m.onnx", (1, 8, 8))
    network = load_onnx(tmp_path / "m.onnx")
    x = np.random.default_rng(SEED).uniform(0, 1, (6, 1, 8, 8))
    with torch.no_grad():
        expected = model(torch.tensor(x, dtype=torch.float32)).numpy()
    assert np.allclose(network.run(x), expected, atol=1e-4)
    assert [layer.weights.shape for layer in network.steps if hasattr(layer, "weights")] \
        == [(m.weight.shape[0], m.weight[0].numel()) for m in array_layers(model)]


def test_column_combining_run_reaches_its_sparsity_and_keeps_its_groups(tmp_path):
    report = train(TINY_CC, tmp_path)
    print(json.dumps(report["phases"], indent=1))
    assert [p["phase"] for p in report["phases"]] == ["dense", "prune 1/2", "prune 2/2"]
    assert report["phases"][1]["rate"] == pytest.approx(0.8 * (1 - 0.5 ** 3))
    for phase in report["phases"][1:]:
        assert phase["rate"] - 0.01 <= phase["sparsity"] <= phase["rate"] + 1e-9
    assert not (tmp_path / "checkpoint.pt").exists()
    network = load_onnx(tmp_path / "model.onnx")
    layers = [step for step in network.steps if hasattr(step, "groups")]
    for layer, row in zip(layers, report["layers"]):
        packed = pack(layer.weights, 4, 0.5, groups=layer.groups)
        assert packed.pruned == 0                  # the zeros fixed in training fit them
        assert len(packed.groups) == row["groups"]
    schedule, _ = infer(tmp_path / "model.onnx", "digits", rows=16, cols=16, alpha=4)
    assert schedule["tiles"] == report["phases"][-1]["tiles"]
    assert schedule["dense_tiles"] == report["phases"][-1]["dense_tiles"]


def test_a_module_through_the_api_trains_as_the_built_in_network(tmp_path):
    # The same architecture, initialized from the same seed, given as a module: the run
    # reaches the same accuracy and tiles in every phase as the built-in name does.
    built_in = train(TINY_CC, tmp_path / "named")
    torch.manual_seed(TINY_CC.seed)
    module = build_model("lenet5", (1, 8, 8), 10)
    given = train(TINY_CC, tmp_path / "module", model=module, data="digits")
    for named, own in zip(built_in["phases"], given["phases"], strict=True):
        assert (named["accuracy"], named["tiles"]) == (own["accuracy"], own["tiles"])


def _separable(channels, classes):
    """A depthwise-separable network (a depthwise 3 x 3 with batch norm, a pointwise)."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(channels, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 4, 1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 64, classes))


def test_column_combining_packs_depthwise_layers_as_the_import_does(tmp_path):
    # A depthwise layer's groups are those of its filter matrix over all input channels
    # (as the ONNX import makes it): the import keeps them with nothing pruned, and the
    # integer network on an alpha-4 array follows the float one. For the TQ array the
    # revealed weights are those of the same matrix.
    torch.manual_seed(SEED)
    spec = TrainSpec("separable", "digits", epochs=4, lr=0.01, column_combine=ColumnCombine(
        alpha=4, sparsity=0.6, points=1, retrain_epochs=1, final_epochs=2))
    report = train(spec, tmp_path, model=_separable(1, 10))
    network = load_onnx(tmp_path / "model.onnx")
    layers = [step for step in network.steps if hasattr(step, "groups")]
    depthwise = layers[1]
    assert depthwise.weights.shape == (8, 72) and len(depthwise.groups) >= 18
    for layer in layers:
        assert pack(layer.weights, 4, 0.5, groups=layer.groups).pruned == 0
    schedule, _ = infer(tmp_path / "model.onnx", "digits", rows=16, cols=16, alpha=4)
    print(schedule["float_accuracy"], schedule["integer_accuracy"])
    assert schedule["tiles"] == report["phases"][-1]["tiles"]
    assert schedule["float_accuracy"] > 0.5
    assert schedule["integer_accuracy"] >= schedule["float_accuracy"] - 0.03
    tq = TermQuantization(4, 6, 2)
    w = torch.randn(8, 1, 3, 3, dtype=torch.float64)
    full = np.zeros((8, 8, 3, 3))
    full[np.arange(8), np.arange(8)] = w[:, 0].numpy()
    want = revealed_weights(torch.from_numpy(full), tq).numpy()[np.arange(8), np.arange(8)]
    assert np.array_equal(revealed_weights(w, tq, groups=8).numpy()[:, 0], want)


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    whole = train(TINY_CC, tmp_path / "whole")
    calls = []

    def interrupt(text):
        calls.append(text)
        if len(calls) == 3:                        # during prune 2/2's only epoch
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(TINY_CC, tmp_path / "cut", progress=interrupt)
    with pytest.raises(TrainError, match="--resume"):
        train(TINY_CC, tmp_path / "cut")
    resumed = train(TINY_CC, tmp_path / "cut", resume=True)
    assert [p["accuracy"] for p in resumed["phases"]] == \
        [p["accuracy"] for p in whole["phases"]]
    a, b = (load_onnx(tmp_path / d / "model.onnx") for d in ("whole", "cut"))
    for x, y in zip(a.steps, b.steps):
        if hasattr(x, "weights"):
            assert np.array_equal(x.weights, y.weights) and x.groups == y.groups


def test_bad_checkpoints(tmp_path):
    (tmp_path / "cut").mkdir()
    with pytest.raises(TrainError, match="no checkpoint"):
        train(TINY_CC, tmp_path / "cut", resume=True)
    (tmp_path / "cut" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(TrainError, match="not a codnn training checkpoint"):
        train(TINY_CC, tmp_path / "cut", resume=True)
    torch.save({"spec": "lenet5"}, tmp_path / "cut" / "checkpoint.pt")
    with pytest.raises(TrainError, match="not a codnn training checkpoint"):
        train(TINY_CC, tmp_path / "cut", resume=True)
    spec = {**TINY_CC.__dict__, "column_combine": TINY_CC.column_combine.__dict__}
    model = build_model("vgg6", (1, 8, 8))
    torch.save({"spec": {**spec, "epochs": 2}, "model": model.state_dict()},
               tmp_path / "cut" / "checkpoint.pt")
    with pytest.raises(TrainError, match="differs in epochs"):
        train(TINY_CC, tmp_path / "cut", resume=True)
    torch.save({"spec": spec, "model": model.state_dict()}, tmp_path / "cut" / "checkpoint.pt")
    with pytest.raises(TrainError, match="does not match model 'lenet5'"):
        train(TINY_CC, tmp_path / "cut", resume=True)


@pytest.mark.parametrize("change, message", [
    ({"model": "alexnet"}, "unknown model"), ({"data": "cifar"}, "unknown data set"),
    ({"epochs": 0}, "at least 1"), ({"lr": 0.0}, "learning rate"),
    ({"column_combine": ColumnCombine(sparsity=1.0)}, "sparsity"),
    ({"column_combine": ColumnCombine(alpha=0)}, "alpha >= 1"),
    ({"column_combine": ColumnCombine(schedule="random")}, "unknown schedule"),
    ({"tq": TermQuantization(8, 40, 2)}, "budget 40: a group of 8 values has at most 32"),
    ({"bfp": BlockFloat()}, "a run of its own"),
    ({"column_combine": None, "bfp": BlockFloat(widths=(2, 3))}, "rise by 2"),
    ({"column_combine": None, "bfp": BlockFloat(every=0)}, "every >= 1"),
])
def test_impossible_settings_are_refused(tmp_path, change, message):
    spec = TrainSpec(**{**TINY_CC.__dict__, **change})
    with pytest.raises(TrainError, match=message):
        train(spec, tmp_path)
    assert not any(tmp_path.iterdir())


def test_revealed_weights_and_truncated_data_equal_golden():
    rng = np.random.default_rng(SEED)
    tq = TermQuantization(g=8, alpha=5, beta=2, encoding="naf", mag_bits=7)
    w = rng.normal(0, 0.2, (6, 3, 3, 3))
    w[0] = 0.0                                         # an all-zero filter
    w[1, 0, 0, 0] = -np.abs(w).max() * 1.5             # the peak is negative
    matrix = w.reshape(6, -1)
    scale = np.abs(matrix).max() / 127
    expected = ungroup(reveal(group(quantize(matrix, scale), 8), 5), 27) * scale
    got = revealed_weights(torch.tensor(w), tq).numpy().reshape(6, -1)
    assert np.array_equal(got, expected)
    x = rng.uniform(0, 2, (4, 3, 5, 5))
    x[0, 0] = 0.0
    peak = x.max()
    x[1, 0, 0, :] = (np.arange(5) + 0.5) * peak / 127   # exactly on rounding ties
    scale = peak / 127
    expected = truncate(quantize(x, scale), 2) * scale
    assert np.array_equal(truncated_data(torch.tensor(x), tq).numpy(), expected)
    assert np.array_equal(truncated_data(torch.zeros(3), tq).numpy(), np.zeros(3))


def test_term_quantized_forward_and_its_gradient():
    torch.manual_seed(SEED)
    tq = TermQuantization(g=4, alpha=3, beta=2)
    model = build_model("lenet5", (1, 8, 8)).eval()
    x = torch.rand(3, 1, 8, 8)
    first = array_layers(model)[0]
    with torch.no_grad():
        plain = model(x)
        w = first.weight.clone()
    hooks = attach(model, tq)
    y = model(x)
    y.sum().backward()
    assert not torch.allclose(y, plain)
    assert torch.equal(first.weight, revealed_weights(w, tq))
    assert first.parametrizations.weight.original.grad.abs().sum() > 0  # straight-through
    detach(model, hooks)
    assert torch.equal(first.weight, w)
    with torch.no_grad():
        assert torch.equal(model(x), plain)


def test_calibrated_forward_computes_on_the_integer_networks_grids(tmp_path):
    """After ``calibrate`` every layer's weights in the forward pass are the integer
    network's codes revealed, times one scale, and the first layer's data its input
    codes truncated: the grids ``codnn infer --engine tq`` takes, not max-abs ones."""
    torch.manual_seed(SEED)
    tq = TermQuantization(g=4, alpha=3, beta=2)
    model = build_model("lenet5", (1, 8, 8)).eval()
    x = np.random.default_rng(SEED).uniform(0, 1, (16, 1, 8, 8))
    export_onnx(model, tmp_path / "plain.onnx", (1, 8, 8))
    integer = quantize_network(load_onnx(tmp_path / "plain.onnx"), x, alpha=1, gamma=0.0,
                               tq=tq)
    attach(model, tq)
    calibrate(model, tq, (1, 8, 8), x)
    seen = []
    array_layers(model)[0].register_forward_hook(lambda _, args, out: seen.append(args[0]))
    with torch.no_grad():
        model(torch.tensor(x, dtype=torch.float32))
    codes = integer.quantize_input(x)
    assert np.allclose(seen[0].double().numpy(), truncate(codes, 2) * integer.input_scale,
                       rtol=1e-6)
    coarser = 0
    for layer, step in zip(array_layers(model), integer.array_layers):
        q = step.packed.dense()
        kept = ungroup(reveal(group(q, 4), 3), q.shape[1])
        w = layer.weight.detach().double().numpy().reshape(len(q), -1)
        scale = np.abs(w).max() / np.abs(kept).max()
        assert np.allclose(w, kept * scale, rtol=1e-5), step.name
        coarser += int(np.abs(q).max() < 127)
    assert coarser                  # a layer whose grid is not its weights' max-abs one


def test_truncated_data_on_a_layers_static_grid():
    tq = TermQuantization(g=4, alpha=3, beta=2)
    x = torch.tensor([-9.0, -1.3, -0.25, 0.0, 0.25, 0.7, 2.1, 9.0], dtype=torch.float64)
    signed = LayerScales(0.1, None, True)
    values = np.clip(np.floor(x.numpy() / 0.1 + 0.5), -64, 63)    # -64 .. 63, half up
    want = np.sign(values) * truncate(np.abs(values).astype(np.int64), 2) * 0.1
    assert np.allclose(truncated_data(x, tq, scales=signed).numpy(), want)
    unsigned = LayerScales(0.1, 0.2, False)                         # 0 .. 127
    values = np.clip(np.floor(x.numpy() / 0.1 + 0.5), 0, 127)
    want = truncate(values.astype(np.int64), 2) * 0.1
    assert np.allclose(truncated_data(x, tq, scales=unsigned).numpy(), want)


@pytest.mark.parametrize("clip", ["max", "mse"])
def test_term_quantization_run_exports_float_weights_for_the_tq_array(tmp_path, clip):
    spec = TrainSpec("lenet5", "digits", epochs=2, lr=0.01, tq=TermQuantization(8, 12, 3),
                     tq_epochs=1, calibrate=clip)
    report = train(spec, tmp_path)
    assert [p["phase"] for p in report["phases"]] == ["dense", "term quantization"]
    assert report["spec"]["calibrate"] == clip
    schedule, _ = infer(tmp_path / "model.onnx", "digits", rows=8, cols=8, alpha=1,
                        tq=spec.tq, clip=clip)
    # The TQ array's integer network (its own scales, calibrated as in training) scores
    # as the training forward did.
    print(report["accuracy"], schedule["integer_accuracy"])
    assert schedule["integer_accuracy"] > 0.75
    assert abs(schedule["integer_accuracy"] - report["accuracy"]) <= 0.03


def test_revealed_weights_of_packed_columns_equal_golden():
    # The column-combined TQ array's reveal (semantics section 3) in training: a pruned
    # layer's kept weights revealed in groups of g packed columns, as reveal_packed does.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    tq = TermQuantization(g=4, alpha=5, beta=2)
    w = rng.normal(0, 0.2, (6, 2, 3, 3)) * (rng.random((6, 2, 3, 3)) < 0.4)
    matrix = w.reshape(6, -1)
    scale = np.abs(matrix).max() / 127
    packed = pack(quantize(matrix, scale), 4, 1.0)
    pruned = np.where(packed.dense() != 0, matrix, 0.0)        # the masks' weights
    assert len(packed.groups) < matrix.shape[1] and packed.pruned > 0
    got = revealed_weights(torch.tensor(pruned.reshape(w.shape)), tq,
                           packing=packed.groups).numpy().reshape(6, -1)
    expected = reveal_packed(packed, g=4, budget=5).dense() * scale
    assert np.array_equal(got, expected)
    assert not np.array_equal(got, revealed_weights(torch.tensor(pruned.reshape(w.shape)),
                                                    tq).numpy().reshape(6, -1))


def test_column_combined_tq_run_scores_as_infer_on_that_array(tmp_path):
    # --column-combine then --tq: fine-tuning on the column-combined TQ array; infer
    # --engine cc-tq with the run's alpha and gamma scores as the training forward did.
    cc = ColumnCombine(alpha=4, gamma=0.5, sparsity=0.6, points=1, final_epochs=1)
    spec = TrainSpec("lenet5", "digits", epochs=2, lr=0.01, column_combine=cc,
                     tq=TermQuantization(8, 12, 3), tq_epochs=1)
    report = train(spec, tmp_path)
    assert [p["phase"] for p in report["phases"]] == ["dense", "prune 1/1",
                                                      "term quantization"]
    schedule, _ = infer(tmp_path / "model.onnx", "digits", rows=8, cols=8, alpha=4,
                        gamma=0.5, tq=spec.tq)
    print(report["accuracy"], schedule["integer_accuracy"])
    assert schedule["array"]["engine"] == "cc-tq" and schedule["integer_accuracy"] > 0.7
    assert abs(schedule["integer_accuracy"] - report["accuracy"]) <= 0.03


def test_block_float_layers_round_as_golden():
    torch.manual_seed(SEED)
    settings = BlockFloat(widths=(4,), seed=7)
    model = build_model("lenet5", (1, 8, 8))
    first = array_layers(model)[0]
    w = first.weight.detach().clone()
    state, _ = attach_bfp(model, settings, steps=10)
    state.step = 3
    x = torch.rand(5, 1, 8, 8)
    seen = {}
    first.register_forward_hook(lambda m, args, out: seen.update(x=args[0], w=m.weight))
    model(x).sum().backward()
    # weights: blocks along input channels, stochastic with the step's seed
    expected = np.moveaxis(block_float(np.moveaxis(w.numpy(), 1, -1), 4, rounding="stochastic",
                                       seed=state.seed(0, "weight")), -1, 1)
    assert np.array_equal(seen["w"].detach().numpy(), expected.astype(np.float32))
    assert np.array_equal(quantize_tensor(x, 4, 16, stochastic=False, seed=0).numpy(),
                          np.moveaxis(block_float(np.moveaxis(x.numpy(), 1, -1), 4), -1, 1)
                          .astype(np.float32))
    assert state.chosen[0, "gradient"] == 4
    # every product of the step counted at 4 x 4 bits, three times (forward and backward)
    assert state.bit_ops == 48 * state.macs > 0


@pytest.mark.long
def test_block_float_run_resumes_with_its_costs(tmp_path):
    spec = TrainSpec("lenet5", "digits", epochs=2, bfp=BlockFloat(every=4))
    whole = train(spec, tmp_path / "whole")
    row = whole["phases"][0]
    assert row["phase"] == "block floating point"
    assert 3 * 2 * 2 <= row["bits_per_mac"] <= 3 * 8 * 8
    assert row["bfp8_bit_ops"] == 192 * row["macs"] and row["fp32_bit_ops"] == 1728 * row["macs"]

    def interrupt(text):
        if "epoch 2/2" in text:                      # epoch 1 is checkpointed by then
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(spec, tmp_path / "cut", progress=interrupt)
    resumed = train(spec, tmp_path / "cut", resume=True)
    for key in ("accuracy", "bit_ops", "macs", "final_widths"):
        assert resumed["phases"][0][key] == row[key], key


def _cli(capsys, *argv):
    from codnn.cli import main
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_trains_and_reports(tmp_path, capsys):
    code, out, err = _cli(capsys, "train", "lenet5", "--data", "digits", "--epochs", "1",
                          "--column-combine", "alpha=4", "--points", "1", "--final-epochs",
                          "1", "-o", str(tmp_path))
    assert code == 0, err
    assert "prune 1/1" in out and "classifier.5" in out and "dense: epoch 1/1" in err
    assert (tmp_path / "model.onnx").is_file() and (tmp_path / "report.json").is_file()


@pytest.mark.parametrize("argv, message", [
    (["resnet50"], "unknown model 'resnet50': one of lenet5, vgg6, resnet20, or "
                   "FILE.py:FUNCTION"),
    (["nosuch.py:build"], "model file nosuch.py does not exist"),
    (["lenet5", "--data", "imagenet"], "unknown data set 'imagenet': one of mnist, digits, "
                                       "or an existing .npz of x and y"),
    (["lenet5", "--column-combine", "beta=3"], "expected alpha=...,gamma=..."),
    (["lenet5", "--column-combine", "alpha=x"], "alpha='x' is not a int"),
    (["lenet5", "--column-combine", "alpha=4", "--sparsity", "1.5"], "sparsity must lie"),
    (["lenet5", "--calibrate", "mse"], "--calibrate chooses the scales of --tq's integer "
                                       "grids: give it with --tq"),
])
def test_cli_bad_arguments(tmp_path, capsys, argv, message):
    code, out, err = _cli(capsys, "train", *argv, "-o", str(tmp_path / "out"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


_USER_MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    # batch norm applied in forward, a strided residual with a 1 x 1 shortcut, max pool,
    # a global average and a linear head, as a user writes a small CNN
    def __init__(self, shape, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(shape[0], 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.short = nn.Conv2d(8, 8, 1, stride=2)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x) + self.short(x))
        x = nn.functional.max_pool2d(x, 2)
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


def build(shape, classes):
    return Net(shape, classes)


def not_a_module(shape, classes):
    return 3


def wrong_scores(shape, classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(shape[1] * shape[2], classes + 1))


def broken(shape, classes):
    return nn.Sequential(nn.Conv2d(shape[0] + 1, 2, 3))


def gated(shape, classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(shape[1] * shape[2], classes), nn.Sigmoid())
"""


def test_a_users_own_model_trains_with_column_combining(tmp_path, capsys):
    (tmp_path / "net.py").write_text(_USER_MODEL)
    code, out, err = _cli(capsys, "train", f"{tmp_path / 'net.py'}:build", "--data",
                          "digits", "--epochs", "1", "--column-combine", "alpha=4",
                          "--points", "1", "--final-epochs", "1", "-o", str(tmp_path / "o"),
                          "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [row["name"] for row in report["layers"]] == ["conv1", "conv2", "short", "fc"]
    schedule, _ = infer(tmp_path / "o" / "model.onnx", "digits", rows=16, cols=16, alpha=4)
    assert schedule["tiles"] == report["phases"][-1]["tiles"]


@pytest.mark.parametrize("function, extra, message", [
    ("missing", (), "has no function missing"),
    ("not_a_module", (), "returns a int, not a torch.nn.Module"),
    ("wrong_scores", (), "its forward gives (2, 11) for a batch of 2, not (2, 10)"),
    ("broken", (), "its forward fails on a batch of 2 x 1 x 8 x 8 inputs: RuntimeError"),
    ("build", ("--tq", "g=8"), "--tq trains the folded weights: batch normalization 'bn1' "
                               "cannot be folded"),
    ("gated", ("--tq", "g=8"), "--tq calibrates on the integer network: unsupported "
                               "operator Sigmoid"),
])
def test_a_users_model_that_cannot_train_is_refused_in_one_line(tmp_path, capsys, function,
                                                               extra, message):
    (tmp_path / "net.py").write_text(_USER_MODEL)
    code, out, err = _cli(capsys, "train", f"{tmp_path / 'net.py'}:{function}", "--data",
                          "digits", *extra, "-o", str(tmp_path / "o"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_a_users_model_trains_on_a_users_npz(tmp_path, capsys):
    # Three classes of digits as an .npz with its own test split: the model is built for
    # three classes, and what it exports imports.
    from sklearn.datasets import load_digits
    digits = load_digits()
    keep = digits.target < 3
    x = (digits.data[keep] / 16.0).reshape(-1, 1, 8, 8)
    y = digits.target[keep]
    np.savez(tmp_path / "three.npz", x=x[:400], y=y[:400], x_test=x[400:], y_test=y[400:])
    (tmp_path / "net.py").write_text(_USER_MODEL)
    code, out, err = _cli(capsys, "train", f"{tmp_path / 'net.py'}:build", "--data",
                          str(tmp_path / "three.npz"), "--epochs", "4", "--lr", "0.02", "-o",
                          str(tmp_path / "o"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["train_images"] == 400 and report["test_images"] == len(y) - 400
    assert report["phases"][0]["accuracy"] > 0.5               # three classes: chance 1/3
    assert load_onnx(tmp_path / "o" / "model.onnx").run(x[:2]).shape == (2, 3)


@pytest.mark.parametrize("arrays, message", [
    ({"x": np.zeros((10, 1, 8, 8))}, "has no array 'y' (it has x): training needs inputs x "
                                     "and labels y"),
    ({"x": np.zeros((10, 1, 8, 8)), "y": -np.ones(10, int)}, "y must be 10 integer labels "
                                                            "from 0, not int64 (10,) reaching -1"),
    ({"x": np.full((10, 1, 8, 8), np.nan), "y": np.zeros(10, int)}, "x holds NaN"),
    ({"x": np.zeros((10, 1, 8, 8)), "y": np.zeros(10, int), "x_test": np.zeros((2, 1, 4, 4)),
      "y_test": np.zeros(2, int)}, "x_test items have shape (1, 4, 4), x items (1, 8, 8)"),
    ({"x": np.zeros((1, 1, 8, 8)), "y": np.zeros(1, int)}, "1 items do not split into train "
                                                          "and test"),
    ({"x": np.zeros((10, 1, 8, 8)), "y": np.zeros(10, int)}, "its forward fails on a batch "
                                                            "of 2 x 1 x 8 x 8"),
])
def test_a_users_data_that_does_not_fit_is_refused_in_one_line(tmp_path, capsys, arrays,
                                                                message):
    np.savez(tmp_path / "d.npz", **arrays)
    (tmp_path / "net.py").write_text(_USER_MODEL)
    code, out, err = _cli(capsys, "train", f"{tmp_path / 'net.py'}:broken", "--data",
                          str(tmp_path / "d.npz"), "-o", str(tmp_path / "o"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_the_python_example_in_the_docs_runs(tmp_path, monkeypatch):
    # docs/training.md, "From Python": a module and arrays of the user's through
    # column combining, as written there.
    from pathlib import Path
    text = (Path(__file__).parent.parent / "docs" / "training.md").read_text()
    section = text.split("## From Python", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "docs/training.md", "exec"), {})
    report = json.loads((tmp_path / "build" / "api-example" / "report.json").read_text())
    assert [p["phase"] for p in report["phases"]] == ["dense", "prune 1/1"]
    network = load_onnx(tmp_path / "build" / "api-example" / "model.onnx")
    assert network.run(np.zeros((1, 1, 8, 8))).shape == (1, 10)


@pytest.mark.parametrize("data, message", [
    (("not", "arrays", "at"), "give a Dataset, a name or .npz path"),
    ((np.zeros((4, 1, 8, 8)), np.zeros(3, int)), "y must be 4 integer labels from 0"),
])
def test_python_data_that_does_not_fit_is_refused(tmp_path, data, message):
    with pytest.raises(TrainError, match=message):
        train(TrainSpec("net", "mine", epochs=1), tmp_path / "o", data=data,
              model=build_model("lenet5", (1, 8, 8)))


def test_without_pytorch_the_command_says_how_to_install_it():
    blocker = ("import sys\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] == 'torch':\n"
               "            raise ImportError('No module named torch')\n"
               "sys.meta_path.insert(0, Block())\n"
               "from codnn.cli import main\n"
               "sys.exit(main(['train', 'lenet5']))\n")
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("codnn train needs PyTorch (No module named torch): "
                                   "pip install 'codnn[train]'")


def test_a_tq_budget_no_data_can_fill_is_refused(tmp_path, capsys):
    code, _, err = _cli(capsys, "train", "lenet5", "--data", "digits", "--tq",
                        "g=8,budget=40,beta=2", "-o", str(tmp_path / "o"))
    assert code == 2 and "budget 40: a group of 8 values has at most 32 terms" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_the_tq_budget_is_not_spelled_alpha(tmp_path, capsys):
    # --column-combine's alpha is data streams a column; the TQ array's terms a group are
    # its budget: --tq refuses alpha= in one line, naming the keys it takes.
    code, _, err = _cli(capsys, "train", "lenet5", "--data", "digits", "--tq",
                        "g=8,alpha=12,beta=3", "-o", str(tmp_path / "o"))
    assert code == 2 and "expected g=...,budget=...,beta=...,encoding=..." in err, err
    assert not (tmp_path / "o").exists()
