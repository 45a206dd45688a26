"""Distributed training with the NIC codecs over emulated links: accuracy, measured against
predicted iteration time, and the performance model at INCEPTIONN's setting.

    .venv/bin/python benchmarks/distributed_training.py [--out DIR] [--epochs 15]
        [--models lenet5,resnet20] [--no-timing]

1. Accuracy: LeNet-5 on the MNIST subset, 4 processes on 1gbit links, the same schedule
   (Adam, batch 32 per rank, seed fixed) uncompressed, INCEPTIONN-style at b = 10 and 7
   (ring), TernGrad with 2.5-sigma clipping (all-gather, its layer-wise scalers) and the
   Rice codec at b = 10 and 8 (ring); then with momentum SGD (0.9, the rate falling along a
   cosine, as the TernGrad paper trains) uncompressed and TernGrad with either scaler.
   ResNet-20 the same way, uncompressed, INCEPTIONN-style at b = 10 and the Rice codec at
   b = 10 and 8 (Adam).
2. Time: 2 and 4 nodes at 100mbit and 1gbit, uncompressed, b = 10 and Rice at b = 10,
   ring, plus the
   aggregator baseline at 4 nodes; the model (``codnn.distributed.perf_model``) is
   calibrated on all these runs, and each run is also predicted from a calibration on the
   others (leave one out).
3. INCEPTIONN's setting: 4 nodes on 10 GbE, AlexNet / VGG-16 / ResNet-50 gradients, the
   compression ratio measured in 1 (b = 10), the engine in the NIC at its ecp5 line rate
   (``synth/baselines.json``), compute time such that the aggregator baseline spends 70 %
   of an iteration communicating (the paper's figure); against the paper's -74.3..-79.7 %
   communication and -59.9..-69.9 % training time.

Prints the tables; writes ``distributed.csv``, ``prediction.csv``, ``inceptionn.csv`` and
``distributed.png`` into ``--out``.
"""

import argparse
from dataclasses import replace
from pathlib import Path

from reproduction import write_csv

from codnn.distributed.launch import Job, launch
from codnn.distributed.perf_model import (NETWORKS, Cluster, Workload, calibrate,
                                          from_report, predict)
from codnn.render import print_rows
from codnn.synth.baseline import BASELINE_FILE, load_baseline

ACCURACY = {"uncompressed": dict(codec="none"),
            "INCEPTIONN b=10": dict(codec="inceptionn", bound_bits=10),
            "INCEPTIONN b=7": dict(codec="inceptionn", bound_bits=7),
            "TernGrad clip": dict(codec="terngrad", scaler="clip", exchange="allgather"),
            "Rice b=10": dict(codec="rice", bound_bits=10),
            "Rice b=8": dict(codec="rice", bound_bits=8),
            "uncompressed, SGD": dict(codec="none", optimizer="sgd"),
            "TernGrad clip, SGD": dict(codec="terngrad", scaler="clip", exchange="allgather",
                                       optimizer="sgd"),
            "TernGrad max, SGD": dict(codec="terngrad", exchange="allgather", optimizer="sgd")}
#: The accuracy runs of each model (``ACCURACY``'s labels).
MODEL_RUNS = {"lenet5": list(ACCURACY),
              "resnet20": ["uncompressed", "INCEPTIONN b=10", "Rice b=10", "Rice b=8"]}
TIMING = [dict(nodes=n, link=link, codec=codec)
          for n in (2, 4) for link in ("100mbit", "1gbit")
          for codec in ("none", "inceptionn", "rice")]
TIMING += [dict(nodes=4, link="100mbit", codec=codec, exchange="aggregator")
           for codec in ("none", "inceptionn")]
#: The aggregator baseline's share of communication in INCEPTIONN's evaluation.
PAPER_COMM_SHARE = 0.70


def _run(out, label, epochs, **settings):
    folder = out / label.replace(" ", "_").replace("=", "").replace(",", "")
    report = launch(Job(epochs=epochs, **settings), folder, progress=lambda text: None)
    print(f"{label}: {report['seconds']} s, accuracy {report['accuracy'][-1]:.3f}, "
          f"iteration {1e3 * report['iteration_s']:.1f} ms", flush=True)
    return report


def accuracy_runs(out, epochs, models):
    rows = []
    for model in models:
        for label in MODEL_RUNS[model]:
            prefix = "accuracy" if model == "lenet5" else f"accuracy {model}"
            report = _run(out, f"{prefix} {label}", epochs, nodes=4, link="1gbit",
                          model=model, **ACCURACY[label])
            rows.append(_accuracy_row(model, label, report))
    return rows


def _accuracy_row(model, label, report):
    return {"model": model, "run": label, "accuracy": report["accuracy"][-1],
            "curve": " ".join(f"{a:.3f}" for a in report["accuracy"]),
            "ratio": report["ratio"], "iteration_ms": 1e3 * report["iteration_s"],
            "ranks_agree": report["ranks_agree"],
            "bytes_sent_per_iteration": report["sent_bytes"]}


