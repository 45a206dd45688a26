"""Term quantization on a real model: term pairs, SQNR and accuracy against 8-bit uniform.

Usage: python benchmarks/tq_model.py [--g 8] [--alphas 8,10,12,16] [--betas 2,3]
       [--encoding naf] [--seed 1]

Trains scikit-learn's MLPClassifier (64-64-10, ReLU) on the handwritten digits that ship
with scikit-learn (1797 8x8 images; 1000 to train, 797 to test, split by ``seed``), then
runs the test set with integer weights and data:
- ``UQ8``: weights and data quantized to 8 bits (sign + 7 magnitude bits, max-abs scales;
  data scales from the training set), exact integer dot products;
- ``TQ``: the same values with term revealing, weights in groups of ``g`` input channels
  with budget ``alpha``, each data value truncated to its top ``beta`` terms.

Term pairs (term-pair multiplications, docs/semantics.md section 3) per test image, summed
over both layers, counted two ways: as the paper's profiler does (UQ8 at 8 x 8 per MAC, TQ at the
lockstep ``alpha * beta`` per group, so the ratio is ``64 g / (alpha beta)``), and as
actually needed by these values (the product of the nonzero binary digits of each UQ8
weight and data value; of the terms each TQ value keeps). SQNR of the weights (dB): TQ
against uniform quantization at the bit width whose average number of terms is closest
to TQ's. Last, the time ``codnn.golden.term_quant.reveal`` takes on a random 4096 x 4096
matrix in groups of ``g``.
"""

import argparse
import time

import numpy as np

from codnn.render import print_rows
from codnn.golden.term_quant import group, quantize, reveal, term_counts, truncate, ungroup

MAG_BITS = 7


def _scale(values):
    top = float(np.abs(values).max())
    return top / ((1 << MAG_BITS) - 1) if top > 0 else 1.0


def train(seed):
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(digits.target))
    x, y = digits.data[order] / 16.0, digits.target[order]
    model = MLPClassifier(hidden_layer_sizes=(64,), max_iter=600, random_state=seed)
    model.fit(x[:1000], y[:1000])
    return model, (x[:1000], y[:1000]), (x[1000:], y[1000:])


def _layers(model):
    return [(w.T, b) for w, b in zip(model.coefs_, model.intercepts_)]   # (out, in)


