"""A whole network on the network engine against the host-driven flow: cycles and images
per second per image, bytes each memory moves, and what the host-driven flow would send
over its link.

Usage: python benchmarks/network_engine.py [--rows 16 --cols 16 --alpha 8]
       [--act-words 2048] [--fmax-mhz F] [--baud 1000000] [--memory-latency 20]
       [-o PREFIX]

For LeNet-5 (the dense model and the column-combined one in benchmarks/models), on an
engine of each MAC kind: the engine's cycles per image (its exact model,
``codnn.golden.network_program.step_cycles``, which the RTL equals), images per second at
``--fmax-mhz`` (default: the engine's baseline entry on the ECP5-85k in
synth/baselines.json), the weight image and the on-chip bytes per image, the images per
second of the engine's board top (``hw.soc.NetworkSoc``: each image's input in and its
outputs back over the link at ``--baud``, then its cycles); and for the
host-driven flow (``codnn infer --port``, a layer at a time over the UART link, the host
pooling and adding) the bytes a layer's tiles, inputs and results take over the link
(``codnn.model.schedule``), and the images per second the link alone allows at ``--baud``
(10 bits a byte). Then the deeper networks ``codnn train`` builds
(``codnn.train.models``, on MNIST's 1 x 28 x 28 input): ResNet-20 trained dense and
column-combined (``RESNET_RUNS``; trained on the first run, about two minutes, and kept
beside PREFIX), with their integer accuracy on the 1,000 test images, and VGG-6
untrained (its weights drawn by torch with seed 0: its shapes' figures, no accuracy), on
the same engine with the weight image in external memory of ``--memory-latency`` cycles:
cycles per image (and those of the adds), the external bytes per image and images per
second, each program checked against the golden integer network on three test images.
Needs the ``train`` extra (PyTorch CPU). Writes PREFIX.json and PREFIX.csv.
"""

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from codnn.board import Board
from codnn.golden.network_program import (EngineConfig, external_weight_bytes, image_word,
                                          run_program, word_stride)
from codnn.model.compile import CompileError, compile_network
from codnn.model.datasets import load_dataset
from codnn.model.onnx_import import load_onnx
from codnn.model.quantize import quantize_network
from codnn.model.schedule import schedule_network
from codnn.render import print_rows
from codnn.sim.runner import default_build_root
from codnn.synth.baseline import largest_entry
from codnn.train.run import ColumnCombine
from reproduction import write_csv

MODELS = Path(__file__).resolve().parent / "models"


def _with_link(compiled, mhz, baud):
    """Images per second of the engine behind the UART host link (``hw.soc.NetworkSoc``):
    each image's input, RUN and outputs over the link (``Board.image_link_bytes``, 10
    bits a byte), then its cycles at ``mhz``; None without a clock."""
    if not mhz:
        return None
    sent, received = Board.image_link_bytes(compiled.program)
    return 1 / ((sent + received) * 10 / baud + compiled.cycles / (mhz * 1e6))


#: ResNet-20 as the benchmark trains it (about two minutes on two cores): dense, and
#: column-combined by the joint schedule, with fewer epochs than ``codnn train``'s default.
RESNET_RUNS = {"resnet20_mnist": {},
               "resnet20_mnist_cc": {"column_combine": ColumnCombine(retrain_epochs=1,
                                                                    final_epochs=4)}}


def resnet_models(folder):
    """The trained ResNet-20 models (``RESNET_RUNS``) in ``folder``, trained once."""
    import shutil
    import tempfile

    from codnn.train.run import TrainSpec, train
    paths = {}
    for name, extra in RESNET_RUNS.items():
        path = Path(folder) / f"{name}.onnx"
        if not path.exists():
            print(f"training {name} ...", flush=True)
            with tempfile.TemporaryDirectory() as work:
                report = train(TrainSpec("resnet20", "mnist", epochs=8, **extra), work)
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(report["model"], path)
        paths[name] = path
    return paths


def _untrained_vgg6(folder):
    """VGG-6 as ``codnn train`` builds it, untrained (torch seed 0), as ONNX."""
    import torch

    from codnn.train.export import export_onnx
    from codnn.train.models import build_model, fold_batch_norm
    path = Path(folder) / "vgg6_untrained.onnx"
    torch.manual_seed(0)
    model = build_model("vgg6", (1, 28, 28))
    fold_batch_norm(model)                      # as codnn train exports
    path.parent.mkdir(parents=True, exist_ok=True)
    export_onnx(model, path, (1, 28, 28))
    return path


