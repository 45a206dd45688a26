"""PruneTrain against dense training for the same epochs: accuracy, training FLOPs, wall
time, channels per layer at the end, and the network on the column-combined array.

Usage: python benchmarks/prunetrain.py [--models resnet20] [--data mnist] [--epochs 12]
       [--penalty 0.5] [--interval 3] [-o PREFIX]

For each model (``codnn train``'s built-in ones), three runs of ``codnn.train.run.train``
with its fixed seed: dense, PruneTrain (``--penalty``, ``--interval``, the default
threshold), and PruneTrain followed by column combining (alpha 8, gamma 0.5, 80 % zeros,
the joint schedule with one epoch after each prune point and four after the last). Per
run: integer accuracy on the test split, training FLOPs (counted from the layer shapes
at every epoch: forward, backward data and backward weights) and wall time of the
training epochs (the first phase's; test passes excluded), the channels left, and
``codnn infer``'s tiles and cycles per image on a 16 x 16 array (alpha 8). Prints a
table and the channels per layer, writes PREFIX.json, PREFIX.csv and PREFIX.png (FLOPs
and channels per epoch). Needs the ``train`` extra (PyTorch CPU); about five minutes
for ResNet-20 on this machine's two cores.
"""

import argparse
import json
import tempfile
from pathlib import Path

from codnn.model.infer import infer
from codnn.render import print_rows
from codnn.sim.runner import default_build_root
from codnn.model.datasets import load_dataset
from codnn.train.models import build_model
from codnn.train.prunetrain import channels
from codnn.train.run import ColumnCombine, PruneTrain, TrainSpec, train
from reproduction import write_csv


def data_shape(name):
    """The input shape of data set ``name``."""
    return load_dataset(name).train_x.shape[1:]


def _runs(model, args):
    pt = PruneTrain(penalty=args.penalty, interval=args.interval)
    return {"dense": TrainSpec(model, args.data, epochs=args.epochs),
            "prunetrain": TrainSpec(model, args.data, epochs=args.epochs, prunetrain=pt),
            "prunetrain + column combining": TrainSpec(
                model, args.data, epochs=args.epochs, prunetrain=pt,
                column_combine=ColumnCombine(retrain_epochs=1, final_epochs=4))}


def _measure(name, run, spec, data):
    with tempfile.TemporaryDirectory() as folder:
        report = train(spec, folder, progress=lambda text: print(f"{name}, {run}: {text}",
                                                                   flush=True))
        schedule, _ = infer(report["model"], data, rows=16, cols=16, alpha=8)
    first = report["phases"][0]
    epochs = report["epochs"]
    row = {"model": name, "run": run, "integer_accuracy": schedule["integer_accuracy"],
           "float_accuracy": schedule["float_accuracy"],
           "channels": epochs[-1]["channels"] or channels(
               build_model(spec.model, data_shape(data)), data_shape(data)),
           "train_flops": first.get("train_flops"), "flops_ratio": first.get("flops_ratio"),
           "train_seconds": first.get("train_seconds"),
           "phase_seconds": first["seconds"], "total_seconds": report["seconds"],
           "tiles": schedule["tiles"], "cycles_per_image": schedule["cycles_per_image"]}
    layers = {layer["name"]: layer["shape"][0] for layer in report["layers"]}
    return row, layers, epochs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet20",
                        help="comma-separated built-in models (default resnet20)")
    parser.add_argument("--data", default="mnist")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--penalty", type=float, default=0.5)
    parser.add_argument("--interval", type=int, default=3)
    parser.add_argument("-o", "--output", default=str(default_build_root() / "prunetrain"))
    args = parser.parse_args()
    rows, layers, curves = [], {}, {}
    for name in args.models.split(","):
        for run, spec in _runs(name, args).items():
            row, widths, epochs = _measure(name, run, spec, args.data)
            rows.append(row)
            layers[(name, run)] = widths
            curves[(name, run)] = epochs
        dense = next(r for r in rows if r["model"] == name and r["run"] == "dense")
        for row in rows:
            if row["model"] == name:
                row["time_ratio"] = row["train_seconds"] / dense["train_seconds"]
    print_rows(f"PruneTrain (penalty {args.penalty}, every {args.interval} epochs) against "
               f"dense training, {args.epochs} epochs on {args.data}; tiles and cycles on a "
               f"16 x 16 array, alpha 8", rows,
               [("model", "model"), ("run", "run"), ("integer_accuracy", "accuracy"),
                ("channels", "channels"), ("flops_ratio", "training FLOPs / dense"),
                ("train_seconds", "training s"), ("time_ratio", "time / dense"),
                ("tiles", "tiles"), ("cycles_per_image", "cycles/img")])
    for (name, run), widths in layers.items():
        if run != "dense":
            print(f"{name}, {run}: filters per layer {list(widths.values())}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(
        {"settings": vars(args), "rows": rows,
         "layers": {f"{m}/{r}": w for (m, r), w in layers.items()},
         "epochs": {f"{m}/{r}": e for (m, r), e in curves.items()}}, indent=1) + "\n")
    write_csv(out.with_suffix(".csv"), rows)
    _plot(curves, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')}, {out.with_suffix('.csv')} and "
          f"{out.with_suffix('.png')}")


def _plot(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (flops, width) = plt.subplots(1, 2, figsize=(10, 4))
    for (name, run), epochs in curves.items():
        x = [e["epoch"] for e in epochs]
        flops.plot(x, [e["train_flops"] for e in epochs], marker="o", label=f"{name}, {run}")
        if epochs[0]["channels"] is not None:
            width.plot(x, [e["channels"] for e in epochs], marker="o",
                       label=f"{name}, {run}")
    flops.set(xlabel="epoch", ylabel="training FLOPs of the epoch")
    width.set(xlabel="epoch", ylabel="channels after the epoch")
    flops.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
