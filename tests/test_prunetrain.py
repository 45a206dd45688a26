"""PruneTrain (codnn.train.prunetrain): the channel spaces of the built-in networks, a
reconfiguration that leaves the function as it is when the removed channels are unused,
the training FLOPs counted by hand, the group lasso, runs that shrink the network and
resume, and what it refuses."""

import numpy as np
import pytest
import torch
from torch import nn

from codnn.model.onnx_import import load_onnx
from codnn.train import TrainError
from codnn.train.models import build_model
from codnn.train.prunetrain import (PruneTrain, channel_spaces, channels, group_lasso,
                                    reconfigure, training_flops)
from codnn.train.run import ColumnCombine, TrainSpec, train

SEED = 20261128


def _free(spaces):
    return [(s.size, len(s.producers), len(s.consumers)) for s in spaces if not s.fixed]


def test_channel_spaces_follow_chains_and_join_at_residual_adds():
    assert _free(channel_spaces(build_model("lenet5", (1, 28, 28)), (1, 28, 28))) == \
        [(6, 1, 1), (16, 1, 1), (120, 1, 1), (84, 1, 1)]
    spaces = channel_spaces(build_model("resnet20", (1, 28, 28)), (1, 28, 28))
    # Each stage's blocks add into one space: the stem (or the projection) and three
    # bodies write it; the next blocks' convolutions (and shortcuts) read it.
    joined = [s for s in _free(spaces) if s[1] > 1]
    assert joined == [(16, 4, 5), (32, 4, 4), (64, 4, 3)]
    assert sum(s.fixed for s in spaces) == 2                    # the input and the logits


@pytest.mark.parametrize("name", ["lenet5", "vgg6", "resnet20"])
def test_removing_unused_channels_keeps_the_function(name):
    # Every other channel of every prunable space is read by nothing (its consumers'
    # input weights zero): the rebuilt network has half the channels, fewer FLOPs and
    # the same outputs.
    torch.manual_seed(SEED)
    shape = (1, 28, 28)
    model = build_model(name, shape).eval()
    modules = dict(model.named_modules())
    with torch.no_grad():
        for space in channel_spaces(model, shape):
            for consumer, per in ([] if space.fixed else space.consumers):
                w = modules[consumer].weight
                view = w if w.dim() == 4 else w.view(w.shape[0], -1, per)
                view[:, ::2] = 0
    x = torch.rand(4, *shape)
    before, flops, count = model(x), training_flops(model, shape), channels(model, shape)
    kept = reconfigure(model, shape, 1e-6)
    assert all(k == list(range(1, len(k) * 2, 2)) for k in kept)
    assert channels(model, shape) == count // 2 and training_flops(model, shape) < flops
    assert torch.allclose(model.eval()(x), before, atol=1e-5)


def test_training_flops_are_six_per_multiply_accumulate():
    # LeNet-5 on 28 x 28: conv1 28*28*6*25, conv2 10*10*16*150, then 400*120, 120*84,
    # 84*10 multiply-accumulates; forward, backward data and backward weights, 2 each.
    macs = 28 * 28 * 6 * 25 + 10 * 10 * 16 * 150 + 400 * 120 + 120 * 84 + 84 * 10
    assert training_flops(build_model("lenet5", (1, 28, 28)), (1, 28, 28)) == 6 * macs


def test_group_lasso_sums_every_channel_group_but_the_networks_ends():
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4, 5))
    a, b = model[0].weight, model[3].weight
    # conv's output channels (its input is the network's) and the Linear's inputs, four
    # per channel after the flatten (its output is the network's)
    want = a.flatten(1).norm(dim=1).sum() + \
        b.view(5, 3, 4).transpose(0, 1).flatten(1).norm(dim=1).sum()
    got = group_lasso(model, channel_spaces(model, (2, 4, 4)))
    assert torch.allclose(got, want)


def _small(**change):
    return TrainSpec(**{"model": "lenet5", "data": "mnist", "epochs": 3, **change})


