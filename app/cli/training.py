"""``codnn train``: train a model for the arrays (PyTorch, the ``train`` extra): dense, then
column combining (prune points with retraining) or term-quantization-aware fine-tuning,
or in block floating point throughout; writes the ONNX model ``codnn infer`` runs and a
per-phase report. With ``--nodes`` it runs data-parallel training over emulated links
with a NIC codec instead. Without PyTorch the command says how to install it (exit 2).
``codnn predict``: the performance model of distributed training (NumPy only)."""

import argparse

from ..distributed import JobFailed
from ..model.quantize import CALIBRATIONS
from ..train import TrainError
from .options import UsageError, build_dir_option, json_option, positive_int

__all__ = ["COMMANDS", "USAGE_ERRORS", "FAILURES"]

USAGE_ERRORS = (TrainError,)
FAILURES = (JobFailed,)


def _settings(keys):
    """An argparse type: ``key=value,...`` with the given keys (name -> type)."""
    def parse(text):
        values = {}
        for item in filter(None, text.split(",")):
            key, sep, value = item.partition("=")
            if not sep or key not in keys:
                raise argparse.ArgumentTypeError(
                    f"expected {','.join(f'{k}=...' for k in keys)}, not {text!r}")
            try:
                values[key] = keys[key](value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{key}={value!r} is not a "
                                                 f"{keys[key].__name__}") from None
        return values
    return parse


def flag(text):
    """0 or 1, as a bool."""
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


