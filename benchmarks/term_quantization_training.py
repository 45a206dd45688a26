"""Term quantization trained for the TQ array: accuracy against term pairs for budgets
alpha in {8, 12, 16} and beta in {2, 3} (groups of 8), before and after TQ-aware
fine-tuning, against uniform sign-magnitude quantizers of 8, 6, 5 and 4 bits.

    .venv/bin/python benchmarks/term_quantization_training.py [--out DIR] [--networks ...]

Each network is trained dense (``codnn.train.run``), then fine-tuned for each budget
(``TrainSpec.tq``: batch normalization folded, then 3 epochs at a tenth of the learning
rate with the forward pass revealing weights and truncating data as golden does);
every model goes through ``codnn infer --engine tq`` for its integer accuracy on the TQ
array's arithmetic. Term pairs per multiply-accumulate, on 100 test images:

- counted the paper's way: ``alpha * beta / g`` for TQ (its lockstep cycles), ``b**2``
  for a ``b``-bit uniform quantizer (bit-parallel against bit-parallel);
- actual: ``sum terms(w) * terms(x)`` over every product the network computes, with the
  revealed weights and truncated data (TQ, NAF digits) or the uniform integers (binary
  digits: the nonzero bits a zero-skipping bit-serial MAC would see).

Networks and schedules: LeNet-5 on MNIST, VGG-6 and ResNet-20 on scikit-learn digits, 15
dense epochs each (about 6 minutes on two cores); MobileNet-v2 and ResNet-18 as
``benchmarks/mobile_networks.py`` writes them (MobileNet-v2's linear bottlenecks: the TQ
array takes their signed activations as sign-magnitude values) on MNIST, 8 dense epochs
(about 20 and 40 minutes). Prints the table; writes ``term_quantization.csv`` and
``.png``.
"""

import time

import mobile_networks
from reproduction import reproduce

from codnn.golden.network import ArrayLayer, TermQuantization
from codnn.golden.term_quant import group, reveal, truncate, ungroup
from codnn.model.datasets import load_dataset
from codnn.model.infer import infer
from codnn.model.onnx_import import load_onnx
from codnn.model.quantize import quantize_network
from codnn.train.run import TrainSpec, train

NETWORKS = {"lenet5": "mnist", "vgg6": "digits", "resnet20": "digits", "mobilenet_v2": "mnist",
            "resnet18": "mnist"}
#: Dense epochs of the networks that are modules of ``mobile_networks`` (not built in).
MODULE_EPOCHS = {"mobilenet_v2": 8, "resnet18": 8}
G, ALPHAS, BETAS, UNIFORM_BITS = 8, (8, 12, 16), (2, 3), (8, 6, 5, 4)
TUNE_EPOCHS, SAMPLE = 3, 100


def uniform(bits):
    """A ``bits``-bit sign-magnitude quantizer as a term quantization that drops nothing
    (every binary digit of a ``bits - 1``-bit magnitude kept)."""
    return TermQuantization(g=1, alpha=bits - 1, beta=bits - 1, encoding="binary",
                            mag_bits=bits - 1)


def actual_pairs(model, data, tq):
    """Term pairs per multiply-accumulate of ``model`` on the TQ array's arithmetic."""
    network = load_onnx(model)
    sample = load_dataset(data)
    integer = quantize_network(network, sample.train_x[:500], alpha=1, gamma=0.0, tq=tq)
    tensors = integer.run(integer.quantize_input(sample.test_x[:SAMPLE]), keep=True)
    pairs = macs = 0
    for step in integer.steps:
        if not isinstance(step, ArrayLayer):
            continue
        W = step.packed.dense()
        X, _ = step.columns(tensors[step.source])
        _, kept = reveal(group(W, tq.g), tq.alpha, tq.encoding, tq.mag_bits, counts=True)
        w_terms = ungroup(kept, W.shape[1]).sum(axis=0)          # per column
        x_terms = truncate(X, tq.beta, tq.encoding, tq.mag_bits, counts=True)[1].sum(axis=1)
        pairs += int(w_terms @ x_terms)
        macs += W.size * X.shape[1]
    return pairs / macs


def _row(network, data, label, model, tq, paper_pairs, dense_accuracy):
    report, _ = infer(model, data, rows=16, cols=16, alpha=1, tq=tq)
    return {"network": network, "quantizer": label, "accuracy": report["integer_accuracy"],
            "loss_points": 100 * (dense_accuracy - report["integer_accuracy"]),
            "pairs_paper": paper_pairs, "pairs_actual": actual_pairs(model, data, tq)}


def _train(network, out, **phases):
    """``network`` trained (a built-in name, or a module of ``mobile_networks``)."""
    data = NETWORKS[network]
    if network not in MODULE_EPOCHS:
        return train(TrainSpec(network, data, **phases), out)
    spec = TrainSpec(network, data, epochs=MODULE_EPOCHS[network], **phases)
    return mobile_networks.train_module(network, spec, 1, out)


def run_network(network, out):
    data = NETWORKS[network]
    began = time.perf_counter()
    dense = _train(network, out / f"{network}-dense")
    fp32 = dense["accuracy"]
    rows = [_row(network, data, f"uniform {b}-bit", dense["model"], uniform(b), b * b, fp32)
            for b in UNIFORM_BITS]
    for alpha in ALPHAS:
        for beta in BETAS:
            tq = TermQuantization(G, alpha, beta)
            paper = alpha * beta / G
            rows.append(_row(network, data, f"TQ a{alpha} b{beta}", dense["model"], tq,
                             paper, fp32))
            tuned = _train(network, out / f"{network}-a{alpha}-b{beta}", tq=tq,
                           tq_epochs=TUNE_EPOCHS)
            rows.append(_row(network, data, f"TQ a{alpha} b{beta} tuned", tuned["model"],
                             tq, paper, fp32))
            print(f"{network} alpha {alpha} beta {beta}: {rows[-2]['accuracy']:.2%} -> "
                  f"{rows[-1]['accuracy']:.2%} (fp32 {fp32:.2%})", flush=True)
    for row in rows:
        row["fp32_accuracy"] = fp32
        row["reduction_vs_8bit_paper"] = 64 / row["pairs_paper"]
        row["reduction_vs_8bit_actual"] = rows[0]["pairs_actual"] / row["pairs_actual"]
    print(f"{network}: {time.perf_counter() - began:.0f} s", flush=True)
    return rows


def _plot(plt, rows):
    networks = list(dict.fromkeys(r["network"] for r in rows))
    figure, axes = plt.subplots(1, len(networks), figsize=(5 * len(networks), 4),
                                squeeze=False)
    for axis, network in zip(axes[0], networks):
        for kind, marker in (("uniform", "s"), ("tuned", "o"), ("TQ", "x")):
            chosen = [r for r in rows if r["network"] == network and (
                kind in r["quantizer"] if kind != "TQ"
                else r["quantizer"].startswith("TQ") and "tuned" not in r["quantizer"])]
            axis.plot([r["pairs_actual"] for r in chosen], [100 * r["accuracy"] for r in chosen],
                      marker, label={"TQ": "TQ, not fine-tuned", "tuned": "TQ fine-tuned",
                                     "uniform": "uniform 8/6/5/4-bit"}[kind])
        axis.set(xscale="log", xlabel="actual term pairs per MAC", ylabel="accuracy (%)",
                 title=f"{network} ({NETWORKS[network]})")
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    return figure


if __name__ == "__main__":
    reproduce(__doc__, tuple(NETWORKS), "term_quantization",
              "term quantization (g 8) against uniform quantizers; pairs per MAC",
              run_network, _plot)
