"""Compressed gradient files (``codnn compress`` / ``codnn decompress``).

A file is self-describing: a 16-byte header, the tensor's shape, then one codec message
(``golden.inceptionn`` or ``golden.terngrad``)::

    bytes 0..7    magic b"CODNNGC\\x01" (the last byte is the format version)
    byte  8       codec: 1 = inceptionn, 2 = terngrad
    byte  9       inceptionn: bound_bits b (error bound 2**-b); terngrad: 0
    byte  10      ndim (0..32)
    byte  11      0
    bytes 12..15  terngrad: seed (u32 LE); inceptionn: 0
    then ndim u32 LE dimensions, then the message.
"""

import struct
import time
from pathlib import Path

import numpy as np

from golden import inceptionn, terngrad

from .packfile import WeightFileError

__all__ = ["CODECS", "load_gradients", "compress_file", "decompress_file"]

CODECS = ("inceptionn", "terngrad")
_MAGIC = b"CODNNGC\x01"
_HEADER = struct.Struct("<8sBBBBI")


def load_gradients(path):
    """The float gradients of a ``.npy`` (any shape) or ``.npz`` (its arrays with at least
    one dimension, in order, flattened and joined), as float32.

    Raises
    ------
    codnn.packfile.WeightFileError
        If the file is missing, unreadable, or holds no floating-point array.
    """
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"Gradient file {path} does not exist")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise WeightFileError(f"{path} is not a .npy/.npz array: {error}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            arrays = [loaded[k] for k in loaded.files]
        arrays = [a.reshape(-1) for a in arrays if a.ndim]
        if not arrays:
            raise WeightFileError(f"{path} holds no arrays")
        grads = np.concatenate(arrays)
    else:
        grads = loaded
    if not np.issubdtype(grads.dtype, np.floating):
        raise WeightFileError(f"{path} holds {grads.dtype}, not floating-point gradients")
    if grads.ndim > 32:
        raise WeightFileError(f"{path} has {grads.ndim} dimensions; at most 32")
    return grads


def compress_file(path, output, *, codec, bound_bits=inceptionn.DEFAULT_BOUND_BITS, seed=0,
                  clip=None):
    """Compress the gradients of a ``.npy`` file (converted to float32) into ``output``;
    return a report: sizes, ratio, errors against the float32 values, time taken.

    Raises
    ------
    codnn.packfile.WeightFileError
        For a missing or malformed input file.
    ValueError
        For an unknown codec, ``bound_bits`` out of 7..15, a bad seed, or NaN/Inf given to
        TernGrad.
    """
    if codec not in CODECS:
        raise ValueError(f"Codec must be one of {', '.join(CODECS)}, not {codec!r}")
    grads = load_gradients(path)
    x = grads.astype(np.float32)
    start = time.perf_counter()
    if codec == "inceptionn":
        message = inceptionn.compress(x, bound_bits)
        decoded = inceptionn.decompress(message, bound_bits)
        header = _HEADER.pack(_MAGIC, 1, bound_bits, x.ndim, 0, 0)
    else:
        message = terngrad.compress(x, seed, clip=clip)
        decoded = terngrad.decompress(message)
        header = _HEADER.pack(_MAGIC, 2, 0, x.ndim, 0, seed)
    seconds = time.perf_counter() - start
    Path(output).write_bytes(header + struct.pack(f"<{x.ndim}I", *x.shape) + message)
    finite = np.isfinite(x.reshape(-1))
    error = np.abs(x.reshape(-1)[finite].astype(np.float64) - decoded[finite])
    report = {"codec": codec, "input": str(path), "output": str(output),
              "shape": "x".join(map(str, x.shape)) or "scalar", "values": int(x.size),
              "converted": None if grads.dtype == np.float32 else f"{grads.dtype} -> float32",
              "original_bytes": int(x.nbytes), "compressed_bytes": len(message),
              "ratio": round(x.nbytes / len(message), 4),
              "max_abs_error": float(error.max()) if error.size else 0.0,
              "mean_abs_error": float(error.mean()) if error.size else 0.0,
              "nonfinite_values": int((~finite).sum()),
              "codec_seconds": round(seconds, 3)}
    if codec == "inceptionn":
        report["bound_bits"] = bound_bits
        small = np.abs(x.reshape(-1)[finite]) < 1
        report["bound_holds"] = bool(np.all(error[small] < 2.0 ** -bound_bits)
                                     and np.all(error[~small] == 0))
    else:
        report.update(seed=seed, scaler=float(np.frombuffer(message[:4], np.float32)[0]),
                      nonzero_fraction=round(float(np.mean(decoded != 0)), 4)
                      if decoded.size else 0.0)
    return report


def decompress_file(path, output):
    """Decode a compressed gradient file into a ``.npy``; return a short report.

    Raises
    ------
    codnn.packfile.WeightFileError
        If the file is missing, not a codnn gradient file, or its message is corrupt.
    """
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"Compressed file {path} does not exist")
    data = path.read_bytes()
    if len(data) < _HEADER.size or data[:8] != _MAGIC:
        raise WeightFileError(f"{path} is not a codnn compressed gradient file (bad magic)")
    _, codec_id, bound_bits, ndim, _, seed = _HEADER.unpack_from(data)
    if codec_id not in (1, 2):
        raise WeightFileError(f"{path}: unknown codec {codec_id}")
    body = _HEADER.size + 4 * ndim
    if len(data) < body:
        raise WeightFileError(f"{path}: cut inside its shape")
    shape = struct.unpack_from(f"<{ndim}I", data, _HEADER.size)
    codec = CODECS[codec_id - 1]
    try:
        if codec == "inceptionn":
            values = inceptionn.decompress(data[body:], bound_bits)
        else:
            values = terngrad.decompress(data[body:])
    except ValueError as error:
        raise WeightFileError(f"{path}: {error}") from None
    if values.size != int(np.prod(shape)):
        raise WeightFileError(f"{path}: {values.size} values, its shape "
                              f"{'x'.join(map(str, shape))} needs {int(np.prod(shape))}")
    np.save(output, values.reshape(shape))
    return {"codec": codec, "input": str(path), "output": str(output),
            "shape": "x".join(map(str, shape)) or "scalar", "values": int(values.size),
            **({"bound_bits": bound_bits} if codec == "inceptionn" else {"seed": seed})}
