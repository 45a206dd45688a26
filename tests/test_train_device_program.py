"""PyTorch models as training programs (codnn.train.device_program, semantics section 11):
LeNet-5 converts layer for layer and its golden forward pass agrees with torch's; models
that are not chains of the program's layers are refused in one line; a golden state's
weights go back into the model."""

import numpy as np
import pytest
import torch
from torch import nn

from codnn.golden.bfp_training import (Conv, Dense, Flatten, MaxPool, ReLU, TrainingError,
                                       TrainingSettings, evaluate, initial_state, train_step)
from codnn.train.device_program import load_weights, program_layers, program_weights
from codnn.train.models import build_model

SEED = 20261207


def test_lenet5_converts_and_its_forward_agrees_with_torch():
    torch.manual_seed(SEED)
    print("seed", SEED)
    model = build_model("lenet5", (1, 28, 28))
    layers = program_layers(model, (1, 28, 28))
    assert layers == [Conv(6, 1, 5, 1, 2), ReLU(), MaxPool(2), Conv(16, 6, 5, 1, 0), ReLU(),
                      MaxPool(2), Flatten(), Dense(120, 400), ReLU(), Dense(84, 120),
                      ReLU(), Dense(10, 84)]
    state = initial_state(layers, program_weights(model))
    x = torch.rand(32, 1, 28, 28, generator=torch.Generator().manual_seed(SEED))
    with torch.no_grad():
        expected = model.eval()(x).numpy()
    classes, logits = evaluate(layers, TrainingSettings(), state, x.numpy())
    assert np.abs(logits - expected).max() < 0.03 * np.abs(expected).max()
    assert (classes == expected.argmax(1)).mean() >= 0.9


def test_weights_go_back_into_the_model():
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, bias=False), nn.ReLU(), nn.Flatten(),
                          nn.Linear(72, 3))
    layers = program_layers(model, (1, 8, 8))
    state = initial_state(layers, program_weights(model))
    assert np.array_equal(state.weights[0][1], np.zeros(2, np.float32))
    later, report = train_step(layers, TrainingSettings(batch=4, lr=0.5), state,
                               np.random.default_rng(SEED).random((4, 1, 8, 8)),
                               np.array([0, 1, 2, 0]))
    assert not report["nonfinite"]
    load_weights(model, later.weights)
    assert np.array_equal(program_weights(model)[0][1], later.weights[0][1])
    assert np.array_equal(program_weights(model)[1][0], later.weights[1][0])


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, padding=1)
        self.flat = nn.Flatten()
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.flat(self.conv(x) + x))


@pytest.mark.parametrize("model,message", [
    (lambda: build_model("resnet20", (1, 28, 28)), "no backward pass"),
    (lambda: _Residual(), "not the chain"),
    (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, groups=1, dilation=2), nn.Flatten(),
                           nn.Linear(32, 10)), "dilation"),
    (lambda: nn.Sequential(nn.MaxPool2d(2, 1), nn.Flatten(), nn.Linear(49, 10)), "own stride"),
    (lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.Softmax(1)), "Softmax"),
])
def test_models_that_are_not_training_programs(model, message):
    with pytest.raises(TrainingError, match=message):
        program_layers(model(), (1, 8, 8) if message != "no backward pass" else (1, 28, 28))


def _cli(capsys, *argv):
    from codnn.cli import main
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_codnn_train_device_step_learns_and_exports(capsys, tmp_path):
    import json

    from codnn.model.onnx_import import load_onnx
    code, out, err = _cli(capsys, "train", "lenet5", "--data", "digits", "--device-step",
                          "--epochs", "6", "--lr", "0.1", "--bfp-widths", "4,6", "--seed",
                          str(SEED), "-o", str(tmp_path / "run"), "--json")
    assert code == 0, err
    report = json.loads(out)
    accuracies = [row["accuracy"] for row in report["epochs"]]
    assert accuracies[-1] > 0.6 and accuracies[-1] > accuracies[0] + 0.3
    assert 4 * 4 * 3 <= report["bits_per_mac"] <= 6 * 6 * 3
    assert all(set(w) <= {4, 6} for w in report["widths"])
    assert "epoch 6/6" in err
    network = load_onnx(report["model"])
    assert json.loads((tmp_path / "run" / "report.json").read_text())["accuracy"] == \
        report["accuracy"]
    assert network is not None


@pytest.mark.parametrize("argv,message", [
    (["--tq", "g=8"], "not with --tq"),
    (["--column-combine", "alpha=8"], "not with --column-combine"),
    (["--bfp-widths", "9"], "widths must lie in 2..8"),
    (["--batch", "5000"], "batch must lie"),
])
def test_codnn_train_device_step_bad_settings(capsys, tmp_path, argv, message):
    code, _, err = _cli(capsys, "train", "lenet5", "--data", "digits", "--device-step",
                        "--epochs", "1", *argv, "-o", str(tmp_path / "run"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_codnn_train_device_step_refuses_a_residual_network(capsys, tmp_path):
    code, _, err = _cli(capsys, "train", "resnet20", "--data", "digits", "--device-step",
                        "-o", str(tmp_path / "run"))
    assert code == 2 and "no backward pass" in err
