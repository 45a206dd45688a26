"""Gradient codecs on the gradients of real training runs: the Rice codec (to nearest and
stochastic), the INCEPTIONN-style codec, TernGrad, SZ3 and ZFP, by ratio, speed and bias.

    .venv/bin/python benchmarks/codec_comparison.py [--out DIR] [--networks lenet5,...]

Gradients: ``codnn train``'s built-in networks trained here with Adam (learning rate
1e-3, batch 64, seed 0): LeNet-5 on MNIST, VGG-6 and ResNet-20 on scikit-learn's digits,
``EPOCHS`` epochs each; every parameter tensor's gradient is kept at the first step, a
step a fifth of the way in and the last step (early, middle, late). Each tensor is one
message (what a DDP bucket of one layer would send). For each network, step and bound
``2**-b`` (b = 8, 10, 12): the ratio (original bytes over message bytes, summed over the
tensors) of each error-bounded codec, SZ3 in ABS mode and ZFP in fixed-accuracy mode at
the same bound, and whether every value came back within the bound; TernGrad (max|g|
scaler) has no bound and is listed per step. Bias: the effective gain ``sum(x * y) /
sum(x**2)`` of the decoded ``y`` on the original ``x``, over the whole gradient and its
range over the tensors of at least ``MIN_GAIN_VALUES`` values. Speed: the compiled codecs
(``fast_rice``, ``fast_codec``) and SZ3 / ZFP, in million values per second on one core,
on the network's gradients tiled to 4 M values, the fastest of three rounds; beside them
the NIC engines' rate in gateware (``GATEWARE``: lanes x Fmax of the fastest entry in
synth/baselines.json, whatever its device). Prints the table, writes
``codec_comparison.csv`` and ``.png`` (ratio against SZ3's).
"""

import numpy as np
from nic_compression import sz3, timed, zfp
from reproduction import reproduce

from codnn.distributed import fast_codec, fast_rice
from codnn.golden import terngrad
from codnn.model.datasets import load_dataset
from codnn.synth.baseline import load_baseline
from codnn.train.models import build_model

NETWORKS = {"lenet5": "mnist", "vgg6": "digits", "resnet20": "digits"}
EPOCHS = {"lenet5": 2, "vgg6": 6, "resnet20": 6}
BOUNDS = (8, 10, 12)
SPEED_VALUES = 4_000_000
#: Timed rounds per codec (the fastest counts: a shared machine only slows a round).
SPEED_ROUNDS = 3
#: The NIC engines (compressor, decompressor) of each codec that has them in gateware.
GATEWARE = {"rice": ("rice_compressor", "rice_decompressor"),
            "rice stochastic": ("rice_compressor", "rice_decompressor"),
            "inceptionn": ("compressor", "decompressor")}
#: Tensors of fewer values (biases) are left out of the per-tensor gain range: one draw
#: of a few values says little about a codec's bias.
MIN_GAIN_VALUES = 1000


