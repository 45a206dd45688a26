"""Every array kind side by side on whole networks: cycles per image, resources and Fmax,
images per second, and images per second per LUT (the figure of merit of issue 50).

Usage: python benchmarks/array_merit.py [--size 8] [--device ecp5-85k] [--dsp-luts 100]
       [--networks lenet5_mnist,lenet5_mnist_cc,resnet20_mnist] [-o PREFIX]

Arrays, each ``--size`` square: the column-combined array with parallel MACs (DSP blocks
where the device has them, and again with none: ``codnn synth --dsp-blocks 0``, so that
LUT-only designs compare fairly), with bit-serial MACs (alpha 8, 8-bit weights and
data), and the TQ array (g 8, NAF) at the paper's alpha 12, beta 3 on each model as it
is, and at alpha 8, beta 2 on the model fine-tuned for that budget (``codnn train
--tq``: the dense model's run and 5 epochs of TQ-aware fine-tuning, trained once and
kept beside PREFIX; a network without a training run here, the column-combined
LeNet-5, runs as it is). Each is synthesized alone on
``--device`` (``codnn.flows.run_synthesis``; the reports are kept in PREFIX-synth.json, so
a second run only builds what is missing). Per network (LeNet-5 dense and column-combined
from benchmarks/models; ResNet-20 trained as benchmarks/network_engine.py trains it) and
array, ``codnn infer`` (batch 1, the MNIST test split) gives the integer accuracy and the
cycles per image of the cycle model, split into loading (data waiting for a tile's
weights or term slots), streaming (a tile's data going in) and draining (the pipeline
after the last beat), per layer in PREFIX.json; the figure of merit is images per second at the
array's Fmax per thousand LUTs, and per thousand LUT equivalents counting a DSP block as
``--dsp-luts`` LUTs. Writes PREFIX.json, PREFIX.csv and PREFIX.png. Needs the ``train``
extra for ResNet-20; the synthesis is the long part (about ten minutes an array at 8 x 8
on one core).
"""

import argparse
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from codnn.flows import run_synthesis
from codnn.golden.network import TermQuantization
from codnn.model.infer import infer
from codnn.render import print_rows
from codnn.sim.runner import default_build_root
from codnn.train.run import TrainSpec, train
from network_engine import MODELS, resnet_models
from reproduction import write_csv

#: Array name -> (engine, parameters, DSP blocks allowed (None: all), infer options).
#: An array whose options hold ``TUNED`` runs each network's TQ-fine-tuned model.
TUNED = "tuned"
ARRAYS = {
    "parallel": ("systolic", {"alpha": 8, "mac": "parallel"}, None, {"mac": "parallel"}),
    "parallel, no DSP": ("systolic", {"alpha": 8, "mac": "parallel"}, 0,
                         {"mac": "parallel"}),
    "bitserial": ("systolic", {"alpha": 8, "mac": "bitserial"}, None, {"mac": "bitserial"}),
    "tq": ("tq", {"g": 8, "budget": 12, "beta": 3}, None,
           {"tq": TermQuantization(8, 12, 3)}),
    "tq a8 b2, tuned": ("tq", {"g": 8, "budget": 8, "beta": 2}, None,
                        {"tq": TermQuantization(8, 8, 2), TUNED: True}),
}
#: How each network was trained (``codnn train``), for its TQ-fine-tuned twin.
TRAINING = {"lenet5_mnist": TrainSpec("lenet5", "mnist"),
            "resnet20_mnist": TrainSpec("resnet20", "mnist", epochs=8)}


def _synthesized(args, cache):
    """Each array's synthesis report (from ``cache``, a JSON file, or built now)."""
    reports = json.loads(cache.read_text()) if cache.exists() else {}
    for name, (engine, params, dsp, _) in ARRAYS.items():
        key = f"{name} {args.size}x{args.size} {args.device}"
        if key not in reports:
            print(f"synthesizing {key} ...", flush=True)
            reports[key] = run_synthesis(engine, {"rows": args.size, "cols": args.size,
                                                  **params},
                                         device=args.device, dsp_blocks=dsp)
            cache.write_text(json.dumps(reports, indent=1, default=str) + "\n")
    return {name: reports[f"{name} {args.size}x{args.size} {args.device}"]
            for name in ARRAYS}


