"""Reading weight files and writing packed layers (``codnn pack``).

Input: ``.npy`` (one layer: an ``N x C`` matrix or ``C_out x C_in x k x k`` conv weights)
or ``.npz`` (one layer per array, named by its key). Output ``.npz``: for every layer
``<name>/P``, ``<name>/idx``, ``<name>/groups`` (``G x alpha`` original column indices,
-1 padded), ``<name>/meta`` (``[alpha, gamma, columns, pruned]``); a ``.npy`` input's layer
is named ``layer``.
"""

import zipfile
from pathlib import Path

import numpy as np

from codnn.golden.column_combining import PackedLayer, conv_weight_matrix, pack

__all__ = ["WeightFileError", "load_layers", "load_packed", "pack_file", "save_packed"]


class WeightFileError(ValueError):
    """A weight file is missing, unreadable or holds something that is not a layer."""


def _as_matrix(name, array):
    if 0 in array.shape:
        raise WeightFileError(f"layer {name!r} has shape {array.shape}: no "
                              f"{'filters' if array.shape[0] == 0 else 'input channels'}")
    if array.ndim == 4:
        return conv_weight_matrix(array)
    if array.ndim != 2:
        raise WeightFileError(f"layer {name!r} has shape {array.shape}: expected an N x C "
                              f"matrix or C_out x C_in x k x k conv weights")
    return array


def load_layers(path):
    """Return ``{name: N x C float matrix}`` from a ``.npy`` or ``.npz`` file. Conv weights
    ``(C_out, C_in, k, k)`` flatten to columns ``(c, ky, kx)``, as ``im2col`` orders a
    convolution's inputs (codnn's one column order).

    Raises
    ------
    WeightFileError
        If the file is missing, not a NumPy file, empty, or holds a non-layer array.
    """
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"no such weight file: {path}")
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                layers = {key: archive[key] for key in archive.files}
        elif path.suffix == ".npy":
            layers = {"layer": np.load(path, allow_pickle=False)}
        else:
            raise WeightFileError(f"{path}: weights must be a .npy or .npz file")
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as error:
        if isinstance(error, WeightFileError):
            raise
        raise WeightFileError(f"{path} is not a readable NumPy file ({error})") from None
    if not layers:
        raise WeightFileError(f"{path} holds no arrays")
    for name, array in layers.items():
        if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype,
                                                                      np.complexfloating):
            raise WeightFileError(f"layer {name!r} holds {array.dtype}, not real numbers")
        if not np.isfinite(array).all():
            raise WeightFileError(f"layer {name!r} holds NaN or infinite weights")
    return {name: _as_matrix(name, array) for name, array in layers.items()}


def save_packed(path, packed_layers):
    """Write ``{name: PackedLayer}`` to an ``.npz`` file (format in the module docstring)."""
    np.savez(path, **{f"{name}/{key}": array for name, packed in packed_layers.items()
                      for key, array in packed.to_arrays().items()})


def read_layer_arrays(path, what, writer):
    """``{layer: {key: array}}`` of an ``.npz`` whose arrays are named ``<layer>/<key>``.

    Raises
    ------
    WeightFileError
        If the file is missing, unreadable or holds no such arrays (the message names
        ``what`` the file should be and the command, ``writer``, that writes it).
    """
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"no such {what} file: {path}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as error:
        raise WeightFileError(f"{path} is not a readable {what} file ({error})") from None
    layers = {}
    for key, value in arrays.items():
        name, slash, field = key.rpartition("/")
        if slash:
            layers.setdefault(name, {})[field] = value
    if not layers:
        raise WeightFileError(f"{path} holds no {what} layer (write it with {writer})")
    return dict(sorted(layers.items()))


def load_packed(path):
    """Read ``{name: PackedLayer}`` from a file ``save_packed`` wrote.

    Raises
    ------
    WeightFileError
        If the file is missing, unreadable, or not a packed layer file.
    """
    layers = {}
    for name, arrays in read_layer_arrays(path, "packed", "codnn pack").items():
        try:
            layers[name] = PackedLayer.from_arrays(arrays)
        except ValueError as error:
            raise WeightFileError(f"{path}, layer {name!r}: {error}") from None
    return layers


def pack_file(path, alpha, gamma):
    """Pack every layer of a weight file; return ``{name: (matrix, PackedLayer)}``."""
    return {name: (matrix, pack(matrix, alpha, gamma))
            for name, matrix in load_layers(path).items()}
