"""Training in the device's arithmetic (semantics section 11) against PyTorch, side by
side: LeNet-5 trained from scratch on the MNIST subset three ways from the same initial
weights, in the same batch order, with the same SGD (momentum, weight decay):

- ``torch fp32``: PyTorch in float32;
- ``torch bfp``: PyTorch with ``codnn train --block-float``'s arithmetic at fixed widths
  (``codnn.train.block_float``: weights, inputs and output gradients in blocks of 16
  along channels, products and sums in float32);
- ``golden``: the training step of ``codnn.golden.bfp_training``, every step, as a
  training engine must compute it (every product's operands blocked along its sum,
  exact block dot products accumulated in float32 in a fixed order, the table-based
  softmax gradient, SGD in float32).

    .venv/bin/python benchmarks/device_training.py [--epochs 10] [--widths 8|fast]
                                                   [--out DIR]

Prints the test accuracy after each epoch, the final gaps (the issue's targets: within 1
point of fp32, within 0.5 of ``torch bfp``), FAST's bit operations per MAC, and each
run's training images per second on this machine (one process); writes
``device_training.json`` and ``device_training.png`` (the curves).
"""

import argparse
import copy
import dataclasses
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from codnn.model.datasets import load_dataset
from codnn.render import print_rows
from codnn.train.block_float import BlockFloat, attach
from codnn.train.device_run import DeviceRun, batches, device_train
from codnn.train.models import lenet5

SEED = 20261207


def _torch_run(model, data, args, bfp):
    """Train ``model`` (fp32, or with block floating point at fixed widths); the test
    accuracy after each epoch and the training seconds."""
    steps = args.epochs * -(-len(data.train_x) // args.batch)
    widths = (2, 4, 6, 8) if args.widths == "fast" else (int(args.widths),)
    state = attach(model, BlockFloat(widths=widths, seed=SEED), steps)[0] if bfp else None
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.decay)
    x, y = torch.from_numpy(data.train_x), torch.from_numpy(data.train_y).long()
    test_x = torch.from_numpy(data.test_x)
    curve, seconds = [], 0.0
    for epoch in range(args.epochs):
        began = time.perf_counter()
        model.train()
        for chosen in batches(len(x), args.batch, SEED, epoch):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[chosen]), y[chosen]).backward()
            optimizer.step()
            if state is not None:
                state.step += 1
        seconds += time.perf_counter() - began
        model.eval()
        with torch.no_grad():
            predicted = model(test_x).argmax(1).numpy()
        curve.append(float((predicted == data.test_y).mean()))
        print(f"  epoch {epoch + 1}: {curve[-1]:.2%}", flush=True)
    bits = state.bit_ops / state.macs if state is not None else 3 * 24 ** 2
    return curve, seconds, bits


def _golden_run(args):
    """The golden step's run (``codnn.train.device_run``: the same initialization, seed
    and batch order as the torch runs)."""
    widths = (2, 4, 6, 8) if args.widths == "fast" else (int(args.widths),)
    report = device_train(DeviceRun(model="lenet5", data="mnist", epochs=args.epochs,
                                    batch=args.batch, lr=args.lr, momentum=args.momentum,
                                    decay=args.decay, widths=widths, seed=SEED),
                          args.out / "golden", progress=lambda text: print(f"  {text}"))
    epochs = report["epochs"]
    return ([row["accuracy"] for row in epochs], sum(row["seconds"] for row in epochs),
            report["bits_per_mac"], report["nonfinite_steps"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--decay", type=float, default=5e-4)
    parser.add_argument("--widths", default="8", choices=[*map(str, range(2, 9)), "fast"],
                        help="mantissa bits, 2..8, or fast: FAST's policy over 2, 4, 6, 8 "
                             "(threshold 0.12 - 0.05 step/steps - 0.05 layer/layers, "
                             "chosen every 16 steps)")
    parser.add_argument("--out", type=Path, default=Path("build/benchmarks/device_training"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    data = load_dataset("mnist")
    data = dataclasses.replace(data, train_x=data.train_x.astype(np.float32),
                               test_x=data.test_x.astype(np.float32))
    torch.manual_seed(SEED)
    start = lenet5(data.train_x.shape[1:], data.classes)
    print(f"LeNet-5, MNIST subset ({len(data.train_x)} train, {len(data.test_x)} test), "
          f"{args.epochs} epochs, batch {args.batch}, SGD lr {args.lr} momentum "
          f"{args.momentum} decay {args.decay}, widths {args.widths}, seed {SEED}; "
          f"torch {torch.__version__}, one thread, {platform.processor() or 'cpu'}")
    runs = {}
    for label in ("torch fp32", "torch bfp", "golden"):
        print(label, flush=True)
        model = copy.deepcopy(start)
        if label == "golden":
            curve, seconds, bits, flagged = _golden_run(args)
        else:
            curve, seconds, bits = _torch_run(model, data, args, label == "torch bfp")
            flagged = 0
        runs[label] = {"curve": curve, "accuracy": curve[-1], "bits_per_mac": bits,
                       "images_per_s": args.epochs * len(data.train_x) / seconds,
                       "nonfinite_steps": flagged}
    rows = [{"training": label, "accuracy": f"{r['accuracy']:.2%}",
             "vs fp32 (points)": f"{100 * (r['accuracy'] - runs['torch fp32']['accuracy']):+.1f}",
             "vs torch bfp": f"{100 * (r['accuracy'] - runs['torch bfp']['accuracy']):+.1f}",
             "bit ops/MAC": f"{r['bits_per_mac']:.0f}",
             "train images/s": f"{r['images_per_s']:.0f}",
             "curve": " ".join(f"{100 * a:.1f}" for a in r["curve"])}
            for label, r in runs.items()]
    print_rows("LeNet-5 on MNIST: the device's training arithmetic against torch", rows,
               [(k, k) for k in rows[0]])
    (args.out / "device_training.json").write_text(json.dumps(
        {"settings": vars(args) | {"out": str(args.out)}, "runs": runs}, indent=2))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(6, 4))
    for label, r in runs.items():
        axis.plot(range(1, args.epochs + 1), [100 * a for a in r["curve"]], "o-", label=label)
    axis.set(xlabel="epoch", ylabel="test accuracy (%)",
             title=f"LeNet-5 on MNIST, widths {args.widths}")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(args.out / "device_training.png", dpi=120)
    print(f"wrote {args.out / 'device_training.json'} and {args.out / 'device_training.png'}")


if __name__ == "__main__":
    main()