@pytest.mark.long
def test_a_prunetrain_run_shrinks_the_network_and_resumes(tmp_path):
    # LeNet-5 on MNIST, rebuilt after each of three epochs, the mini-batch growing.
    spec = _small(prunetrain=PruneTrain(interval=1, grow=True))
    whole = train(spec, tmp_path / "whole")
    epochs = whole["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3] and all(e["rebuilt"] for e in epochs)
    assert 50 < epochs[-1]["channels"] < 6 + 16 + 120 + 84
    assert epochs[-1]["accuracy"] > 0.5
    assert epochs[-1]["train_flops"] < epochs[0]["train_flops"]
    row = whole["phases"][0]
    assert row["phase"] == "prunetrain" and row["flops_ratio"] < 1
    assert row["train_flops"] == sum(e["train_flops"] for e in epochs)
    network = load_onnx(tmp_path / "whole" / "model.onnx")   # the smaller network imports
    widths = [step.weights.shape[0] for step in network.steps if hasattr(step, "weights")]
    assert sum(widths[:-1]) == epochs[-1]["channels"]

    def interrupt(text):
        if "epoch 3/3" in text:                    # two rebuilds are checkpointed by then
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(spec, tmp_path / "cut", progress=interrupt)
    resumed = train(spec, tmp_path / "cut", resume=True)
    assert resumed["epochs"] == [{**e, "seconds": r["seconds"]}
                                 for e, r in zip(epochs, resumed["epochs"])]
    a, b = (load_onnx(tmp_path / d / "model.onnx") for d in ("whole", "cut"))
    for x, y in zip(a.steps, b.steps):
        if hasattr(x, "weights"):
            assert np.array_equal(x.weights, y.weights)


@pytest.mark.long
def test_column_combining_follows_prunetrain(tmp_path):
    spec = _small(epochs=1, prunetrain=PruneTrain(interval=1),
                  column_combine=ColumnCombine(alpha=4, points=1, final_epochs=1))
    report = train(spec, tmp_path)
    assert [p["phase"] for p in report["phases"]] == ["prunetrain", "prune 1/1"]
    assert report["phases"][-1]["sparsity"] >= 0.79


class _Concatenating(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 2, 3, padding=1), nn.Conv2d(1, 2, 3, padding=1)
        self.fc = nn.Linear(4 * 28 * 28, 10)

    def forward(self, x):
        return self.fc(torch.cat([self.a(x), self.b(x)], 1).flatten(1))


@pytest.mark.parametrize("change, message", [
    ({"prunetrain": PruneTrain(penalty=1.0)}, r"penalty must lie in \(0, 1\), not 1.0"),
    ({"prunetrain": PruneTrain(interval=0)}, "interval must be a positive number"),
    ({"prunetrain": PruneTrain(threshold=0.0)}, "threshold must be positive"),
])
def test_impossible_prunetrain_settings_are_refused(tmp_path, change, message):
    with pytest.raises(TrainError, match=message):
        train(_small(**change), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("model, message", [
    (_Concatenating(), "cat: PruneTrain cannot follow channels through cat"),
    (nn.Sequential(nn.Conv2d(1, 4, 3), nn.Conv2d(4, 4, 3, groups=2), nn.Flatten(),
                   nn.Linear(4 * 24 * 24, 10)),
     "1: a grouped convolution; PruneTrain rebuilds dense convolutions only"),
])
def test_a_model_prunetrain_cannot_rebuild_is_refused_before_training(tmp_path, model,
                                                                       message):
    with pytest.raises(TrainError, match=message):
        train(_small(prunetrain=PruneTrain()), tmp_path / "out", model=model)
    assert not (tmp_path / "out").exists()


def _cli(capsys, *argv):
    from codnn.cli import main
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_runs_prunetrain_and_prints_its_epochs(tmp_path, capsys):
    code, out, err = _cli(capsys, "train", "lenet5", "--data", "digits", "--epochs", "1",
                          "--prunetrain", "-o", str(tmp_path))
    assert code == 0, err
    assert "PruneTrain, per epoch" in out and "training FLOPs" in out
    assert "prunetrain: epoch 1/1" in err and "channels" in err


@pytest.mark.parametrize("argv, message", [
    (["--prunetrain", "penalty=1.5"], "the PruneTrain penalty must lie in (0, 1), not 1.5"),
    (["--prunetrain", "interval=x"], "interval='x' is not a int"),
    (["--prunetrain", "rate=3"], "expected penalty=...,interval=...,threshold=...,grow=..."),
    (["--prunetrain", "grow=2"], "grow='2' is not a flag"),
    (["--prunetrain", "--block-float"], "not with PruneTrain"),
])
def test_cli_bad_prunetrain_arguments(tmp_path, capsys, argv, message):
    code, _, err = _cli(capsys, "train", "lenet5", *argv, "-o", str(tmp_path / "out"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.long
def test_the_mini_batch_grows_as_the_network_shrinks(tmp_path):
    # grow=1: after a rebuild the batch is the first one times the dense network's
    # training FLOPs per sample over the smaller network's.
    spec = _small(epochs=2, prunetrain=PruneTrain(interval=1, grow=True))
    epochs = train(spec, tmp_path)["epochs"]
    assert epochs[0]["batch"] == 64
    flops = [e["train_flops"] for e in epochs]
    assert flops[1] < flops[0] and epochs[1]["batch"] == int(64 * flops[0] / flops[1])
