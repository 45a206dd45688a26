"""The network engine at its array's speed: a whole network on the engine against the bare
array it wraps and against onnxruntime on one CPU core, and against the host-driven flow
over a link.

Usage: python benchmarks/network_engine.py [--rows 16 --cols 16 --alpha 8]
       [--act-words 8192] [--gather-ports 2,4] [--fmax-mhz F] [--baud 1000000]
       [--memory-latency 20]
       [--models lenet5,lenet5_cc,resnet20,resnet20_cc,vgg6,mobilenet_v2] [-o PREFIX]

First table, per network, MAC kind and gather ports (each lane bank's read ports, of
``--gather-ports``), weights on chip and in external memory of
``--memory-latency`` (AXI4): the engine's cycles per image (its exact model,
``codnn.golden.network_program.step_cycles``, which the RTL equals; of them the adds), the
bare array's cycles for the same model and array (``codnn infer``'s schedule: its layers'
tiles back to back, pooling and adds left to the host), their ratio, images per second
at ``--fmax-mhz`` (default: the engine's largest baseline entry on the ECP5-85k in
synth/baselines.json), and, measured in the same run, onnxruntime's images per second
on one core of this machine for the same ONNX file (batch 1, float; the best of five
rounds of 200 images). Beside the engine's cycles, ``unfused``: the same program with
its max poolings as pooling steps (``compile_network(..., fuse=False)``). The networks:
LeNet-5 dense and column-combined (benchmarks/models), ResNet-20 dense and
column-combined as ``codnn train`` builds them (``RESNET_RUNS``: trained on the first run,
about two minutes, and kept beside PREFIX; integer accuracy on the 1,000 test images),
VGG-6 and the MobileNet-v2 of ``benchmarks/mobile_networks.py`` untrained (their weights
drawn by torch with seed 0: their shapes' figures, no accuracy). Each program is checked
against the golden integer network on two test images.

Second table, LeNet-5 only: the engine's board top (``hw.soc.NetworkSoc``: each image's
input in and its outputs back over the link at ``--baud``, then its cycles) against the
host-driven flow (``codnn infer --port``, a layer at a time over the UART link, the host
pooling and adding: the bytes a layer's tiles, inputs and results take, ``codnn.model.
schedule``), 10 bits a byte.

Needs the ``train`` extra (PyTorch CPU) and onnxruntime. Writes PREFIX.json and
PREFIX.csv.
"""

import argparse
import json
from pathlib import Path

import numpy as np

from codnn.board import Board
from codnn.golden.network_program import EngineConfig, run_program
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


