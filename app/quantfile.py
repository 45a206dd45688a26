"""Term-quantizing weight files (``codnn quantize``).

Input: as ``codnn pack`` (``.npy`` or ``.npz``; conv weights ``(C_out, C_in, k, k)`` are
flattened to columns ``(c, ky, kx)``, as ``im2col`` orders a convolution's inputs, so a
group is ``g`` consecutive columns in that order, as on the TQ array). Each layer is
quantized to sign-magnitude integers (``mag_bits``, max-abs scale), then term-revealed in
groups of ``g`` along its input axis (the last group zero-padded) with budget ``alpha``.

Output ``.npz``: for every layer ``<name>/q`` (the uniform integers), ``<name>/tq`` (the
revealed integers, same shape), ``<name>/scale`` (float: value = integer * scale) and
``<name>/meta`` (``[g, alpha, mag_bits, encoding index in ENCODINGS]``).
"""

from dataclasses import dataclass

import numpy as np

from codnn.golden.term_quant import ENCODINGS, group, quantize, reveal, term_counts, ungroup

from .packfile import WeightFileError, load_layers, read_layer_arrays

__all__ = ["QuantizedLayer", "quantize_file", "load_quantized"]


@dataclass(frozen=True)
class QuantizedLayer:
    """One layer of a ``codnn quantize`` file: the uniform integers ``q`` (``N x K``) and
    the term quantization it was revealed with."""

    q: np.ndarray
    g: int
    alpha: int
    mag_bits: int
    encoding: str


def load_quantized(path):
    """Read ``{name: QuantizedLayer}`` from a file ``quantize_file`` wrote.

    Raises
    ------
    WeightFileError
        If the file is missing, unreadable, or not a term-quantized layer file.
    """
    layers = {}
    for name, arrays in read_layer_arrays(path, "term-quantized", "codnn quantize").items():
        q, meta = arrays.get("q"), arrays.get("meta")
        if q is None or meta is None or meta.shape != (4,) or q.ndim != 2 \
                or not np.issubdtype(q.dtype, np.integer):
            raise WeightFileError(f"{path}, layer {name!r}: not a term-quantized layer "
                                  f"(expected integer q and a 4-value meta)")
        g, alpha, mag_bits, encoding = (int(v) for v in meta)
        if min(g, alpha, mag_bits) < 1 or not 0 <= encoding < len(ENCODINGS) \
                or (q.size and int(np.abs(q).max()) >= 1 << mag_bits):
            raise WeightFileError(f"{path}, layer {name!r}: meta {meta.tolist()} does not "
                                  f"describe its integers")
        layers[name] = QuantizedLayer(q.astype(np.int64), g, alpha, mag_bits,
                                      ENCODINGS[encoding])
    return layers


def _sqnr_db(reference, approx):
    noise = float(np.sum((reference - approx) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(np.sum(reference ** 2) / noise)


def quantize_file(path, output, *, g, alpha, beta, encoding="naf", mag_bits=7):
    """Quantize and reveal every layer of a weight file, write ``output``; return one
    report row per layer: terms per weight before/after, term pairs per MAC (the paper's
    count: 8-bit uniform at ``(mag_bits + 1)**2``, TQ at the lockstep ``alpha * beta`` per
    group), SQNR of uniform and TQ weights against the float ones.

    Raises
    ------
    codnn.packfile.WeightFileError
        For a missing or malformed weight file.
    ValueError
        For invalid ``g``, ``alpha``, ``beta``, ``encoding`` or ``mag_bits``.
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"Encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}")
    for value, what in ((g, "Group size"), (alpha, "Budget"), (beta, "Data term budget")):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{what} must be a positive integer, not {value!r}")
    arrays, rows = {}, []
    for name, matrix in load_layers(path).items():
        matrix = matrix.astype(np.float64)
        peak = float(np.abs(matrix).max())
        scale = peak / ((1 << mag_bits) - 1) if peak > 0 else 1.0
        q = quantize(matrix, scale, mag_bits)
        tq, kept = reveal(group(q, g), alpha, encoding, mag_bits, counts=True)
        tq = ungroup(tq, matrix.shape[1])
        groups = matrix.shape[0] * -(-matrix.shape[1] // g)
        uq_pairs = matrix.size * (mag_bits + 1) ** 2
        tq_pairs = groups * alpha * beta
        arrays.update({f"{name}/q": q, f"{name}/tq": tq, f"{name}/scale": np.array(scale),
                       f"{name}/meta": np.array([g, alpha, mag_bits,
                                                 ENCODINGS.index(encoding)])})
        rows.append({"layer": name, "shape": f"{matrix.shape[0]}x{matrix.shape[1]}",
                     "terms_before": round(float(term_counts(q, encoding, mag_bits).mean()), 3),
                     "terms_after": round(float(kept.sum()) / matrix.size, 3),
                     "pairs_per_mac_uq8": (mag_bits + 1) ** 2,
                     "pairs_per_mac_tq": round(tq_pairs / matrix.size, 3),
                     "pairs_ratio": round(uq_pairs / tq_pairs, 2),
                     "sqnr_uq_db": round(_sqnr_db(matrix, q * scale), 2),
                     "sqnr_tq_db": round(_sqnr_db(matrix, tq * scale), 2)})
    np.savez(output, **arrays)
    return rows
