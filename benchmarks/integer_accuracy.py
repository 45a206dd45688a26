"""Integer accuracy against onnxruntime's int8: each network scored float, as codnn's
integer network (one weight scale per layer and per output channel; the output stage
shifting only, or requantizing by a fixed-point multiplier; each activation's scale by
max-abs or by the least squared error; with the multiplier, signed activations also
with zero points of their own, ``--asymmetric``) and as onnxruntime's ``quantize_static`` (QDQ,
uint8 activations, int8 weights, MinMax calibration, per tensor and per channel), with
the same calibration images, on the same test images.

Usage: python benchmarks/integer_accuracy.py
       [--models mobilenet,mobilenet_plain,resnet,lenet5,lenet5_cc,FILE.onnx,...]
       [--epochs 6] [--calibration 300] [--test 1000] [--tq] [-o PREFIX]

The networks a user brings, written in plain PyTorch and trained with torch's own loop
(Adam, ``--epochs`` on the MNIST subset's training split, seed 0), exported by
``torch.onnx.export``:

- ``mobilenet``: a 3 x 3 stem (16 channels, stride 2), inverted residual blocks (a 1 x 1
  expansion by 4, a depthwise 3 x 3, ReLU6, a linear 1 x 1 projection; the input added,
  no ReLU after the add, where shapes allow) to 24 and 32 channels, a 1 x 1 to 64,
  ``x.mean((2, 3))``, a linear head; ``mobilenet_plain`` the same without batch norm
  (each convolution with a bias);
- ``resnet``: a 3 x 3 stem and basic blocks of 16, 32 and 64 channels (stride 2 and a
  1 x 1 projection where the shape changes), ``x.mean((2, 3))``, a linear head;

and codnn's own LeNet-5 models (benchmarks/models, dense and column-combined), and any
ONNX file of an MNIST-shaped network named in ``--models`` (the column-combined models
``benchmarks/mobile_networks.py`` leaves, a ``codnn train`` output). Each integer network
here runs dense (alpha 1), so that packing prunes nothing (a column-combined model's
zeros stay zeros). ``--tq``: also on the TQ array (g 8, budget 12, beta 3, NAF; 7-bit
magnitudes), per layer and per channel. Prints a
table and writes PREFIX.json. Needs the ``train`` extra and onnxruntime; about ten
minutes a trained network on this machine's two cores (the eight integer networks'
runs over the test images take most of it).
"""

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from codnn.golden.network import TermQuantization
from codnn.model.datasets import load_dataset
from codnn.model.onnx_import import load_onnx
from codnn.model.quantize import quantize_network

MODELS = Path(__file__).parent / "models"
# (requantization, calibration, signed activations asymmetric): every requantization and
# calibration with offset binary, and the multiplier with zero points of their own.
SETTINGS = [(requant, clip, False) for requant in ("shift", "multiplier")
            for clip in ("max", "mse")] + [("multiplier", "max", True)]


def _unit(c_in, c_out, kernel, stride=1, groups=1, activation=True, norm=True):
    """A convolution, its batch norm (``norm``; else a bias) and ReLU6 (``activation``)."""
    layers = [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups,
                        bias=not norm)]
    layers += [nn.BatchNorm2d(c_out)] if norm else []
    return nn.Sequential(*layers, nn.ReLU6()) if activation else nn.Sequential(*layers)


class _Inverted(nn.Module):
    def __init__(self, c_in, c_out, stride, t=4, norm=True):
        super().__init__()
        hidden = c_in * t
        self.body = nn.Sequential(_unit(c_in, hidden, 1, norm=norm),
                                  _unit(hidden, hidden, 3, stride, hidden, norm=norm),
                                  _unit(hidden, c_out, 1, activation=False, norm=norm))
        self.add = stride == 1 and c_in == c_out

    def forward(self, x):
        return x + self.body(x) if self.add else self.body(x)


class MobileNet(nn.Module):
    def __init__(self, norm=True):
        super().__init__()
        self.features = nn.Sequential(
            _unit(1, 16, 3, 2, norm=norm), *(_Inverted(*shape, norm=norm) for shape in (
                (16, 16, 1), (16, 24, 2), (24, 24, 1), (24, 32, 1), (32, 32, 1))),
            _unit(32, 64, 1, norm=norm))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


class _Basic(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out),
            nn.ReLU(), nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out))
        self.shortcut = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            _Basic(16, 16, 1), _Basic(16, 32, 2), _Basic(32, 64, 2))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


