"""Compressed gradient files (``codnn compress`` / ``codnn decompress``).

A file holds one record per tensor (one for a ``.npy``, one per array of a ``.npz``, in
its order), each with its name, shape, codec settings and a CRC-32, so that a tensor comes
back with its shape and a damaged byte anywhere in a record is an error, not wrong values::

    bytes 0..7    magic b"CODNNGC\\x02" (the last byte is the format version)
    u8            source: 1 = a .npy (one tensor, no name), 2 = a .npz
    u8, u16       0, 0 (reserved)
    u32 LE        number of records
    then each record:
      u16 LE      name length, then the name (UTF-8; empty from a .npy)
      u8          codec: 1 = inceptionn, 2 = terngrad, 3 = rice
      u8          inceptionn, rice: bound_bits b (error bound 2**-b); terngrad: 0
      u8          ndim (0..32)
      u8          0
      u32 LE      terngrad, rice: the record's seed; inceptionn: 0
      ndim u32 LE dimensions
      u32 LE      message length
      message     the codec's message (codnn.golden.inceptionn, .terngrad, .rice)
      u32 LE      CRC-32 (zlib) of the record's bytes before it, name length included

TernGrad tensors get scalers of their own (the paper's layer-wise scalers); the seed of
each TernGrad or rice record continues the counter of the one before it (``seed + values
before it``, modulo 2**32), so the file draws one random stream whatever the number of
tensors (rice draws only when its rounding is stochastic).
"""

import struct
import time
import zlib
from pathlib import Path

import numpy as np

from codnn.golden import inceptionn, rice, terngrad

from .packfile import WeightFileError

__all__ = ["CODECS", "load_gradient_tensors", "load_gradients", "compress_file",
           "decompress_file"]

CODECS = ("inceptionn", "terngrad", "rice")
_MAGIC = b"CODNNGC\x02"
_FILE = struct.Struct("<8sBBHI")
_RECORD = struct.Struct("<BBBBI")
_NPY, _NPZ = 1, 2