def _widths(text):
    try:
        return tuple(int(w) for w in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected widths like 2,4,6,8, not {text!r}") \
            from None


def add_train(sub):
    try:
        from ..train.block_float import BlockFloat
        from ..train.models import MODELS
        from ..train.run import SCHEDULES, SEED
    except ImportError as error:
        raise UsageError(f"codnn train needs PyTorch ({error}): pip install "
                         f"'codnn[train]'") from None
    sub.description = ("Train a model for the arrays on a data set that ships with a "
                       "package: dense, then with --column-combine prune points with "
                       "retraining (the paper's joint optimization), or with --tq "
                       "term-quantization-aware fine-tuning; or with --block-float in "
                       "FAST's block floating point throughout, or with --device-step in the "
                       "arithmetic of a training engine (the golden training step). "
                       "Writes model.onnx (for codnn "
                       "infer) and report.json into the output folder, and a checkpoint "
                       "after every epoch that --resume continues from.")
    sub.add_argument("model", metavar="MODEL",
                     help=f"one of {', '.join(MODELS)}, or FILE.py:FUNCTION: your own "
                          f"network, the torch module FUNCTION(input_shape, classes) returns")
    sub.add_argument("--data", default="mnist", metavar="NAME|FILE.npz",
                     help="mnist (28 x 28, 4,000 train / 1,000 test), digits (8 x 8, "
                          "1,438 / 359), or an .npz of inputs x and labels y (its own "
                          "x_test and y_test, or split 4:1 after a fixed shuffle) "
                          "(default mnist)")
    sub.add_argument("--epochs", type=positive_int, default=15,
                     help="dense training epochs (default 15)")
    sub.add_argument("--lr", type=float, default=None, help="Adam learning rate of the "
                     "dense phase; later phases take half (default 0.001); with "
                     "--device-step SGD's (default 0.05)")
    sub.add_argument("--batch", type=positive_int, default=64, help="batch size (default 64)")
    sub.add_argument("--seed", type=int, default=SEED, help=f"seed (default {SEED})")
    sub.add_argument("--column-combine", type=_settings({"alpha": int, "gamma": float}),
                     metavar="alpha=A,gamma=G", default=None,
                     help="train for the column-combined array (alpha default 8, gamma 0.5)")
    sub.add_argument("--sparsity", type=float, default=0.8,
                     help="final rate of zero weights (default 0.8)")
    sub.add_argument("--points", type=positive_int, default=5,
                     help="prune points on the cubic ramp (default 5)")
    sub.add_argument("--retrain-epochs", type=int, default=3,
                     help="epochs after each prune point but the last (default 3)")
    sub.add_argument("--final-epochs", type=positive_int, default=15,
                     help="epochs after the last prune point (default 15)")
    sub.add_argument("--schedule", choices=SCHEDULES, default="joint",
                     help="joint: prune points on the ramp; oneshot: prune once to "
                          "--sparsity, retrain as many epochs (default joint)")
    sub.add_argument("--tq", type=_settings({"g": int, "budget": int, "beta": int,
                                             "encoding": str}),
                     metavar="g=G,budget=K,beta=B", default=None,
                     help="fine-tune for the term-quantization array: G weights a group, "
                          "K terms kept per group (the TQ paper's alpha), B terms per "
                          "value (defaults g=8, budget=12, beta=3, encoding=naf)")
    sub.add_argument("--tq-epochs", type=positive_int, default=5,
                     help="term-quantization fine-tuning epochs (default 5)")
    sub.add_argument("--calibrate", choices=CALIBRATIONS, default="max",
                     help="--tq: each activation's scale on the integer grids from its "
                          "calibration values, as codnn infer --calibrate (default max)")
    sub.add_argument("--prunetrain", nargs="?", const={}, default=None,
                     type=_settings({"penalty": float, "interval": int, "threshold": float,
                                     "grow": flag}),
                     metavar="penalty=P,interval=N,threshold=T,grow=0|1",
                     help="PruneTrain in place of dense training: channel group lasso (P of "
                          "the objective, default 0.2), the network rebuilt without its "
                          "zeroed channels every N epochs (default 5; groups whose root "
                          "mean square weight is under T, default 5e-3, are zero); grow=1: "
                          "the mini-batch grows as the network shrinks; column combining "
                          "or --tq can follow")
    defaults = BlockFloat()
    sub.add_argument("--block-float", action="store_true",
                     help="train in block floating point from the first step (FAST: blocks "
                          "of 16, stochastic rounding, widths by FAST's policy)")
    sub.add_argument("--bfp-widths", type=_widths, default=defaults.widths, metavar="M,...",
                     help=f"mantissa widths the policy picks from, rising by 2; one width "
                          f"fixes the precision (default {','.join(map(str, defaults.widths))})")
    sub.add_argument("--bfp-a", type=float, default=defaults.a,
                     help=f"threshold at the first step and layer (default {defaults.a})")
    sub.add_argument("--bfp-b", type=float, default=defaults.b,
                     help=f"threshold's fall over training and over depth (default "
                          f"{defaults.b})")
    sub.add_argument("--bfp-every", type=positive_int, default=defaults.every,
                     help=f"steps between width choices (default {defaults.every})")
    sub.add_argument("--device-step", action="store_true",
                     help="train with the training step a training engine computes "
                          "(semantics section 11, NumPy: slow): block floating point at "
                          "--bfp-widths (one width fixed, several FAST's policy, 2..8), "
                          "SGD with --momentum and --decay")
    sub.add_argument("--decay", type=float, default=5e-4,
                     help="--device-step: SGD's weight decay (default 5e-4)")
    sub.add_argument("--rows", type=positive_int, default=16,
                     help="array rows the report counts tiles on (default 16)")
    sub.add_argument("--cols", type=positive_int, default=16,
                     help="array columns the report counts tiles on (default 16)")
    sub.add_argument("-o", "--output", metavar="DIR", default=None,
                     help="output folder (default BUILD_DIR/train/MODEL-DATA)")
    sub.add_argument("--resume", action="store_true",
                     help="continue the run whose checkpoint is in the output folder")
    _add_distributed(sub)
    build_dir_option(sub)
    json_option(sub)


def _fault(text):
    rank, step, kind = (text.split(":") + ["", ""])[:3]
    try:
        return {"rank": int(rank), "step": int(step), "kind": kind}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RANK:STEP:KIND, not {text!r}") from None


def _add_distributed(sub):
    from ..distributed.hooks import SCALERS
    from ..golden.exchange import CODECS, EXCHANGES
    group = sub.add_argument_group(
        "distributed training", "with --nodes N: N data-parallel processes, each in its own "
        "network namespace behind a rate-limited link (loopback when namespaces cannot be "
        "made), gradients crossing as codec messages; dense training only")
    group.add_argument("--nodes", type=positive_int, default=None,
                       help="number of training processes (2..16)")
    group.add_argument("--link", default="1gbit",
                       help="each node's link rate, e.g. 100mbit, 1gbit (default 1gbit)")
    group.add_argument("--latency", default="0",
                       help="round-trip latency, e.g. 100us (needs netem; default 0)")
    group.add_argument("--codec", choices=CODECS, default="none",
                       help="gradient codec (default none: raw float32)")
    group.add_argument("--bound-bits", type=int, default=10,
                       help="inceptionn, rice: error bound 2**-B, B in 7..15 (default 10)")
    group.add_argument("--scaler", choices=SCALERS, default="max",
                       help="TernGrad's scaler: max|g| or 2.5 std(g) (default max)")
    group.add_argument("--exchange", choices=EXCHANGES, default="ring",
                       help="ring (INCEPTIONN's), aggregator (rank 0 as parameter server) "
                            "or allgather (default ring)")
    group.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                       help="adam (constant rate) or sgd (momentum, the rate falling along "
                            "a cosine to 0; TernGrad's paper) (default adam)")
    group.add_argument("--momentum", type=float, default=0.9,
                       help="sgd: momentum, in [0, 1) (default 0.9)")
    group.add_argument("--timeout", type=float, default=60.0,
                       help="seconds a rank waits for a peer before the job fails "
                            "(default 60)")
    group.add_argument("--fault", type=_fault, default=None, metavar="RANK:STEP:KIND",
                       help="drill: at STEP rank RANK feeds NaN (nan), exits (exit) or "
                            "takes its link down (link)")