def train_plain(module, data, epochs, path):
    """``module`` trained with torch's own loop and exported to ``path``."""
    torch.manual_seed(0)
    x = torch.tensor(data.train_x, dtype=torch.float32)
    y = torch.tensor(data.train_y, dtype=torch.long)
    optimizer = torch.optim.Adam(module.parameters(), lr=2e-3)
    for epoch in range(epochs):
        module.train()
        order = torch.randperm(len(x))
        for k in range(0, len(x), 64):
            batch = order[k:k + 64]
            optimizer.zero_grad()
            nn.functional.cross_entropy(module(x[batch]), y[batch]).backward()
            optimizer.step()
    module.eval()
    torch.onnx.export(module, (x[:1],), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return path


def onnxruntime_int8(path, calibration, x, folder, per_channel):
    """Scores of onnxruntime's ``quantize_static`` int8 model (QDQ, uint8 activations,
    int8 weights, MinMax on ``calibration``) of the float model at ``path``."""
    import onnxruntime
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    name = onnxruntime.InferenceSession(str(path)).get_inputs()[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{name: image[None].astype(np.float32)}
                               for image in calibration])

        def get_next(self):
            return next(self.items, None)

    prepared = Path(folder) / f"{Path(path).stem}-prepared.onnx"
    quant_pre_process(str(path), str(prepared))
    out = Path(folder) / f"{Path(path).stem}-int8-{int(per_channel)}.onnx"
    quantize_static(str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=per_channel)
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {name: image[None].astype(np.float32)})[0]
                           for image in x])


def measure(name, path, data, args, folder):
    """A row of the table for the ONNX model at ``path``."""
    network = load_onnx(path)
    x, y = data.test_x[:args.test], data.test_y[:args.test]
    calibration = data.train_x[:args.calibration]

    def accuracy(scores):
        return round(100 * float(np.mean(np.argmax(scores, axis=1) == y)), 1)
    row = {"model": name, "float": accuracy(network.run(x))}
    for per_channel in (False, True):
        scope = "channel" if per_channel else "layer"
        for requant, clip, asymmetric in SETTINGS:
            q = quantize_network(network, calibration, alpha=1, gamma=0.0,
                                 per_channel=per_channel, requant=requant, clip=clip,
                                 asymmetric=asymmetric)
            setting = f"{requant} {clip}" + (" asymmetric" if asymmetric else "")
            row[f"codnn {setting} {scope}"] = accuracy(q.run(q.quantize_input(x)))
        if args.tq:
            q = quantize_network(network, calibration, alpha=1, gamma=0.0,
                                 per_channel=per_channel, tq=TermQuantization(8, 12, 3))
            row[f"codnn tq {scope}"] = accuracy(q.run(q.quantize_input(x)))
        row[f"onnxruntime {scope}"] = accuracy(onnxruntime_int8(path, calibration, x, folder,
                                                                per_channel))
    print(json.dumps(row), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet,mobilenet_plain,resnet,lenet5,"
                                            "lenet5_cc")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--calibration", type=int, default=300)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--tq", action="store_true", help="also on the TQ array")
    parser.add_argument("-o", default="build/integer_accuracy")
    args = parser.parse_args()
    torch.set_num_threads(2)
    data = load_dataset("mnist")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            if name in ("mobilenet", "mobilenet_plain", "resnet"):
                module = {"mobilenet": MobileNet, "resnet": ResNet,
                          "mobilenet_plain": lambda: MobileNet(norm=False)}[name]()
                path = train_plain(module, data, args.epochs, Path(folder) / f"{name}.onnx")
            elif name in ("lenet5", "lenet5_cc"):
                path = MODELS / ("lenet5_mnist.onnx" if name == "lenet5" else
                                 "lenet5_mnist_cc.onnx")
            elif name.endswith(".onnx") and Path(name).is_file():
                path, name = Path(name), Path(name).stem
            else:
                raise SystemExit(f"unknown model {name!r}: one of mobilenet, "
                                 f"mobilenet_plain, resnet, lenet5, lenet5_cc, or an "
                                 f"existing .onnx file")
            rows.append(measure(name, path, data, args, folder))
    columns = list(rows[0])
    print("\n| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    out = Path(args.o).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"test_images": args.test, "calibration": args.calibration,
                               "epochs": args.epochs, "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