def _networks(names, folder):
    paths = {}
    for name in names:
        if name.startswith("resnet20"):
            paths[name] = resnet_models(folder)[name]
        else:
            paths[name] = MODELS / f"{name}.onnx"
    return paths


def _tuned(network, path, tq, folder):
    """``network``'s model fine-tuned for ``tq`` (trained once into ``folder``), or
    ``path`` itself for a network with no training run here."""
    if network not in TRAINING:
        return path
    tuned = Path(folder) / f"{network}-tq-g{tq.g}-a{tq.alpha}-b{tq.beta}.onnx"
    if not tuned.exists():
        print(f"fine-tuning {network} for {tq} ...", flush=True)
        with tempfile.TemporaryDirectory() as work:
            report = train(replace(TRAINING[network], tq=tq), work)
            shutil.copyfile(report["model"], tuned)
    return tuned


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--device", default="ecp5-85k")
    parser.add_argument("--dsp-luts", type=int, default=100,
                        help="LUTs a DSP block counts as in the LUT-equivalent figure")
    parser.add_argument("--networks", default="lenet5_mnist,lenet5_mnist_cc,resnet20_mnist")
    parser.add_argument("-o", "--output", default=str(default_build_root() / "array_merit"))
    args = parser.parse_args()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    synth = _synthesized(args, out.with_name(out.name + "-synth.json"))
    rows = []
    for network, path in _networks(args.networks.split(","), out.parent).items():
        for name, (_, _, _, options) in ARRAYS.items():
            options = dict(options)
            model = _tuned(network, path, options["tq"], out.parent) \
                if options.pop(TUNED, False) else path
            report, _ = infer(model, "mnist", rows=args.size, cols=args.size, alpha=8,
                              **options)
            s = synth[name]
            per_s = s["fmax_mhz"] * 1e6 / report["cycles_per_image"]
            equivalents = s["lut"] + args.dsp_luts * s["dsp"]
            rows.append({"network": network, "array": name,
                         "accuracy": report["integer_accuracy"],
                         "cycles": report["cycles_per_image"], "lut": s["lut"],
                         "dsp": s["dsp"], "fmax_mhz": s["fmax_mhz"],
                         "images_per_s": per_s, "per_klut": 1e3 * per_s / s["lut"],
                         "per_klut_equivalent": 1e3 * per_s / equivalents,
                         **{f"{part}_cycles": sum(layer[f"{part}_cycles"]
                                                  for layer in report["layers"])
                            for part in ("loading", "streaming", "draining")},
                         "layer_cycles": {layer["layer"]: {
                             part: layer[f"{part}_cycles"]
                             for part in ("loading", "streaming", "draining")}
                             for layer in report["layers"]}})
    print_rows(f"Arrays of {args.size} x {args.size} on {args.device}, batch 1 (a DSP block "
               f"counted as {args.dsp_luts} LUTs)", rows,
               [("network", "network"), ("array", "array"), ("accuracy", "accuracy"),
                ("cycles", "cycles/img"), ("loading_cycles", "loading"),
                ("streaming_cycles", "streaming"), ("draining_cycles", "draining"),
                ("lut", "LUT"), ("dsp", "DSP"),
                ("fmax_mhz", "Fmax MHz"), ("images_per_s", "img/s"),
                ("per_klut", "img/s per kLUT"),
                ("per_klut_equivalent", "img/s per kLUT equivalent")])
    out.with_suffix(".json").write_text(json.dumps({"settings": vars(args), "rows": rows},
                                                   indent=1) + "\n")
    write_csv(out.with_suffix(".csv"), rows, [k for k in rows[0] if k != "layer_cycles"])
    _plot(rows, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')}, {out.with_suffix('.csv')} and "
          f"{out.with_suffix('.png')}")


def _plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    networks = list(dict.fromkeys(r["network"] for r in rows))
    arrays = list(ARRAYS)
    figure, axes = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(arrays)
    for k, array in enumerate(arrays):
        values = [next(r["per_klut"] for r in rows if r["network"] == n and r["array"] == array)
                  for n in networks]
        axes.bar([i + k * width for i in range(len(networks))], values, width, label=array)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(networks))], networks)
    axes.set(ylabel="images/s per thousand LUTs")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