def _spec(args):
    from codnn.golden.network import TermQuantization

    from ..train.block_float import BlockFloat
    from ..train.run import ColumnCombine, PruneTrain, TrainSpec
    cc = tq = bfp = pt = None
    if args.column_combine is not None:
        cc = ColumnCombine(sparsity=args.sparsity, points=args.points,
                           retrain_epochs=args.retrain_epochs, final_epochs=args.final_epochs,
                           schedule=args.schedule,
                           **{"alpha": 8, "gamma": 0.5, **args.column_combine})
    if args.tq is not None:
        settings = {"g": 8, "budget": 12, "beta": 3, **args.tq}
        tq = TermQuantization(alpha=settings.pop("budget"), **settings)
    if args.prunetrain is not None:
        pt = PruneTrain(**args.prunetrain)
    if args.block_float:
        bfp = BlockFloat(widths=args.bfp_widths, a=args.bfp_a, b=args.bfp_b,
                         every=args.bfp_every)
    return TrainSpec(model=args.model, data=args.data, epochs=args.epochs,
                     lr=1e-3 if args.lr is None else args.lr,
                     batch=args.batch, seed=args.seed, column_combine=cc, tq=tq,
                     tq_epochs=args.tq_epochs, calibrate=args.calibrate, bfp=bfp,
                     prunetrain=pt, rows=args.rows, cols=args.cols)


