"""Networks a user brings, trained through codnn's module API: float against integer
accuracy with one weight scale per layer and per output channel, and column combining.

Usage: python benchmarks/mobile_networks.py [--models mobilenet_v2,resnet18,separable]
       [--data mnist] [--epochs 8] [--cc-epochs 4] [-o PREFIX]

The networks are written here from their papers' definitions at MNIST's size (torchvision
cannot be installed beside the CPU build of torch on this machine):

- ``mobilenet_v2``: a 3 x 3 stem of stride 2 (16 channels), inverted residual blocks
  (expansion t, channels c, repeats n, stride s) (1, 16, 1, 1), (4, 24, 2, 2),
  (4, 32, 2, 2), (4, 64, 1, 1), each a 1 x 1 expansion, a depthwise 3 x 3 and a linear
  1 x 1 projection with batch norm and ReLU6, the input added (no ReLU after the add)
  where shapes allow; a 1 x 1 to 128 channels, global average pooling, a linear head.
- ``resnet18``: ResNet-18's basic blocks (2, 2, 2, 2) at widths 16, 32, 64, 128, a 3 x 3
  stem, 1 x 1 projection shortcuts where the shape changes.
- ``separable``: MobileNet-v1's depthwise-separable blocks, 16 -> 32 -> 64 -> 64.

Each is trained densely (``--epochs``) with ``codnn.train.run.train`` given the module,
exported, and run by ``codnn infer`` on a 16 x 16 dense array (alpha 1: packing a model
not trained for column combining would prune weights and hide the quantization error)
with one weight scale per layer and with one per output channel. Then it is trained
again with column combining (alpha 8, gamma 0.5, 80 % zeros, ``--cc-epochs`` after the
last prune point) and run on a 16 x 16 array with alpha 8 and per-channel scales: tiles
against the dense tiles of the same weights. Prints a table, writes PREFIX.json. Needs the
``train`` extra (PyTorch CPU); about ten minutes for the three on this machine's two
cores. The models stay beside PREFIX (``PREFIX-MODEL.onnx``, ``PREFIX-MODEL-cc.onnx``),
for ``codnn compile``, ``codnn infer --rtl`` and ``benchmarks/integer_accuracy.py``.
"""

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import torch

from codnn.model.datasets import load_dataset
from codnn.model.infer import infer
from codnn.render import print_rows
from codnn.sim.runner import default_build_root
from codnn.train.run import ColumnCombine, TrainSpec, train

nn = torch.nn


def _unit(c_in, c_out, kernel, stride=1, groups=1, activation=nn.ReLU6):
    """Convolution, batch norm and (unless ``activation`` is None) the activation."""
    layers = [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(c_out)]
    return layers + ([activation()] if activation else [])


class InvertedResidual(nn.Module):
    """MobileNet-v2's block: expansion (unless t = 1), depthwise, linear projection; the
    input added where the shapes allow, with no activation after the add."""

    def __init__(self, c_in, c_out, stride, t):
        super().__init__()
        hidden = c_in * t
        layers = _unit(c_in, hidden, 1) if t != 1 else []
        layers += _unit(hidden, hidden, 3, stride, groups=hidden)
        layers += _unit(hidden, c_out, 1, activation=None)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, channels=1, classes=10):
        super().__init__()
        layers, c_in = _unit(channels, 16, 3, 2), 16
        for t, c, n, s in ((1, 16, 1, 1), (4, 24, 2, 2), (4, 32, 2, 2), (4, 64, 1, 1)):
            for k in range(n):
                layers.append(InvertedResidual(c_in, c, s if k == 0 else 1, t))
                c_in = c
        self.features = nn.Sequential(*layers, *_unit(c_in, 128, 1))
        self.head = nn.Linear(128, classes)

    def forward(self, x):
        return self.head(nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class BasicBlock(nn.Module):
    """ResNet-18's block: two 3 x 3 convolutions, the shortcut (a 1 x 1 projection where
    the shape changes) added, then ReLU."""

    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.body = nn.Sequential(*_unit(c_in, c_out, 3, stride, activation=nn.ReLU),
                                  *_unit(c_out, c_out, 3, activation=None))
        self.shortcut = (nn.Sequential(*_unit(c_in, c_out, 1, stride, activation=None))
                         if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, channels=1, classes=10, widths=(16, 32, 64, 128)):
        super().__init__()
        layers, c_in = _unit(channels, widths[0], 3, activation=nn.ReLU), widths[0]
        for k, width in enumerate(widths):
            for j in range(2):
                layers.append(BasicBlock(c_in, width, 2 if k and not j else 1))
                c_in = width
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x):
        return self.head(nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class Separable(nn.Module):
    def __init__(self, channels=1, classes=10):
        super().__init__()
        layers = _unit(channels, 16, 3, 2)
        for c_in, c_out, stride in ((16, 32, 1), (32, 64, 2), (64, 64, 1)):
            layers += _unit(c_in, c_in, 3, stride, groups=c_in) + _unit(c_in, c_out, 1)
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


MODELS = {"mobilenet_v2": MobileNetV2, "resnet18": ResNet18, "separable": Separable}


def train_module(name, spec, channels, folder):
    """``codnn.train.run.train`` on a fresh ``MODELS[name]`` (seeded by ``spec``)."""
    torch.manual_seed(spec.seed)
    return train(spec, folder, model=MODELS[name](channels),
                 progress=lambda text: print(f"{name}: {text}", flush=True))


def _keep(model, path):
    """Copy a trained model out of the run's temporary folder; its new path."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model, path)
    return path


def measure(name, args, channels):
    """One model's row: dense training, the two kinds of scales, column combining."""
    row = {"model": name}
    with tempfile.TemporaryDirectory() as folder:
        report = train_module(name, TrainSpec(name, args.data, epochs=args.epochs), channels,
                          Path(folder) / "dense")
        row["model_file"] = _keep(report["model"], f"{args.output}-{name}.onnx")
        for per_channel in (False, True):
            result, _ = infer(report["model"], args.data, rows=16, cols=16, alpha=1,
                              gamma=0.0, per_channel=per_channel)
            key = "per_channel" if per_channel else "per_layer"
            row["float"] = result["float_accuracy"]
            row[f"int_{key}"] = result["integer_accuracy"]
        cc = TrainSpec(name, args.data, epochs=args.epochs, column_combine=ColumnCombine(
            retrain_epochs=1, final_epochs=args.cc_epochs))
        report = train_module(name, cc, channels, Path(folder) / "cc")
        result, _ = infer(report["model"], args.data, rows=16, cols=16, alpha=8,
                          per_channel=True)
        row["cc_model"] = _keep(report["model"], f"{args.output}-{name}-cc.onnx")
        row.update(cc_float=result["float_accuracy"], cc_int=result["integer_accuracy"],
                   cc_tiles=result["tiles"], dense_tiles=result["dense_tiles"],
                   tile_ratio=result["tile_ratio"], cycle_ratio=result["cycle_ratio"])
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--data", default="mnist")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--cc-epochs", type=int, default=4)
    parser.add_argument("-o", "--output", default=str(default_build_root() / "mobile_networks"))
    args = parser.parse_args()
    channels = load_dataset(args.data).train_x.shape[1]
    rows = [measure(name, args, channels) for name in args.models.split(",")]
    print_rows(f"{args.data}, {args.epochs} epochs; integer: 16 x 16 dense array, one scale "
               f"per layer or per channel; cc: column combining, alpha 8, 80 % zeros", rows,
               [(k, k.replace("_", " ")) for k in rows[0] if k not in ("cc_model", "model_file")])
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
