"""Train the two LeNet-5 models ``codnn demo`` runs and write them to benchmarks/models:
``lenet5_mnist.onnx`` (dense) and ``lenet5_mnist_cc.onnx`` (column-combined: alpha 8,
gamma 0.5, 80 % zeros, the joint schedule).

    .venv/bin/python benchmarks/train_lenet5.py [--out benchmarks/models]

The same runs as ``codnn train lenet5`` and ``codnn train lenet5 --column-combine
alpha=8,gamma=0.5`` (``codnn.train.run``: 15 dense epochs; five prune points, 3 epochs
after each and 15 after the last); fixed seeds, so the files come out the same on this
machine at every run. Needs the ``train`` extra (PyTorch CPU).
"""

import argparse
import shutil
import tempfile
from pathlib import Path

from codnn.train.run import ColumnCombine, TrainSpec, train

RUNS = {"lenet5_mnist.onnx": TrainSpec("lenet5", "mnist"),
        "lenet5_mnist_cc.onnx": TrainSpec("lenet5", "mnist", column_combine=ColumnCombine(
            alpha=8, gamma=0.5, sparsity=0.8))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "models")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, spec in RUNS.items():
        with tempfile.TemporaryDirectory() as folder:
            report = train(spec, folder, progress=print)
            shutil.copyfile(report["model"], args.out / name)
        phase = report["phases"][-1]
        print(f"wrote {args.out / name}: test accuracy {report['accuracy']:.2%}, "
              f"{phase['sparsity']:.1%} zeros, tiles {phase['tiles']} of "
              f"{phase['dense_tiles']} dense")


if __name__ == "__main__":
    main()