def run(model, train_x, test_x, *, g, alpha=None, beta=None, encoding="naf"):
    """Integer inference on ``test_x``; TQ when ``alpha``/``beta`` are given. Returns
    (logits, actual term pairs per image, profiler term pairs per image), the pair counts
    as one entry per layer."""
    layers = _layers(model)
    # Data scales: max-abs of each layer's input over the training set (float model).
    scales, h = [], train_x
    for n, (w, b) in enumerate(layers):
        scales.append(_scale(h))
        h = h @ w.T + b
        if n < len(layers) - 1:
            h = np.maximum(h, 0)
    h = test_x
    pairs, profiler = [], []
    for n, (w, b) in enumerate(layers):
        sw, sx = _scale(w), scales[n]
        wq, xq = quantize(w, sw, MAG_BITS), quantize(h, sx, MAG_BITS)
        if alpha is None:
            wt, xt = term_counts(wq, "binary", MAG_BITS), term_counts(xq, "binary", MAG_BITS)
            profiler.append(w.size * (MAG_BITS + 1) ** 2)
        else:
            wq, wt = (ungroup(a, w.shape[1]) for a in
                      reveal(group(wq, g), alpha, encoding, MAG_BITS, counts=True))
            xq, xt = truncate(xq, beta, encoding, MAG_BITS, counts=True)
            profiler.append(w.shape[0] * -(-w.shape[1] // g) * alpha * beta)
        pairs.append(int((xt @ wt.T).sum()) / len(test_x))
        h = (xq @ wq.T) * (sw * sx) + b
        if n < len(layers) - 1:
            h = np.maximum(h, 0)
    return h, pairs, profiler


def sqnr_db(reference, approx):
    noise = np.sum((reference - approx) ** 2)
    return float("inf") if noise == 0 else 10 * np.log10(np.sum(reference ** 2) / noise)


def weight_sqnr(model, g, alpha, encoding):
    """SQNR of TQ weights and of uniform quantization with the closest average term count."""
    rows = []
    for w, _ in _layers(model):
        s = _scale(w)
        wq = quantize(w, s, MAG_BITS)
        tq, kept = reveal(group(wq, g), alpha, encoding, MAG_BITS, counts=True)
        tq_terms = kept.sum() / w.size
        best = None
        for bits in range(1, MAG_BITS + 1):
            uq = quantize(w, _scale(w) * (1 << (MAG_BITS - bits)), bits)
            terms = term_counts(uq, encoding, bits).mean()
            if best is None or abs(terms - tq_terms) < abs(best[1] - tq_terms):
                best = (bits, terms, sqnr_db(w, uq * _scale(w) * (1 << (MAG_BITS - bits))))
        rows.append((tq_terms, sqnr_db(w, ungroup(tq, w.shape[1]) * s), *best))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--g", type=int, default=8)
    parser.add_argument("--alphas", default="8,10,12,16")
    parser.add_argument("--betas", default="2,3")
    parser.add_argument("--encoding", default="naf")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    model, (train_x, _), (test_x, test_y) = train(args.seed)
    print(f"trained MLP 64-64-10 on sklearn digits in {time.perf_counter() - start:.1f} s "
          f"(seed {args.seed}, {len(test_y)} test images)")

    def accuracy(logits):
        return float((logits.argmax(axis=1) == test_y).mean())

    float_acc = float((model.predict(test_x) == test_y).mean())
    uq_logits, uq_layers, uq_profiler_layers = run(model, train_x, test_x, g=args.g)
    uq_pairs, uq_profiler = sum(uq_layers), sum(uq_profiler_layers)
    by_layer = [{"config": "UQ8", **{f"l{n}": f"{p:.0f} / {a:.0f}" for n, (p, a) in
                                     enumerate(zip(uq_profiler_layers, uq_layers))}}]
    rows = [{"config": "float", "acc": f"{100 * float_acc:.2f}"},
            {"config": "UQ8 weights and data", "acc": f"{100 * accuracy(uq_logits):.2f}",
             "profiler": f"{uq_profiler:.0f} (1.0x)", "actual": f"{uq_pairs:.0f} (1.0x)"}]
    for alpha in (int(a) for a in args.alphas.split(",")):
        for beta in (int(b) for b in args.betas.split(",")):
            logits, layer_pairs, layer_profiler = run(model, train_x, test_x, g=args.g,
                                                      alpha=alpha, beta=beta,
                                                      encoding=args.encoding)
            pairs, profiler = sum(layer_pairs), sum(layer_profiler)
            by_layer.append({"config": f"TQ alpha={alpha} beta={beta}", **{
                f"l{n}": f"{p:.0f} ({uq_profiler_layers[n] / p:.1f}x) / {a:.0f} "
                         f"({uq_layers[n] / a:.1f}x)"
                for n, (p, a) in enumerate(zip(layer_profiler, layer_pairs))}})
            rows.append({"config": f"TQ g={args.g} alpha={alpha} beta={beta}",
                         "acc": f"{100 * accuracy(logits):.2f}",
                         "profiler": f"{profiler:.0f} ({uq_profiler / profiler:.1f}x fewer)",
                         "actual": f"{pairs:.0f} ({uq_pairs / pairs:.1f}x fewer)"})
    print_rows(f"accuracy and term pairs per image ({args.encoding})", rows,
               [("config", "configuration"), ("acc", "test accuracy %"),
                ("profiler", "term pairs, paper's count"),
                ("actual", "term pairs, actual")])
    print_rows("term pairs per image by layer: paper's count / actual (fewer than UQ8)",
               by_layer, [("config", "configuration"), ("l0", "layer 1 (64x64)"),
                          ("l1", "layer 2 (10x64)")])

    sqnr_rows = []
    for alpha in (int(a) for a in args.alphas.split(",")):
        for n, (tq_terms, tq_db, bits, uq_terms, uq_db) in enumerate(
                weight_sqnr(model, args.g, alpha, args.encoding)):
            sqnr_rows.append({"layer": f"{n + 1}", "alpha": alpha,
                              "tq": f"{tq_terms:.2f} terms: {tq_db:.1f} dB",
                              "uq": f"{bits} bits, {uq_terms:.2f} terms: {uq_db:.1f} dB"})
    print_rows(f"weight SQNR, TQ (g={args.g}) vs uniform at the closest average terms",
               sqnr_rows, [("layer", "layer"), ("alpha", "alpha"), ("tq", "TQ"),
                           ("uq", "uniform")])

    big = np.random.default_rng(args.seed).integers(-127, 128, size=(4096, 4096))
    alpha = int(args.alphas.split(",")[0])
    start = time.perf_counter()
    reveal(group(big, args.g), alpha, args.encoding, MAG_BITS)
    print(f"reveal of a 4096 x 4096 matrix (g={args.g}, alpha={alpha}, {args.encoding}): "
          f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