def _run_distributed(args, spec):
    from pathlib import Path

    from ..distributed.launch import Job, launch
    from ..render import err_console, print_json, print_rows
    from ..sim import default_build_root
    from ..train.models import model_label
    if spec.column_combine or spec.tq or spec.bfp or spec.prunetrain or args.resume:
        raise TrainError("distributed training (--nodes) is dense training: not with "
                         "--column-combine, --tq, --block-float, --prunetrain or --resume")
    job = Job(model=spec.model, data=spec.data, epochs=spec.epochs, lr=spec.lr,
              batch=spec.batch, seed=spec.seed, codec=args.codec, bound_bits=args.bound_bits,
              scaler=args.scaler, exchange=args.exchange, nodes=args.nodes, link=args.link,
              latency=args.latency, timeout=args.timeout, fault=args.fault,
              optimizer=args.optimizer, momentum=args.momentum)
    out = Path(args.output) if args.output else Path(
        args.build_dir or default_build_root()) / "train" / (
        f"{model_label(args.model)}-{Path(args.data).stem}-{args.nodes}x{args.link}-{args.codec}-"
        f"{args.exchange}")
    report = launch(job, out, progress=lambda text: err_console.print(text, highlight=False))
    if args.json:
        print_json(report)
        return 0
    ms = {key: 1e3 * report[key] for key in ("iteration_s", "compute_s", "communication_s",
                                             "codec_s", "wire_s")}
    print_rows(f"codnn train {args.model} on {args.nodes} nodes ({report['links']}, "
               f"{args.link}), {args.codec} over a {args.exchange} exchange; "
               f"{report['iterations']} iterations, ms per iteration",
               [ms | {key: report[key] for key in ("sent_bytes", "tx_bytes", "ratio")}
                | {"accuracy": report["accuracy"][-1], "agree": report["ranks_agree"]}],
               [("iteration_s", "iteration"), ("compute_s", "compute"),
                ("communication_s", "communication"), ("codec_s", "codec"),
                ("wire_s", "wire"), ("sent_bytes", "bytes sent"),
                ("tx_bytes", "bytes on interface"), ("ratio", "compression"),
                ("accuracy", "test accuracy"), ("agree", "ranks agree")])
    if any(report["nonfinite"]):
        print(f"NaN/Inf gradient values sent raw, per rank: {report['nonfinite']}")
    print(f"report: {out / 'report.json'}")
    return 0


def _run_device_step(args, out):
    """``--device-step``: the golden training step's run (``codnn.train.device_run``)."""
    from ..render import err_console, print_json, print_rows
    from ..train.device_run import DeviceRun, device_train
    others = [name for name, on in (("--column-combine", args.column_combine),
                                    ("--tq", args.tq), ("--prunetrain", args.prunetrain),
                                    ("--block-float", args.block_float),
                                    ("--nodes", args.nodes), ("--resume", args.resume))
              if on not in (None, False)]
    if others:
        raise TrainError(f"--device-step trains with its own arithmetic: not with "
                         f"{', '.join(others)}")
    run = DeviceRun(model=args.model, data=args.data, epochs=args.epochs, batch=args.batch,
                    lr=0.05 if args.lr is None else args.lr, momentum=args.momentum,
                    decay=args.decay, widths=args.bfp_widths, a=args.bfp_a, b=args.bfp_b,
                    every=args.bfp_every, seed=args.seed)
    try:
        report = device_train(run, out,
                              progress=lambda text: err_console.print(text, highlight=False))
    except ValueError as error:          # a model, data set or setting it cannot take
        raise TrainError(str(error)) from None
    if args.json:
        print_json(report)
        return 0
    print_rows(f"codnn train {args.model} --device-step on {args.data} "
               f"({report['train_images']} train / {report['test_images']} test images; "
               f"{report['bits_per_mac'] or 0:.1f} bit operations per MAC, "
               f"{report['nonfinite_steps']} steps with a non-finite value)",
               report["epochs"], [("epoch", "epoch"), ("loss", "loss"),
                                  ("accuracy", "test accuracy"), ("seconds", "seconds")])
    print(f"model: {report['model']}\nreport: {out / 'report.json'}")
    return 0


