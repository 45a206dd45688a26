"""Per-layer against per-channel weight scales on a depthwise-separable network.

Usage: python benchmarks/per_channel_scales.py [--data mnist] [--epochs 8] [-o PREFIX]

Trains a MobileNet-v1-style network (a 3 x 3 stem of stride 2, three depthwise-separable
blocks: a depthwise 3 x 3 and a pointwise 1 x 1, each with batch norm and ReLU6; global
average pooling and a linear head) with ``codnn.train.run.train`` on the user-module path,
exports it, and runs ``codnn infer`` on a 16 x 16 dense array (alpha 1: packing a model
not trained for column combining prunes weights, which would hide the quantization
error) twice: with one weight scale per layer and with one per output channel
(``--per-channel``). Prints float and
integer accuracy, tiles and, per layer, how far apart its filters' largest weights are
(the spread batch norm folding leaves, which one scale per layer has to cover) and how
many of its filters keep fewer than 16 weight levels with one scale. Writes PREFIX.json.
Needs the ``train`` extra (PyTorch CPU); about two minutes on this machine's two cores.
"""

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch

from codnn.model.datasets import load_dataset
from codnn.model.infer import infer, load_inputs
from codnn.model.onnx_import import load_onnx
from codnn.model.quantize import quantize_network
from codnn.render import print_record, print_rows
from codnn.sim.runner import default_build_root
from codnn.train.run import TrainSpec, train


def _unit(c_in, c_out, kernel, stride=1, groups=1):
    return [torch.nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups),
            torch.nn.BatchNorm2d(c_out), torch.nn.ReLU6()]


class SeparableNet(torch.nn.Module):
    """MobileNet-v1's blocks at MNIST's size: 16 -> 32 -> 64 -> 64 channels."""

    def __init__(self, channels=1, classes=10):
        super().__init__()
        layers = _unit(channels, 16, 3, 2)
        for c_in, c_out, stride in ((16, 32, 1), (32, 64, 2), (64, 64, 1)):
            layers += _unit(c_in, c_in, 3, stride, groups=c_in) + _unit(c_in, c_out, 1)
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(64, classes)

    def forward(self, x):
        return self.head(torch.nn.functional.adaptive_avg_pool2d(self.features(x), 1)
                         .flatten(1))


def _spread(model, data):
    """Per layer with an activation: the ratio of its largest filter peak to its smallest
    nonzero one, and how many filters keep fewer than 16 levels with one scale per
    layer."""
    network = load_onnx(model)
    x_cal, _, _, _ = load_inputs(data, network, 500)
    rows = []
    integer = quantize_network(network, x_cal, alpha=1, gamma=0.0)
    for layer in integer.array_layers:
        if layer.shift is None:
            continue
        peaks = np.abs(layer.packed.dense()).max(axis=1)
        float_peaks = np.abs(next(s for s in network.steps if getattr(s, "name", None)
                                  == layer.name).weights).reshape(len(peaks), -1).max(1)
        nonzero = float_peaks[float_peaks > 0]
        rows.append({"layer": layer.name, "filters": len(peaks),
                     "peak_spread": round(float(nonzero.max() / nonzero.min()), 1),
                     "filters_under_16_levels": int((peaks < 8).sum())})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="mnist")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("-o", "--output",
                        default=str(default_build_root() / "per_channel_scales"))
    args = parser.parse_args()
    data = load_dataset(args.data)
    torch.manual_seed(0)
    spec = TrainSpec("separable", args.data, epochs=args.epochs)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        report = train(spec, folder, model=SeparableNet(data.train_x.shape[1]),
                       progress=lambda text: print(text, flush=True))
        for per_channel in (False, True):
            result, _ = infer(report["model"], args.data, rows=16, cols=16, alpha=1,
                              gamma=0.0, per_channel=per_channel)
            rows.append({"weight_scales": result["weight_scales"],
                         "float_accuracy": result["float_accuracy"],
                         "integer_accuracy": result["integer_accuracy"],
                         "agrees_with_float": result["integer_agrees_with_float"],
                         "tiles": result["tiles"], "dense_tiles": result["dense_tiles"],
                         "cycles_per_image": result["cycles_per_image"]})
        layers = _spread(report["model"], args.data)
    print_record("separable network", {"data": args.data, "epochs": args.epochs,
                                       "array": "16 x 16, alpha 1 (dense)"})
    print_rows("accuracy by weight scales", rows,
               [(k, k.replace("_", " ")) for k in rows[0]])
    print_rows("per layer: filter peak spread (float), filters under 16 levels with one "
               "scale", layers, [(k, k.replace("_", " ")) for k in layers[0]])
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"runs": rows, "layers": layers},
                                                   indent=2) + "\n")
    print(f"wrote {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
