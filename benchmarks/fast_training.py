"""FAST's block floating point training: accuracy against training cost (bit operations)
for fp32, fixed 8-bit and 4-bit block floating point and FAST's precision policy.

    .venv/bin/python benchmarks/fast_training.py [--out DIR] [--networks ...]

Each network trains from scratch with the same schedule (``codnn.train.run``: 15 epochs,
Adam, seed fixed) on scikit-learn digits (8 x 8; block floating point runs through the
NumPy golden model at every step, so MNIST's 28 x 28 tensors would take hours), in fp32
and in block floating point (blocks of 16, stochastic rounding): fixed 8-bit and 4-bit
mantissas, FAST's policy over widths 2..8 and over 2 and 4 (the paper's), the policy's
threshold ``0.12 - 0.05 step/steps - 0.05 layer/layers``, chosen again every 16 steps.
Cost: bit operations per multiply-accumulate of the forward pass, summed over the forward,
input-gradient and weight-gradient products (``m x m'`` for two mantissa widths; fp32
counts its 24-bit significands). Prints the table; writes ``fast.csv`` and ``fast.png``.
"""

import time

from reproduction import reproduce

from codnn.train.block_float import BlockFloat
from codnn.train.run import TrainSpec, train

NETWORKS = ("lenet5", "vgg6", "resnet20")
#: label -> block floating point settings (None: fp32)
RUNS = {"fp32": None, "bfp 8-bit": BlockFloat(widths=(8,)), "bfp 4-bit": BlockFloat(widths=(4,)),
        "FAST 2..8": BlockFloat(), "FAST 2,4": BlockFloat(widths=(2, 4))}


def run_network(network, out):
    rows = []
    for label, settings in RUNS.items():
        began = time.perf_counter()
        report = train(TrainSpec(network, "digits", bfp=settings),
                       out / f"{network}-{label.replace(' ', '_').replace(',', '_')}")
        phase = report["phases"][0]
        bits = phase.get("bits_per_mac", 3 * 24 ** 2)
        rows.append({"network": network, "training": label, "accuracy": report["accuracy"],
                     "bits_per_mac": bits, "vs_bfp8": 3 * 8 ** 2 / bits,
                     "vs_fp32": 3 * 24 ** 2 / bits, "seconds": time.perf_counter() - began})
        print(f"{network} {label}: {report['accuracy']:.2%}, {bits:.1f} bit ops per MAC, "
              f"{rows[-1]['seconds']:.0f} s", flush=True)
    for row in rows:
        row["points_below_fp32"] = 100 * (rows[0]["accuracy"] - row["accuracy"])
    return rows


def _plot(plt, rows):
    figure, axis = plt.subplots(figsize=(6, 4))
    for network in dict.fromkeys(r["network"] for r in rows):
        chosen = [r for r in rows if r["network"] == network]
        axis.plot([r["bits_per_mac"] for r in chosen], [100 * r["accuracy"] for r in chosen],
                  "o", label=network)
        for r in chosen:
            axis.annotate(r["training"], (r["bits_per_mac"], 100 * r["accuracy"]), fontsize=7)
    axis.set(xscale="log", xlabel="training bit operations per MAC", ylabel="test accuracy (%)",
             title="FAST block floating point on digits")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    return figure


if __name__ == "__main__":
    reproduce(__doc__, NETWORKS, "fast", "block floating point training on digits (15 epochs)",
              run_network, _plot)
