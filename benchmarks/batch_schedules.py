"""Mini-batch serialization on the network engine: the bytes a batch moves through the
engine's two external memory ports, layer by layer against MBS's groups of layers.

Usage: python benchmarks/batch_schedules.py [--rows 16 --cols 16 --alpha 8]
       [--act-words 4096] [--batches 8,32] [--memory-latency 20] [--rtl N] [-o PREFIX]

For LeNet-5 (dense and column-combined, benchmarks/models), ResNet-20 (trained dense as
benchmarks/network_engine.py trains it, about two minutes the first time) and VGG-6
(untrained), on an engine of parallel MACs whose weight image and batch input lie in
external memory (``--weight-port axi``, an activation port): for each batch size and
schedule (``codnn.model.batch_schedule``), the groups and their sub-batches, the bytes per
image the weight port reads (at the port's word stride) and the activation port reads
and writes (rounded to whole bytes), their sum, and the cycles per image with
``--memory-latency``. Each program
is checked against the golden integer network on its whole batch; with ``--rtl N`` the
first N (model, batch, schedule) runs also go through the engine's RTL on Verilator,
where every logit, the cycles and both ports' byte counters must equal the model.
Writes PREFIX.json and PREFIX.csv.
"""

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from network_engine import MODELS, _untrained_vgg6, resnet_models

from codnn.golden.network_program import (EngineConfig, external_weight_bytes, image_word,
                                          run_program, word_stride)
from codnn.model.batch_schedule import SCHEDULES, compile_batch
from codnn.model.datasets import load_dataset
from codnn.model.engine_rtl import run_on_engine
from codnn.model.onnx_import import load_onnx
from codnn.model.quantize import quantize_network
from codnn.render import print_rows
from codnn.sim.runner import default_build_root
from reproduction import write_csv


def _row(name, network, engine, batch, schedule, q, args):
    plan = compile_batch(network, engine, batch, schedule)
    compiled = plan.compiled
    x = q[np.arange(batch) % len(q)]
    if not np.array_equal(run_program(compiled.program, compiled.image, x), network.run(x)):
        raise SystemExit(f"{name}: the batch program differs from golden")
    traffic = compiled.traffic()
    weights = traffic["weights"] * word_stride(image_word(engine)) // image_word(engine)
    latency = args.memory_latency
    cycles = compiled.external_cycles(latency, latency, latency)
    row = {"model": name, "batch": batch, "schedule": schedule,
           "groups": " | ".join(f"{len(names)} steps x {g.sub_batch}"
                                for g, names in zip(plan.groups, plan.names)),
           "weight_bytes": round(weights / batch),
           "act_read": round(traffic["spill_read"] / batch),
           "act_written": round(traffic["spill_written"] / batch),
           "total_bytes": round((weights + traffic["spill_read"] + traffic["spill_written"])
                                / batch),
           "cycles_per_image": round(cycles / batch), "rtl": None}
    if args.rtl > 0:
        args.rtl -= 1
        report = run_on_engine(compiled, x[None], simulator="verilator", weight_port="axi")
        moved = report["weight_bytes_per_image"] + sum(report["spill_bytes"])
        total = weights + traffic["spill_read"] + traffic["spill_written"]
        if report["cycles"] != [report["model_cycles"]] or moved != total:
            raise SystemExit(f"{name}: the RTL run differs from the model")
        row["rtl"] = "equal"
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--cols", type=int, default=16)
    parser.add_argument("--alpha", type=int, default=8)
    parser.add_argument("--act-words", type=int, default=4096)
    parser.add_argument("--batches", default="8,32")
    parser.add_argument("--memory-latency", type=int, default=20)
    parser.add_argument("--rtl", type=int, default=0)
    parser.add_argument("-o", "--output", default=str(default_build_root() / "batch_schedules"))
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    data = load_dataset("mnist")
    folder = Path(args.output).parent
    models = {"lenet5": MODELS / "lenet5_mnist.onnx",
              "lenet5 (cc)": MODELS / "lenet5_mnist_cc.onnx",
              "resnet20": resnet_models(folder)["resnet20_mnist"],
              "vgg6 (untrained)": _untrained_vgg6(folder)}
    engine = EngineConfig(rows=args.rows, cols=args.cols, alpha=args.alpha, mac="parallel",
                          act_words=args.act_words, acc_words=1024, psum_words=1024,
                          spill_words=1 << 24)
    engine = replace(engine, weight_bytes=external_weight_bytes(engine))
    rows = []
    for name, path in models.items():
        network = quantize_network(load_onnx(path), data.train_x[:500], alpha=args.alpha,
                                   gamma=0.5)
        q = network.quantize_input(data.test_x[:64])
        for batch in batches:
            for schedule in SCHEDULES:
                rows.append(_row(name, network, engine, batch, schedule, q, args))
                print(f"{name} batch {batch} {schedule}: {rows[-1]['total_bytes']:.0f} "
                      f"bytes an image", flush=True)
    title = (f"bytes per image through the external ports, {args.rows}x{args.cols} engine, "
             f"alpha {args.alpha}, parallel MACs, {args.act_words} activation words")
    print_rows(title, rows, [(k, k) for k in rows[0] if k != "groups"])
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"engine": engine.__dict__, "rows": rows},
                                                   indent=1) + "\n")
    write_csv(out.with_suffix(".csv"), rows)
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
