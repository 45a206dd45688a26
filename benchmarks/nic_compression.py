"""Gradient compression on real gradients: INCEPTIONN-style codec and TernGrad next to SZ3
(pysz) and ZFP (zfpy) at the same absolute error bound, with throughput on this machine.

    .venv/bin/python benchmarks/nic_compression.py [--bounds 7,8,10,12] [--size 25600000]

Gradients: ``benchmarks/data/digits_mlp_gradients.npz`` (made by
``benchmarks/gradient_dumps.py``; an MLP on scikit-learn's digits, dumped at several steps
of training). For each dump and each ``b``: compression ratio (original bytes /
compressed bytes), max and mean absolute error, for the codec (error bound ``2**-b``),
SZ3 in ABS mode at ``2**-b`` and ZFP in fixed-accuracy mode at ``2**-b`` (``within``: max
error <= ``2**-b``; the codec's own guarantee is strict). TernGrad (max-abs
and 2.5-sigma scalers) has no error bound: its ratio and errors are listed once per dump.
The last table times the golden codecs and the compiled INCEPTIONN-style codec
(``codnn.distributed.fast_codec``, numba, byte-equal to golden; compiled before timing)
on ``--size`` values (ResNet-50's 25.6 M gradients by default), the dumps tiled to that
size, one core. ``b = 6`` is outside the codec's
range (docs/semantics.md: 7..15; at 6 the 8-bit class would reach 2**1), so the smallest
bound is 7.
"""

import argparse
import time

import numpy as np
from gradient_dumps import DEFAULT_OUTPUT, dump, load

from codnn.distributed import fast_codec
from codnn.golden import inceptionn, terngrad


def timed(function, *args):
    """``(function(*args), seconds it took)``."""
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def sz3(x, bound):
    """SZ3 in ABS mode at ``bound``: ``(bytes, decoded, seconds in, seconds out)``."""
    from pysz import sz, szConfig, szErrorBoundMode
    config = szConfig()
    config.errorBoundMode = szErrorBoundMode.ABS
    config.absErrorBound = bound
    (packed, _), seconds = timed(sz.compress, x, config)
    (y, _), back = timed(sz.decompress, packed, np.float32, x.shape)
    return len(packed), y, seconds, back


def zfp(x, bound):
    """ZFP in fixed-accuracy mode at ``bound``: as ``sz3``."""
    import zfpy
    packed, seconds = timed(zfpy.compress_numpy, x, bound)
    y, back = timed(zfpy.decompress_numpy, packed)
    return len(packed), y, seconds, back


def _codec(x, b, codec=inceptionn):
    packed, seconds = timed(codec.compress, x, b)
    y, back = timed(codec.decompress, packed, b)
    return len(packed), y, seconds, back


def _row(name, step, b, x, result):
    size, y, seconds, back = result
    error = np.abs(x.astype(np.float64) - y.astype(np.float64))
    return {"dump": f"step {step}", "b": b, "codec": name, "ratio": x.nbytes / size,
            "max_err": error.max(), "mean_err": error.mean(),
            "within": "-" if b is None else "yes" if error.max() <= 2.0 ** -b else "NO",
            "MB/s in": x.nbytes / seconds / 1e6, "MB/s out": x.nbytes / back / 1e6}


def _print(rows, columns):
    print("  ".join(f"{c:>10}" for c in columns))
    for row in rows:
        cells = []
        for c in columns:
            v = row[c]
            cells.append(f"{v:>10.3g}" if isinstance(v, float) else f"{str(v):>10}")
        print("  ".join(cells))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bounds", default="7,8,10,12",
                        help="error bound exponents b (7..15), comma-separated")
    parser.add_argument("--size", type=int, default=25_600_000,
                        help="values for the throughput table (default 25.6 M)")
    args = parser.parse_args()
    bounds = [int(b) for b in args.bounds.split(",")]
    for b in bounds:
        inceptionn.check_bound_bits(b)
    if not DEFAULT_OUTPUT.exists():
        dump()
    dumps = load()
    rows = []
    for step, x in dumps.items():
        for b in bounds:
            rows.append(_row("inceptionn", step, b, x, _codec(x, b)))
            rows.append(_row("SZ3", step, b, x, sz3(x, 2.0 ** -b)))
            rows.append(_row("ZFP", step, b, x, zfp(x, 2.0 ** -b)))
        for name, clip in (("terngrad", None), ("terngrad2.5", terngrad.CLIP_SIGMAS)):
            packed, seconds = timed(terngrad.compress, x, 1, None, clip)
            y, back = timed(terngrad.decompress, packed)
            rows.append(_row(name, step, None, x, (len(packed), y, seconds, back)))
    print(f"Gradients: {DEFAULT_OUTPUT.name} ({len(dumps)} dumps of "
          f"{next(iter(dumps.values())).size} float32)")
    _print(rows, ["dump", "b", "codec", "ratio", "max_err", "mean_err", "within", "MB/s in",
                  "MB/s out"])

    tiled = np.resize(np.concatenate(list(dumps.values())), args.size).astype(np.float32)
    print(f"\nCodec throughput on {args.size} values ({tiled.nbytes / 1e6:.0f} MB), one core:")
    _codec(tiled[:1000], 10, fast_codec)                 # compile (or load the cache)
    timing = [_row("inceptionn", "tiled", 10, tiled, _codec(tiled, 10)),
              _row("inceptionn (numba)", "tiled", 10, tiled, _codec(tiled, 10, fast_codec))]
    packed, seconds = timed(terngrad.compress, tiled, 1)
    y, back = timed(terngrad.decompress, packed)
    timing.append(_row("terngrad", "tiled", None, tiled, (len(packed), y, seconds, back)))
    for row in timing:
        row["s in"] = tiled.nbytes / row["MB/s in"] / 1e6
        row["s out"] = tiled.nbytes / row["MB/s out"] / 1e6
        row["Mval/s in"], row["Mval/s out"] = row["MB/s in"] / 4, row["MB/s out"] / 4
    _print(timing, ["codec", "b", "ratio", "s in", "s out", "Mval/s in", "Mval/s out"])


if __name__ == "__main__":
    main()