def _untrained_mobilenet(folder):
    """The MobileNet-v2 of ``benchmarks/mobile_networks.py``, untrained (torch seed 0),
    its batch norms folded, as ONNX."""
    import torch

    from codnn.train.export import export_onnx
    from codnn.train.models import fold_batch_norm
    from mobile_networks import MobileNetV2
    path = Path(folder) / "mobilenet_v2_untrained.onnx"
    torch.manual_seed(0)
    model = MobileNetV2().eval()
    fold_batch_norm(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    export_onnx(model, path, (1, 28, 28))
    return path


def onnxruntime_rate(path, x, runs=200, rounds=5):
    """Images per second of onnxruntime on one core for the float model at ``path``,
    batch 1: the best of ``rounds`` rounds of ``runs`` inputs from ``x`` (after 30 to warm
    up), since a shared machine's noise only ever slows a round down."""
    import time

    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    images = [x[k % len(x)][None].astype(np.float32) for k in range(runs)]
    for image in images[:30]:
        session.run(None, {name: image})
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for image in images:
            session.run(None, {name: image})
        best = max(best, runs / (time.perf_counter() - start))
    return best


def _models(args):
    """``{name: (path, trained)}`` of the networks ``--models`` names."""
    folder = Path(args.output).parent
    found = {}
    for key in args.models.split(","):
        if key in ("lenet5", "lenet5_cc"):
            found[key] = (MODELS / f"{key.replace('lenet5', 'lenet5_mnist')}.onnx", True)
        elif key in ("resnet20", "resnet20_cc"):
            name = key.replace("resnet20", "resnet20_mnist")
            found[key] = (resnet_models(folder)[name], True)
        elif key == "vgg6":
            found[key] = (_untrained_vgg6(folder), False)
        elif key == "mobilenet_v2":
            found[key] = (_untrained_mobilenet(folder), False)
        else:
            raise SystemExit(f"unknown model {key!r}")
    return found


def _engine_rows(args, data, fmax):
    """A row per network, MAC kind and weight port: the engine's cycles against the bare
    array's and onnxruntime's images per second (the module docstring)."""
    rows = []
    for name, (path, trained) in _models(args).items():
        network = quantize_network(load_onnx(path), data.train_x[:500], alpha=args.alpha,
                                   gamma=0.5)
        q = network.quantize_input(data.test_x)
        accuracy = (round(100 * float(np.mean(network.run(q).argmax(axis=1) == data.test_y)),
                          1) if trained else None)
        ort = onnxruntime_rate(path, data.test_x[:100])
        print(f"{name}: onnxruntime {ort:.0f} images/s on one core", flush=True)
        for mac, ports in ((mac, ports) for mac in ("bitserial", "parallel")
                           for ports in args.gather_ports):
            layers, _ = schedule_network(network, rows=args.rows, cols=args.cols,
                                         alpha=args.alpha, mac=mac)
            array = sum(layer.cycles for layer in layers)
            engine = EngineConfig(rows=args.rows, cols=args.cols, alpha=args.alpha, mac=mac,
                                  act_words=args.act_words, acc_words=1024, psum_words=1024,
                                  weight_bytes=1 << 22, gather_ports=ports)
            try:
                compiled = compile_network(network, engine)
            except CompileError as error:
                rows.append({"model": name, "mac": mac, "ports": ports, "weights": "-",
                             "cycles": f"refused: {error}"})
                continue
            for image in q[:2]:
                if not np.array_equal(run_program(compiled.program, compiled.image, image),
                                      network.run(image[None])[0]):
                    raise SystemExit(f"{name}: the program differs from golden")
            adds = sum(c.cycles for c in compiled.costs if c.op == "add")
            apart = compile_network(network, engine, fuse=False)
            for port in ("onchip", "axi"):
                cycles = (compiled.cycles if port == "onchip"
                          else compiled.external_cycles(args.memory_latency))
                per_s = fmax * 1e6 / cycles if fmax else None
                rows.append({
                    "model": name, "mac": mac, "ports": ports, "accuracy": accuracy,
                    "weights": "on chip" if port == "onchip" else "AXI",
                    "weight_image": len(compiled.image), "cycles": cycles,
                    "add_cycles": adds, "array_cycles": array,
                    "pool_steps_cycles": (apart.cycles if port == "onchip" else
                                          apart.external_cycles(args.memory_latency)),
                    "vs_array": round(cycles / array, 2),
                    "images_per_s": round(per_s, 1) if per_s else None,
                    "onnxruntime_per_s": round(ort, 1),
                    "vs_onnxruntime": round(per_s / ort, 3) if per_s else None})
    return rows


def _link_rows(args, data, fmax):
    """LeNet-5's rows for the second table: the engine's board top against the
    host-driven flow over the link."""
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
            with_link = _with_link(compiled, fmax, args.baud)
            rows.append({
                "model": name, "mac": mac, "cycles": compiled.cycles,
                "engine_link_images_per_s": round(with_link, 1) if with_link else None,
                "link_bytes": link_bytes, "link_images_per_s": round(link_images, 3),
                "vs_link": round(with_link / link_images) if with_link else None})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--cols", type=int, default=16)
    parser.add_argument("--alpha", type=int, default=8)
    parser.add_argument("--fmax-mhz", type=float, default=None)
    parser.add_argument("--baud", type=int, default=1_000_000)
    parser.add_argument("--act-words", type=int, default=8192,
                        help="the activation buffer (LeNet-5 on four rows needs 2400)")
    parser.add_argument("--memory-latency", type=int, default=20)
    parser.add_argument("--gather-ports", default="2,4",
                        type=lambda text: [int(p) for p in text.split(",")],
                        help="the engines' read ports per lane bank, a row each")
    parser.add_argument("--models", default="lenet5,lenet5_cc,resnet20,resnet20_cc,vgg6,"
                                            "mobilenet_v2")
    parser.add_argument("-o", "--output", default=str(default_build_root() / "network_engine"))
    args = parser.parse_args()
    baseline = largest_entry("network", "ecp5-85k")
    fmax = args.fmax_mhz or (baseline["fmax_mhz"] if baseline else None)
    data = load_dataset("mnist")
    rows = _engine_rows(args, data, fmax)
    print_rows(f"Networks on a {args.rows}x{args.cols} network engine, alpha {args.alpha} "
               f"({f'{fmax} MHz' if fmax else 'no Fmax given'}; AXI weights: latency "
               f"{args.memory_latency}), against the bare array and onnxruntime on one core",
               rows, [("model", "model"), ("accuracy", "acc %"), ("mac", "MACs"),
                      ("ports", "ports"), ("weights", "weights"), ("cycles", "cycles"),
                      ("pool_steps_cycles", "unfused"), ("add_cycles", "adds"),
                      ("array_cycles", "array"), ("vs_array", "x array"),
                      ("images_per_s", "img/s"), ("onnxruntime_per_s", "ORT img/s"),
                      ("vs_onnxruntime", "x ORT")])
    link = _link_rows(args, data, fmax)
    print_rows(f"LeNet-5's board top over a {args.baud} baud link against the host-driven "
               f"flow", link,
               [("model", "model"), ("mac", "MACs"), ("cycles", "cycles/img"),
                ("engine_link_images_per_s", "img/s with link"),
                ("link_bytes", "host-driven link B/img"),
                ("link_images_per_s", "host-driven img/s"), ("vs_link", "x")])
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"fmax_mhz": fmax, "rows": rows,
                                                    "link": link}, indent=1) + "\n")
    write_csv(out.with_suffix(".csv"), rows)
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