def timing_runs(out):
    reports = [_run(out, "time {nodes}x{link} {codec} {exchange}".format(
        **{"exchange": "ring", **s}), 2, **s) for s in TIMING]
    fitted = calibrate(reports)
    rows = []
    for i, report in enumerate(reports):
        cluster, work = from_report(report)
        fit = predict(cluster, work, fitted).iteration_s
        held_out = predict(cluster, work, calibrate(reports[:i] + reports[i + 1:])).iteration_s
        rows.append({"nodes": cluster.nodes, "link": report["job"]["link"],
                     "codec": work.codec, "exchange": cluster.topology,
                     "measured_ms": 1e3 * report["iteration_s"],
                     "compute_ms": 1e3 * report["compute_s"],
                     "comm_ms": 1e3 * report["communication_s"],
                     "predicted_ms": 1e3 * fit, "error": fit / report["iteration_s"] - 1,
                     "held_out_ms": 1e3 * held_out,
                     "held_out_error": held_out / report["iteration_s"] - 1,
                     "ratio": report["ratio"]})
    return rows, fitted


def nic_rate():
    """Values per second the NIC sustains: the slower of the compressor and decompressor
    at their fastest ecp5 configuration in the synthesis baselines (Fmax x lanes)."""
    entries = load_baseline(BASELINE_FILE)["entries"]
    return min(max(e["fmax_mhz"] * 1e6 * e["parameters"].get("lanes", 1) for e in entries
                   if e["engine"] == engine and e["device"].startswith("ecp5"))
               for engine in ("compressor", "decompressor"))


def inceptionn_setting(calibration, ratio):
    rate, rows = nic_rate(), []
    for network in ("alexnet", "vgg16", "resnet50"):
        gradient = 4 * NETWORKS[network]
        baseline = Cluster(4, 10e9, 0.0, "aggregator")
        plain = Workload(0.0, gradient)
        comm = predict(baseline, plain, calibration).communication_s
        compute = comm * (1 - PAPER_COMM_SHARE) / PAPER_COMM_SHARE
        plain = replace(plain, compute_s=compute)
        before = predict(baseline, plain, calibration)
        ring = Cluster(4, 10e9, 0.0, "ring")
        after = predict(ring, replace(plain, codec="inceptionn", ratio=ratio, nic_rate=rate),
                        calibration)
        on_cpu = predict(ring, replace(plain, codec="inceptionn", ratio=ratio), calibration)
        rows.append({"network": network, "gradient_MB": gradient / 1e6,
                     "compute_ms": 1e3 * compute,
                     "aggregator_comm_ms": 1e3 * before.communication_s,
                     "nic_ring_comm_ms": 1e3 * after.communication_s,
                     "comm_change": after.communication_s / before.communication_s - 1,
                     "time_change": after.iteration_s / before.iteration_s - 1,
                     "cpu_codec_time_change": on_cpu.iteration_s / before.iteration_s - 1,
                     "bottleneck": after.bottleneck})
    return rows


def plot(accuracy, timing, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for row in accuracy:
        curve = [float(a) for a in row["curve"].split()]
        left.plot(range(1, len(curve) + 1), curve, marker="o",
                  label=f"{row['model']}: {row['run']}")
    left.set(xlabel="epoch", ylabel="test accuracy", title="4 nodes, 1gbit")
    left.legend()
    labels = [f"{r['nodes']}x{r['link']}\n{r['codec']} {r['exchange'][:4]}" for r in timing]
    x = range(len(timing))
    right.bar([i - 0.2 for i in x], [r["measured_ms"] for r in timing], 0.4, label="measured")
    right.bar([i + 0.2 for i in x], [r["held_out_ms"] for r in timing], 0.4,
              label="predicted (held out)")
    right.set_xticks(list(x), labels, fontsize=7, rotation=45, ha="right")
    right.set(ylabel="ms per iteration", title="iteration time")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/benchmarks/distributed"))
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--models", default="lenet5,resnet20",
                        help=f"accuracy runs of these models, of {', '.join(MODEL_RUNS)}")
    parser.add_argument("--timing", action=argparse.BooleanOptionalAction, default=True,
                        help="the iteration-time runs and INCEPTIONN's setting")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODEL_RUNS]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}: one of {', '.join(MODEL_RUNS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    accuracy = accuracy_runs(args.out, args.epochs, models)
    print_rows(f"accuracy after {args.epochs} epochs, 4 nodes, 1gbit", accuracy,
               [(k, k.replace("_", " ")) for k in accuracy[0]])
    write_csv(args.out / "distributed.csv", accuracy)
    timing = []
    if args.timing:
        timing = timing_report(args.out, accuracy)
    plot(accuracy, timing, args.out / "distributed.png")
    print(f"wrote {args.out}/distributed.csv, "
          + ("prediction.csv, inceptionn.csv, " if args.timing else "") + "distributed.png")


def timing_report(out, accuracy):
    """Run and print the timing part and INCEPTIONN's setting; returns the timing rows."""
    timing, fitted = timing_runs(out)
    print(f"calibration: efficiency {fitted.efficiency:.3f}, overhead "
          f"{1e6 * fitted.overhead_s:.0f} us per message, codec rates "
          + ", ".join(f"{c} {r / 1e6:.0f} M values/s" for c, r in fitted.codec_rates))
    print_rows("iteration time, measured and predicted", timing,
               [(k, k.replace("_", " ")) for k in timing[0]])
    ratio = next(r["ratio"] for r in accuracy if r["run"] == "INCEPTIONN b=10")
    setting = inceptionn_setting(fitted, ratio)
    print_rows(f"INCEPTIONN's setting: 4 nodes, 10 GbE, ratio {ratio:.2f}, engine at "
               f"{nic_rate() / 1e6:.0f} M values/s", setting,
               [(k, k.replace("_", " ")) for k in setting[0]])
    write_csv(out / "prediction.csv", timing)
    write_csv(out / "inceptionn.csv", setting)
    return timing


if __name__ == "__main__":
    main()