def load_gradient_tensors(path):
    """The float arrays of a ``.npy`` (one, named ``""``) or ``.npz`` (each of at least one
    dimension, in order, by name), unconverted; and whether the file was a ``.npz``.

    Raises
    ------
    codnn.packfile.WeightFileError
        If the file is missing, unreadable, holds no array, or one that is not floating
        point or has more than 32 dimensions.
    """
    path = _regular_file(path, "Gradient file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise WeightFileError(f"{path} is not a .npy/.npz array: {error}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            tensors = [(name, loaded[name]) for name in loaded.files]
        tensors = [(name, array) for name, array in tensors if array.ndim]
        if not tensors:
            raise WeightFileError(f"{path} holds no arrays")
    else:
        tensors = [("", loaded)]
    for name, array in tensors:
        where = f"{path}" + (f" ({name})" if name else "")
        if not np.issubdtype(array.dtype, np.floating):
            raise WeightFileError(f"{where} holds {array.dtype}, not floating-point gradients")
        if array.ndim > 32:
            raise WeightFileError(f"{where} has {array.ndim} dimensions; at most 32")
    return tensors, isinstance(loaded, np.lib.npyio.NpzFile)


def load_gradients(path):
    """The gradients of a ``.npy`` or ``.npz`` (its arrays flattened and joined in order), as
    one float32 array (``.npy``: its shape).

    Raises
    ------
    codnn.packfile.WeightFileError
        As ``load_gradient_tensors``.
    """
    tensors, from_npz = load_gradient_tensors(path)
    if from_npz:
        return np.concatenate([array.reshape(-1) for _, array in tensors]).astype(np.float32)
    return tensors[0][1].astype(np.float32)


def _record(name, x, codec, bound_bits, seed, clip, rounding):
    """The record of one float32 tensor and its decoded values."""
    if codec == "inceptionn":
        message = inceptionn.compress(x, bound_bits)
        decoded = inceptionn.decompress(message, bound_bits)
        fields = _RECORD.pack(1, bound_bits, x.ndim, 0, 0)
    elif codec == "rice":
        message = rice.compress(x, bound_bits, rounding, seed)
        decoded = rice.decompress(message)
        fields = _RECORD.pack(3, bound_bits, x.ndim, 0, seed)
    else:
        message = terngrad.compress(x, seed, clip=clip)
        decoded = terngrad.decompress(message)
        fields = _RECORD.pack(2, 0, x.ndim, 0, seed)
    encoded = name.encode()
    body = (struct.pack("<H", len(encoded)) + encoded + fields
            + struct.pack(f"<{x.ndim}I", *x.shape) + struct.pack("<I", len(message)) + message)
    return body + struct.pack("<I", zlib.crc32(body)), message, decoded


def compress_file(path, output, *, codec, bound_bits=inceptionn.DEFAULT_BOUND_BITS, seed=0,
                  clip=None, rounding="nearest"):
    """Compress each gradient tensor of a ``.npy``/``.npz`` file (converted to float32) into
    ``output``; return a report: sizes, ratio, errors against the float32 values, time
    taken, and a row per tensor.

    Raises
    ------
    codnn.packfile.WeightFileError
        For a missing or malformed input file.
    ValueError
        For an unknown codec or rounding, ``bound_bits`` out of 7..15, a bad seed, or
        NaN/Inf given to TernGrad.
    """
    if codec not in CODECS:
        raise ValueError(f"Codec must be one of {', '.join(CODECS)}, not {codec!r}")
    if not 0 <= seed < 1 << 32:
        raise ValueError(f"Seed must lie in 0..2**32-1, not {seed}")
    tensors, from_npz = load_gradient_tensors(path)
    records, rows, errors = [], [], []
    start = time.perf_counter()
    at = seed
    for name, array in tensors:
        x = array.astype(np.float32)
        record, message, decoded = _record(name, x, codec, bound_bits, at, clip, rounding)
        records.append(record)
        finite = np.isfinite(x.reshape(-1))
        error = np.abs(x.reshape(-1)[finite].astype(np.float64) - decoded[finite])
        errors.append((x.reshape(-1)[finite], error))
        row = {"name": name or "(array)", "shape": "x".join(map(str, x.shape)) or "scalar",
               "values": int(x.size), "compressed_bytes": len(message),
               "ratio": round(x.nbytes / len(message), 4),
               "max_abs_error": float(error.max()) if error.size else 0.0}
        if codec != "inceptionn":
            row.update(seed=at)
        if codec == "terngrad":
            row.update(scaler=float(np.frombuffer(message[:4], np.float32)[0]))
        rows.append(row)
        at = (at + x.size) % (1 << 32)
    seconds = time.perf_counter() - start
    header = _FILE.pack(_MAGIC, _NPZ if from_npz else _NPY, 0, 0, len(records))
    Path(output).write_bytes(header + b"".join(records))
    values = np.concatenate([v for v, _ in errors])
    error = np.concatenate([e for _, e in errors])
    original = sum(4 * row["values"] for row in rows)
    packed = sum(row["compressed_bytes"] for row in rows)
    dtypes = sorted({str(array.dtype) for _, array in tensors} - {"float32"})
    report = {"codec": codec, "input": str(path), "output": str(output),
              "tensors": len(rows), "values": sum(row["values"] for row in rows),
              "converted": f"{', '.join(dtypes)} -> float32" if dtypes else None,
              "original_bytes": original, "compressed_bytes": packed,
              "ratio": round(original / packed, 4),
              "max_abs_error": float(error.max()) if error.size else 0.0,
              "mean_abs_error": float(error.mean()) if error.size else 0.0,
              "nonfinite_values": int(sum(row["values"] for row in rows) - values.size),
              "codec_seconds": round(seconds, 3), "per_tensor": rows}
    if codec == "inceptionn":
        report["bound_bits"] = bound_bits
        small = np.abs(values) < 1
        report["bound_holds"] = bool(np.all(error[small] < 2.0 ** -bound_bits)
                                     and np.all(error[~small] == 0))
    elif codec == "rice":
        report.update(bound_bits=bound_bits, rounding=rounding, seed=seed,
                      bound_holds=bool(np.all(error <= 2.0 ** -bound_bits)))
    else:
        report["seed"] = seed
    return report


def _regular_file(path, what):
    """``path`` as a ``Path`` when it names a regular file; else a one-line
    ``WeightFileError`` that says what it is instead (missing, a folder, a device)."""
    path = Path(path)
    if not path.exists():
        raise WeightFileError(f"{what} {path} does not exist")
    if path.is_dir():
        raise WeightFileError(f"{what} {path} is a folder, not a file")
    if not path.is_file():
        raise WeightFileError(f"{what} {path} is not a regular file (a device, pipe or "
                              f"socket)")
    return path


class _Reader:
    """Fields of a compressed file, in order, each a one-line error when cut short."""

    def __init__(self, path, data):
        self.path, self.data, self.at = path, data, 0

    def take(self, fmt, what):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise WeightFileError(f"{self.path}: cut short inside {what}")
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return values

    def raw(self, size, what):
        if self.at + size > len(self.data):
            raise WeightFileError(f"{self.path}: cut short inside {what}")
        self.at += size
        return self.data[self.at - size:self.at]


def _read_record(reader, index):
    path, start = reader.path, reader.at
    (length,) = reader.take("<H", f"record {index}'s name")
    name = reader.raw(length, f"record {index}'s name").decode(errors="replace")
    codec_id, bound_bits, ndim, _, seed = reader.take(_RECORD.format, f"record {index}")
    what = f"record {index}" + (f" ({name})" if name else "")
    if not 1 <= codec_id <= len(CODECS):
        raise WeightFileError(f"{path}: {what} has unknown codec {codec_id}")
    shape = reader.take(f"<{ndim}I", f"{what}'s shape")
    (size,) = reader.take("<I", f"{what}'s message length")
    message = reader.raw(size, f"{what}'s message")
    (crc,) = reader.take("<I", f"{what}'s checksum")
    if zlib.crc32(reader.data[start:reader.at - 4]) != crc:
        raise WeightFileError(f"{path}: {what} is damaged (its CRC-32 does not match)")
    codec = CODECS[codec_id - 1]
    _check_settings(path, what, codec, bound_bits, message)
    try:
        if codec == "inceptionn":
            values = inceptionn.decompress(message, bound_bits)
        elif codec == "rice":
            values = rice.decompress(message)
        else:
            values = terngrad.decompress(message)
    except ValueError as error:
        raise WeightFileError(f"{path}: {what}: {error}") from None
    if values.size != int(np.prod(shape)):
        raise WeightFileError(f"{path}: {what} has {values.size} values, its shape "
                              f"{'x'.join(map(str, shape))} needs {int(np.prod(shape))}")
    return name, values.reshape(shape), codec, bound_bits, seed


def _check_settings(path, what, codec, bound_bits, message):
    """Refuse a record whose ``b`` byte is not what its codec writes: TernGrad's 0, and for
    Rice the bound its message's settings byte carries (the record's copy must agree).
    INCEPTIONN's message does not carry its bound: its decoder checks the byte's range."""
    if codec == "inceptionn":
        return
    if codec == "terngrad":
        if bound_bits:
            raise WeightFileError(f"{path}: {what} has bound bits {bound_bits}; a TernGrad "
                                  f"record has 0")
        return
    try:
        expected = rice.open_message(message)[1]
    except ValueError as error:
        raise WeightFileError(f"{path}: {what}: {error}") from None
    if bound_bits != expected:
        raise WeightFileError(f"{path}: {what} has bound bits {bound_bits} where its "
                              f"message says {expected}")


def decompress_file(path, output):
    """Decode a compressed gradient file: a ``.npy`` for a file made from one, else a
    ``.npz`` of the arrays by name (the suffix added to ``output`` if it lacks it); return
    a short report, ``output`` the path written.

    Raises
    ------
    codnn.packfile.WeightFileError
        If the file is missing, not a codnn gradient file, cut short, damaged (a checksum
        does not match) or its message is corrupt.
    """
    path = _regular_file(path, "Compressed file")
    data = path.read_bytes()
    if not data:
        raise WeightFileError(f"{path} is empty, not a codnn compressed gradient file")
    if data[:7] != _MAGIC[:len(data)][:7]:
        raise WeightFileError(f"{path} is not a codnn compressed gradient file (bad magic)")
    if len(data) < len(_MAGIC):
        raise WeightFileError(f"{path}: cut short inside its magic and version "
                              f"({len(data)} of {len(_MAGIC)} bytes)")
    if data[:8] != _MAGIC:
        raise WeightFileError(f"{path} is format version {data[7]}; this codnn reads version "
                              f"{_MAGIC[7]}: compress the gradients again")
    reader = _Reader(path, data)
    _, source, _, _, count = reader.take(_FILE.format, "its header")
    if source not in (_NPY, _NPZ) or (source == _NPY and count != 1):
        raise WeightFileError(f"{path}: bad header (source {source}, {count} records)")
    tensors = [_read_record(reader, k) for k in range(count)]
    if reader.at != len(data):
        raise WeightFileError(f"{path}: {len(data) - reader.at} bytes past its last record")
    suffix = ".npy" if source == _NPY else ".npz"
    output = str(output) if str(output).endswith(suffix) else f"{output}{suffix}"
    if source == _NPY:
        np.save(output, tensors[0][1])
    else:
        np.savez(output, **{name: values for name, values, *_ in tensors})
    codecs = sorted({codec for _, _, codec, _, _ in tensors})
    return {"codec": ", ".join(codecs), "input": str(path), "output": str(output),
            "tensors": len(tensors), "values": int(sum(t[1].size for t in tensors)),
            "shapes": ", ".join("x".join(map(str, t[1].shape)) or "scalar" for t in tensors)}
