"""``codnn train --device-step``: a whole run of the training step a training engine must
compute (semantics section 11, ``codnn.golden.bfp_training``) on a built-in or user
model: SGD with momentum and weight decay, fixed mantissa widths or FAST's policy, the
test accuracy after each epoch, and the trained weights written back into the model and
exported to ONNX (for ``codnn infer``). NumPy all the way: about 250 training images a
second for LeNet-5 on MNIST."""

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from codnn.golden.bfp_training import (WIDTHS, TrainingError, TrainingSettings,
                                       WidthPolicy, evaluate, initial_state, train_step)
from codnn.model.datasets import as_dataset

from .device_program import load_weights, program_layers, program_weights
from .export import export_onnx
from .models import build_model

__all__ = ["DeviceRun", "device_train", "batches"]

#: Test images evaluated at once.
_CHUNK = 250


@dataclass(frozen=True)
class DeviceRun:
    """A run's settings: one width (fixed) or several (FAST's policy over them, with
    ``a``, ``b`` and ``every``), SGD's rate, momentum and decay."""
    model: str
    data: str
    epochs: int = 5
    batch: int = 64
    lr: float = 0.05
    momentum: float = 0.9
    decay: float = 5e-4
    widths: tuple = (8,)
    a: float = 0.12
    b: float = 0.05
    every: int = 16
    seed: int = 0

    def settings(self, steps):
        """Section 11's settings for a run of ``steps`` steps (``TrainingError`` if out of
        range)."""
        if not self.widths or any(w not in WIDTHS for w in self.widths):
            raise TrainingError(f"mantissa widths must lie in 2..8, not "
                                f"{','.join(map(str, self.widths))}")
        policy = None if len(self.widths) == 1 else WidthPolicy(
            steps, self.a, self.b, self.every, tuple(self.widths))
        settings = TrainingSettings(widths=(self.widths[-1],) * 3, lr=self.lr,
                                    momentum=self.momentum, decay=self.decay,
                                    batch=self.batch, seed=self.seed % (1 << 32),
                                    policy=policy)
        settings.check()
        return settings


def batches(count, batch, seed, epoch):
    """The mini-batches (index arrays) of epoch ``epoch``: a permutation of ``count``
    images drawn from ``seed + epoch``, cut every ``batch``."""
    order = np.random.default_rng(seed + epoch).permutation(count)
    return [order[k:k + batch] for k in range(0, count, batch)]


def device_train(run, out, progress=print):
    """Train ``run.model`` on ``run.data`` with the golden training step; write
    ``OUT/model.onnx`` and ``OUT/report.json``; return the report.

    Raises
    ------
    TrainingError
        For a model that is not a training program, or settings out of range (one line).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)        # before the run: a bad folder fails now
    data = as_dataset(run.data)
    x = data.train_x.astype(np.float32)
    test_x = data.test_x.astype(np.float32)
    shape = x.shape[1:]
    torch.manual_seed(run.seed)
    model = build_model(run.model, shape, data.classes)
    layers = program_layers(model, shape)
    steps = run.epochs * -(-len(x) // run.batch)
    settings = run.settings(steps)
    state = initial_state(layers, program_weights(model))
    epochs, bit_ops, macs, flagged = [], 0, 0, 0
    for epoch in range(run.epochs):
        began, losses = time.perf_counter(), []
        for chosen in batches(len(x), run.batch, run.seed, epoch):
            state, report = train_step(layers, settings, state, x[chosen],
                                       data.train_y[chosen])
            bit_ops, macs = bit_ops + report["bit_ops"], macs + report["macs"]
            flagged += report["nonfinite"]
            if report["loss"] is not None:
                losses.append(report["loss"])
        seconds = time.perf_counter() - began                   # the training pass
        predicted = np.concatenate([evaluate(layers, settings, state,
                                             test_x[k:k + _CHUNK])[0]
                                    for k in range(0, len(test_x), _CHUNK)])
        row = {"epoch": epoch + 1, "loss": float(np.mean(losses)) if losses else None,
               "accuracy": float((predicted == data.test_y).mean()),
               "seconds": seconds}
        epochs.append(row)
        progress(f"epoch {row['epoch']}/{run.epochs}, loss {row['loss']:.4f}, test "
                 f"accuracy {row['accuracy']:.2%}" if row["loss"] is not None else
                 f"epoch {row['epoch']}/{run.epochs}: every step overflowed")
    load_weights(model, state.weights)
    export_onnx(model, out / "model.onnx", shape)
    report = {"model": str(out / "model.onnx"), "train_images": len(x),
              "test_images": len(test_x), "accuracy": epochs[-1]["accuracy"],
              "epochs": epochs, "bits_per_mac": bit_ops / macs if macs else None,
              "nonfinite_steps": flagged, "widths": state.chosen or [list(settings.widths)],
              "settings": asdict(run)}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