def _deep_networks(args, data, fmax):
    """ResNet-20 (trained, dense and column-combined) and VGG-6 (untrained) compiled for
    the engine with external weights: a row per model and MAC kind, each program checked
    against the golden integer network on three test images."""
    folder = Path(args.output).parent
    models = {**resnet_models(folder), "vgg6 (untrained)": _untrained_vgg6(folder)}
    rows = []
    for name, path in models.items():
        network = quantize_network(load_onnx(path), data.train_x[:500], alpha=args.alpha,
                                   gamma=0.5)
        q = network.quantize_input(data.test_x)
        accuracy = (float(np.mean(network.run(q).argmax(axis=1) == data.test_y))
                    if "untrained" not in name else None)
        for mac in ("bitserial", "parallel"):
            engine = EngineConfig(rows=args.rows, cols=args.cols, alpha=args.alpha, mac=mac,
                                  act_words=8192, acc_words=1024, psum_words=1024)
            engine = replace(engine, weight_bytes=external_weight_bytes(engine))
            try:
                compiled = compile_network(network, engine)
            except CompileError as error:
                rows.append({"model": name, "mac": mac, "steps": f"refused: {error}"})
                continue
            for image in q[:3]:
                got = run_program(compiled.program, compiled.image, image)
                if not np.array_equal(got, network.run(image[None])[0]):
                    raise SystemExit(f"{name}: the program differs from golden")
            cycles = compiled.external_cycles(args.memory_latency)
            traffic = compiled.traffic()
            stride = word_stride(image_word(engine))
            external = traffic.pop("weights") * stride // image_word(engine)
            adds = sum(c.cycles for c in compiled.costs if c.op == "add")
            rows.append({"model": name, "mac": mac, "steps": len(compiled.program.steps),
                         "integer_accuracy": accuracy, "cycles": cycles, "add_cycles": adds,
                         "images_per_s": round(fmax * 1e6 / cycles, 1) if fmax else None,
                         "weight_image": len(compiled.image), "external_bytes": external,
                         "on_chip_bytes": sum(traffic.values())})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--cols", type=int, default=16)
    parser.add_argument("--alpha", type=int, default=8)
    parser.add_argument("--fmax-mhz", type=float, default=None)
    parser.add_argument("--baud", type=int, default=1_000_000)
    parser.add_argument("--act-words", type=int, default=EngineConfig.act_words,
                        help="LeNet-5's activation buffer (four rows need 2400)")
    parser.add_argument("--memory-latency", type=int, default=20)
    parser.add_argument("-o", "--output", default=str(default_build_root() / "network_engine"))
    args = parser.parse_args()
    baseline = largest_entry("network", "ecp5-85k")
    fmax = args.fmax_mhz or (baseline["fmax_mhz"] if baseline else None)
    data = load_dataset("mnist")
    rows = []
    for name in ("lenet5_mnist", "lenet5_mnist_cc"):
        network = quantize_network(load_onnx(MODELS / f"{name}.onnx"), data.train_x[:500],
                                   alpha=args.alpha, gamma=0.5)
        layers, _ = schedule_network(network, rows=args.rows, cols=args.cols,
                                     alpha=args.alpha)
        link_bytes = sum(la.weight_bytes + la.data_bytes + 2 * la.psum_bytes for la in layers)
        link_images = args.baud / 10 / link_bytes
        for mac in ("bitserial", "parallel"):
            engine = EngineConfig(rows=args.rows, cols=args.cols, alpha=args.alpha, mac=mac,
                                  act_words=args.act_words, weight_bytes=1 << 20)
            compiled = compile_network(network, engine)
            traffic = compiled.traffic()
            per_s = fmax * 1e6 / compiled.cycles if fmax else None
            with_link = _with_link(compiled, fmax, args.baud)
            rows.append({
                "model": name, "mac": mac, "cycles": compiled.cycles,
                "images_per_s": round(per_s, 1) if per_s else None,
                "latency_us": round(compiled.cycles / fmax, 1) if fmax else None,
                "weight_image": len(compiled.image),
                "on_chip_bytes": sum(traffic.values()),
                "engine_link_images_per_s": round(with_link, 1) if with_link else None,
                "link_bytes": link_bytes, "link_images_per_s": round(link_images, 3),
                "vs_link": round(with_link / link_images) if with_link else None})
    print_rows(f"LeNet-5 on a {args.rows}x{args.cols} network engine, alpha {args.alpha} "
               f"({f'{fmax} MHz' if fmax else 'no Fmax given'}), against the host-driven "
               f"flow over a {args.baud} baud link",
               rows, [("model", "model"), ("mac", "MACs"), ("cycles", "cycles/img"),
                      ("images_per_s", "img/s"), ("latency_us", "latency us"),
                      ("weight_image", "weights B"), ("on_chip_bytes", "on-chip B/img"),
                      ("engine_link_images_per_s", "img/s with link"),
                      ("link_bytes", "host-driven link B/img"),
                      ("link_images_per_s", "host-driven img/s"), ("vs_link", "x")])
    deep = _deep_networks(args, data, fmax)
    print_rows(f"ResNet-20 and VGG-6 on the same engine, weights in external memory of "
               f"latency {args.memory_latency}", deep,
               [("model", "model"), ("mac", "MACs"), ("steps", "steps"),
                ("integer_accuracy", "accuracy"), ("cycles", "cycles/img"),
                ("add_cycles", "of them adds"), ("images_per_s", "img/s"),
                ("weight_image", "weights B"), ("external_bytes", "external B/img"),
                ("on_chip_bytes", "on-chip B/img")])
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"fmax_mhz": fmax, "rows": rows,
                                                    "deep": deep}, indent=1) + "\n")
    write_csv(out.with_suffix(".csv"), rows)
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