def run_train(args):
    from pathlib import Path

    from ..render import err_console, print_json, print_rows
    from ..sim import default_build_root
    from ..train.models import model_label
    from ..train.run import train
    if args.device_step:
        return _run_device_step(args, Path(args.output) if args.output else Path(
            args.build_dir or default_build_root()) / "train" /
            f"{model_label(args.model)}-{Path(args.data).stem}-device")
    spec = _spec(args)
    if args.nodes is not None:
        return _run_distributed(args, spec)
    out = Path(args.output) if args.output else \
        Path(args.build_dir or default_build_root()) / "train" / \
        f"{model_label(args.model)}-{Path(args.data).stem}"
    report = train(spec, out, resume=args.resume,
                   progress=lambda text: err_console.print(text, highlight=False))
    if args.json:
        print_json(report)
        return 0
    print_rows(f"codnn train {args.model} on {args.data} ({report['train_images']} train / "
               f"{report['test_images']} test images; tiles on a {args.rows} x {args.cols} "
               f"array)", report["phases"],
               [("phase", "phase"), ("epochs", "epochs"), ("rate", "prune rate"),
                ("sparsity", "zeros"), ("groups", "columns / groups"), ("tiles", "tiles"),
                ("dense_tiles", "dense tiles"), ("tile_ratio", "tiles / dense"),
                ("accuracy", "test accuracy"), ("seconds", "seconds")]
               + ([("bits_per_mac", "bit ops per MAC")] if args.block_float else [])
               + ([("channels", "channels"), ("flops_ratio", "FLOPs / dense")]
                  if args.prunetrain is not None else []))
    if args.prunetrain is not None:
        print_rows("PruneTrain, per epoch (seconds: the training pass)", report["epochs"],
                   [("epoch", "epoch"), ("channels", "channels"),
                    ("train_flops", "training FLOPs"), ("seconds", "seconds"),
                    ("loss", "loss"), ("accuracy", "test accuracy"),
                    ("rebuilt", "rebuilt")])
    print_rows("per layer, as written", report["layers"],
               [("name", "layer"), ("shape", "N x C"), ("sparsity", "zeros"),
                ("groups", "columns / groups"), ("tiles", "tiles"),
                ("dense_tiles", "dense tiles")])
    print(f"model: {report['model']}\nreport: {Path(report['model']).parent / 'report.json'}")
    return 0


def add_predict(sub):
    from ..distributed.perf_model import NETWORKS, TOPOLOGIES
    sub.description = ("Predict the iteration time of data-parallel training by parts "
                       "(compute, codec, bandwidth, latency) and answer what-ifs: one more "
                       "node, a 10x faster link, no compression, the codec on the CPU or in "
                       "the NIC, the other exchange, overlap with the backward pass. "
                       "Calibrated from the report.json of codnn train --nodes runs.")
    sub.add_argument("--calibration", nargs="+", metavar="PATH", default=(),
                     help="report.json files, or folders searched for them (at least two "
                          "runs; default: built-in estimates)")
    sub.add_argument("--network", default="alexnet",
                     help=f"gradient size: one of {', '.join(NETWORKS)}, or a parameter "
                          f"count (default alexnet)")
    sub.add_argument("--compute", type=float, default=100.0,
                     help="compute time per iteration in ms (default 100)")
    sub.add_argument("--nodes", type=int, default=4, help="nodes (default 4)")
    sub.add_argument("--link", default="10gbit", help="link rate (default 10gbit)")
    sub.add_argument("--latency", default="0", help="round-trip latency (default 0)")
    sub.add_argument("--exchange", choices=TOPOLOGIES, default="ring",
                     help="ring, aggregator or allgather (default ring)")
    sub.add_argument("--codec", choices=("none", "inceptionn", "terngrad", "rice"),
                     default="inceptionn", help="gradient codec (default inceptionn)")
    sub.add_argument("--ratio", type=float, default=3.0,
                     help="compression ratio (default 3.0)")
    sub.add_argument("--nic-rate", type=float, default=None, metavar="VALUES_PER_S",
                     help="the codec runs in the NIC at this rate (Fmax x lanes); "
                          "default: on the CPU")
    sub.add_argument("--overlap", action="store_true",
                     help="communication overlaps the backward pass")
    sub.add_argument("--plot", metavar="PNG", default=None, help="also draw the what-ifs")
    json_option(sub)


def _reports(paths):
    import json
    from pathlib import Path
    files = []
    for path in map(Path, paths):
        if not path.exists():
            raise UsageError(f"no such calibration file or folder: {path}")
        files += sorted(path.rglob("report.json")) if path.is_dir() else [path]
    try:
        return [json.loads(f.read_text()) for f in files]
    except ValueError as error:
        raise UsageError(f"a calibration file is not JSON: {error}") from None