def _gradients(network):
    """``{step: [tensor gradients]}`` at the first, a fifth-of-the-way and the last step."""
    import torch
    torch.manual_seed(0)
    data = load_dataset(NETWORKS[network])
    model = build_model(network, data.train_x.shape[1:])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.tensor(data.train_x, dtype=torch.float32)
    y = torch.tensor(data.train_y)
    batches = -(-len(x) // 64)
    total = EPOCHS[network] * batches
    keep = {1, max(2, total // 5), total}
    rng = np.random.default_rng(0)
    dumps, step = {}, 0
    for _ in range(EPOCHS[network]):
        order = torch.tensor(rng.permutation(len(x)))
        for b in range(batches):
            pick = order[b * 64:(b + 1) * 64]
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[pick]), y[pick]).backward()
            step += 1
            if step in keep:
                dumps[step] = [p.grad.detach().numpy().reshape(-1).copy()
                               for p in model.parameters()]
            optimizer.step()
    return dumps


def _run(compress, decompress):
    """A codec as ``nic_compression`` runs one: ``x -> (bytes, decoded, seconds in,
    seconds out)``."""
    def run(x):
        packed, seconds = timed(compress, x)
        y, back = timed(decompress, packed)
        return len(packed), y, seconds, back
    return run


def _codecs(b):
    """Each codec at bound ``2**-b``, by name."""
    return {
        "rice": _run(lambda x: fast_rice.compress(x, b), fast_rice.decompress),
        "rice stochastic": _run(lambda x: fast_rice.compress(x, b, "stochastic", 1),
                                fast_rice.decompress),
        "inceptionn": _run(lambda x: fast_codec.compress(x, b),
                           lambda m: fast_codec.decompress(m, b)),
        "SZ3": lambda x: sz3(x, 2.0 ** -b),
        "ZFP": lambda x: zfp(x, 2.0 ** -b),
    }


def _gain(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    energy = np.dot(x, x)
    return np.dot(x, y) / energy if energy else 1.0


def _measure(name, run, tensors, b):
    sizes, within, gains, decoded = 0, True, [], []
    for x in tensors:
        size, y, _, _ = run(x)
        sizes += size
        decoded.append(y)
        if b is not None:
            within &= bool(np.all(np.abs(x.astype(np.float64) - y) <= 2.0 ** -b))
        if x.size >= MIN_GAIN_VALUES:
            gains.append(_gain(x, y))
    original = sum(x.nbytes for x in tensors)
    return {"codec": name, "b": b if b is not None else "-", "ratio": round(original / sizes, 2),
            "within": "-" if b is None else "yes" if within else "NO",
            "gain": round(_gain(np.concatenate(tensors), np.concatenate(decoded)), 4),
            "gain_min": round(min(gains), 4), "gain_max": round(max(gains), 4)}


def _speed(tensors):
    """Million values per second (compress, decompress) of each codec at ``2**-10``, the
    compiled ones compiled first, the fastest of ``SPEED_ROUNDS`` rounds."""
    tiled = np.resize(np.concatenate(tensors), SPEED_VALUES).astype(np.float32)
    out = {}
    for name, run in _codecs(10).items():
        run(tiled[:100])
        rounds = [run(tiled)[2:] for _ in range(SPEED_ROUNDS)]
        seconds, back = (min(r[i] for r in rounds) for i in range(2))
        out[name] = (round(tiled.size / seconds / 1e6, 1), round(tiled.size / back / 1e6, 1))
    return out


def _gateware():
    """Million values per second of each codec's NIC engines: lanes x Fmax of the
    fastest baseline entry of each (``-`` without one)."""
    entries = load_baseline()["entries"]

    def rate(engine):
        rates = [e["parameters"]["lanes"] * e["fmax_mhz"] for e in entries
                 if e["engine"] == engine and e.get("fmax_mhz")]
        return round(max(rates), 1) if rates else "-"
    return {codec: tuple(rate(engine) for engine in engines)
            for codec, engines in GATEWARE.items()}


def rows_of(network, out):
    print(f"training {network} on {NETWORKS[network]} ...", flush=True)
    dumps = _gradients(network)
    rows = []
    speed, gateware = _speed(dumps[max(dumps)]), _gateware()
    for step, tensors in dumps.items():
        for b in BOUNDS:
            measured = [_measure(name, run, tensors, b) for name, run in _codecs(b).items()]
            sz3 = next(r["ratio"] for r in measured if r["codec"] == "SZ3")
            for row in measured:
                gate_in, gate_out = gateware.get(row["codec"], ("-", "-"))
                rows.append({"network": network, "step": step, **row,
                             "vs_SZ3": round(row["ratio"] / sz3, 2),
                             "Mval/s in": speed[row["codec"]][0],
                             "Mval/s out": speed[row["codec"]][1],
                             "gateware in": gate_in, "gateware out": gate_out})
        row = _measure("terngrad", _run(lambda x: terngrad.compress(x, 1),
                                        terngrad.decompress), tensors, None)
        rows.append({"network": network, "step": step, **row, "vs_SZ3": "-",
                     "Mval/s in": "-", "Mval/s out": "-", "gateware in": "-",
                     "gateware out": "-"})
    return rows


def plot(plt, rows):
    figure, axes = plt.subplots(1, len(BOUNDS), figsize=(12, 4), sharey=True)
    for ax, b in zip(axes, BOUNDS):
        for codec in ("rice", "rice stochastic", "inceptionn", "ZFP"):
            points = [r["vs_SZ3"] for r in rows if r["b"] == b and r["codec"] == codec]
            ax.plot(range(len(points)), points, "o-", label=codec)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_title(f"bound 2^-{b}")
        ax.set_xlabel("gradient dump (network, step)")
    axes[0].set_ylabel("ratio / SZ3's ratio")
    axes[0].legend()
    figure.tight_layout()
    return figure


if __name__ == "__main__":
    reproduce(__doc__, tuple(NETWORKS), "codec_comparison",
              "Gradient codecs: ratio, bound, effective gain, speed", rows_of, plot)