def run_predict(args):
    from ..distributed.links import LinkError, parse_latency, parse_rate
    from ..distributed.perf_model import (NETWORKS, Calibration, Cluster, Workload,
                                          calibrate, scenarios)
    from ..render import print_json, print_rows
    try:
        cluster = Cluster(args.nodes, parse_rate(args.link), parse_latency(args.latency),
                          args.exchange)
    except LinkError as error:
        raise UsageError(str(error)) from None
    params = NETWORKS.get(args.network) or (int(args.network) if args.network.isdigit()
                                            else None)
    if not params or args.nodes < 2 or args.compute < 0 or args.ratio < 1 or (
            args.nic_rate is not None and args.nic_rate <= 0):
        raise UsageError(f"predict needs a network of {', '.join(NETWORKS)} or a parameter "
                         f"count, nodes >= 2, compute >= 0, ratio >= 1 and a positive NIC rate")
    calibration = Calibration()
    if args.calibration:
        try:
            calibration = calibrate(_reports(args.calibration))
        except (KeyError, TypeError, ValueError) as error:
            raise UsageError(f"cannot calibrate from {', '.join(args.calibration)}: "
                             f"{error}") from None
    work = Workload(args.compute / 1e3, 4 * params, args.codec,
                    args.ratio if args.codec != "none" else 1.0, args.nic_rate, args.overlap)
    rows = [{"scenario": name, "nodes": c.nodes, "link": f"{c.rate_bits / 1e9:g} Gb/s",
             "exchange": c.topology, "codec": w.codec + (" (NIC)" if w.nic_rate else ""),
             "iteration_ms": 1e3 * p.iteration_s, "compute_ms": 1e3 * p.compute_s,
             "codec_ms": 1e3 * p.codec_s, "bandwidth_ms": 1e3 * p.bandwidth_s,
             "latency_ms": 1e3 * p.latency_s, "bottleneck": p.bottleneck,
             "images_per_s_per_node": 1 / p.iteration_s if p.iteration_s else None}
            for name, c, w, p in scenarios(cluster, work, calibration)]
    for row in rows:
        row["vs_given"] = rows[0]["iteration_ms"] / row["iteration_ms"]
        row.pop("images_per_s_per_node")
    if args.json:
        print_json({"calibration": {"efficiency": calibration.efficiency,
                                    "overhead_s": calibration.overhead_s,
                                    "codec_rates": dict(calibration.codec_rates)},
                    "scenarios": rows})
    else:
        print(f"calibration: link goodput {100 * calibration.efficiency:.0f} %, "
              f"{1e6 * calibration.overhead_s:.0f} us per message, codec "
              + ", ".join(f"{c} {r / 1e6:.0f} M values/s" for c, r in calibration.codec_rates)
              + ("" if args.calibration else " (built-in estimates)"))
        print_rows(f"{args.network}: {4 * params / 1e6:.1f} MB of gradients per iteration",
                   rows, [(k, k.replace("_ms", " ms").replace("_", " ")) for k in rows[0]])
    if args.plot:
        _plot_scenarios(rows, args.plot)
    return 0


def _plot_scenarios(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(9, 4))
    bottom = [0.0] * len(rows)
    for part in ("compute_ms", "codec_ms", "bandwidth_ms", "latency_ms"):
        values = [r[part] for r in rows]
        axes.barh([r["scenario"] for r in rows], values, left=bottom,
                  label=part.replace("_ms", ""))
        bottom = [b + v for b, v in zip(bottom, values)]
    axes.invert_yaxis()
    axes.set(xlabel="ms per iteration (compute, then communication when not overlapped)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


_UNITS = {"": 1, "B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "KIB": 1 << 10,
          "MIB": 1 << 20, "GIB": 1 << 30}


def _size(text):
    """An argparse type: a byte count such as 10MiB, 512KiB, 4MB or 65536."""
    number = text.rstrip("KMGiBb")
    unit = text[len(number):].upper()
    try:
        value = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"expected a size like 10MiB, 512KiB or 65536, "
                                         f"not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a size must be at least one byte, not {text!r}")
    return int(value)


def add_traffic(sub):
    sub.description = ("The DRAM traffic of one training iteration of a network, layer by "
                       "layer and (--mbs) with mini-batch serialization: groups of layers "
                       "run in sub-batches so that the tensors between them stay in the "
                       "on-chip buffer (docs/training.md).")
    sub.add_argument("model", metavar="MODEL.onnx|resnet50|inception_v3",
                     help="an ONNX model, or resnet50 (224 x 224) or inception_v3 (299 x "
                          "299): their published shapes")
    sub.add_argument("--batch", type=positive_int, default=32,
                     help="mini-batch size (default 32)")
    sub.add_argument("--buffer", type=_size, default=10 << 20, metavar="SIZE",
                     help="on-chip buffer, e.g. 10MiB (default 10MiB)")
    sub.add_argument("--value-bytes", type=positive_int, default=2,
                     help="bytes per activation, gradient and weight (default 2)")
    sub.add_argument("--mbs", action="store_true",
                     help="also the serialized schedule: its groups, sub-batches and bytes")
    sub.add_argument("--plot", metavar="PNG", default=None, help="draw the bytes per layer")
    json_option(sub)


def run_traffic(args):
    from ..model.training_traffic import (SHAPES, TrafficError, from_float_network,
                                          layer_by_layer, serialize, traffic)
    from ..render import print_json, print_rows
    if args.model in SHAPES:
        layers, sizes = SHAPES[args.model]()
    else:
        from pathlib import Path

        from ..model.onnx_import import ModelError, load_onnx
        if not Path(args.model).is_file():
            raise UsageError(f"no such model file: {args.model} (an ONNX file, or one of "
                             f"{', '.join(SHAPES)})")
        try:
            layers, sizes = from_float_network(load_onnx(args.model))
        except (ModelError, TrafficError, OSError) as error:
            raise UsageError(str(error)) from None
    rows = traffic(layers, sizes, layer_by_layer(layers, args.batch), args.batch,
                   args.value_bytes)
    report = {"model": args.model, "batch": args.batch, "buffer_bytes": args.buffer,
              "value_bytes": args.value_bytes,
              "layer_by_layer_bytes": sum(r["activations"] + r["weights"] for r in rows)}
    for row in rows:
        row["bytes"] = row["activations"] + row["weights"]
    if args.mbs:
        try:
            groups = serialize(layers, sizes, args.batch, args.buffer, args.value_bytes)
        except TrafficError as error:
            raise UsageError(str(error)) from None
        serial = traffic(layers, sizes, groups, args.batch, args.value_bytes)
        for row, other in zip(rows, serial):
            row["mbs_bytes"] = other["activations"] + other["weights"]
        report["mbs_bytes"] = sum(r["mbs_bytes"] for r in rows)
        report["reduction"] = 1 - report["mbs_bytes"] / report["layer_by_layer_bytes"]
        report["groups"] = [{"layers": f"{layers[g.first].name} .. {layers[g.last].name}",
                             "count": g.last - g.first + 1, "sub_batch": g.sub_batch}
                            for g in groups]
    report["layers"] = rows
    if args.plot:
        _plot_traffic(rows, args.plot)
    if args.json:
        print_json(report)
        return 0
    columns = [("layer", "layer"), ("activations", "activation B"), ("weights", "weight B"),
               ("bytes", "layer by layer B")] + ([("mbs_bytes", "MBS B")] if args.mbs else [])
    print_rows(f"{args.model}: DRAM bytes of one training iteration, batch {args.batch}, "
               f"{args.value_bytes}-byte values", rows, columns)
    if args.mbs:
        print_rows(f"MBS groups with a {args.buffer}-byte buffer", report["groups"],
                   [("layers", "layers"), ("count", "count"), ("sub_batch", "sub-batch")])
    summary = f"layer by layer: {report['layer_by_layer_bytes'] / 2 ** 20:.1f} MiB"
    if args.mbs:
        summary += (f"; MBS: {report['mbs_bytes'] / 2 ** 20:.1f} MiB "
                    f"({100 * report['reduction']:.1f} % less)")
    print(summary)
    return 0


def _plot_traffic(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(max(6, len(rows) * 0.12), 4))
    x = range(len(rows))
    axes.plot(x, [r["bytes"] / 2 ** 20 for r in rows], label="layer by layer")
    if "mbs_bytes" in rows[0]:
        axes.plot(x, [r["mbs_bytes"] / 2 ** 20 for r in rows], label="MBS")
    axes.set(xlabel="layer (forward order)", ylabel="MiB per iteration")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


COMMANDS = {"train": (add_train, run_train), "predict": (add_predict, run_predict),
            "traffic": (add_traffic, run_traffic)}
