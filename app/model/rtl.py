"""Run an integer network's array layers on the generated array's RTL (cocotb and
Verilator or Icarus) and hold every result against golden.

Each array layer is one simulation of ``codnn.hw.systolic.ColumnCombinedArray`` or, for a
term-quantized network, ``codnn.hw.tq.TermQuantArray`` (the same compiled model for every
layer): its tiles' weights on the weight stream, the layer's input vectors for the
sampled images (from the golden network's run, which the previous layer's RTL results
equalled) on the data stream, the bias as the first partial sums.
The testbench (``sim/tb_systolic.py``) checks every result beat (accumulators and the
output stage) against ``codnn.golden.systolic.run_layer`` and, with no idle cycles or
backpressure, the cycles against ``codnn.golden.systolic.cycle_model``. Before a layer is
simulated, ``run_layer``'s accumulators are checked equal to the network's own
(``codnn.golden.network.ArrayLayer.accumulate``), so the RTL is held to the network's numbers.
"""

from pathlib import Path

import numpy as np

from codnn.golden.systolic import run_layer
from codnn.golden.tq_array import run_tq_layer

__all__ = ["RtlMismatch", "run_network_on_rtl"]


class RtlMismatch(AssertionError):
    """A layer's results on the RTL, or golden's tile-by-tile run of it, differ from the
    network's."""


def _array(network, tq, *, rows, cols, alpha, mac, requant):
    """The array component every layer runs on, and its top name (``systolic`` or
    ``tq_array``, which also names its testbench)."""
    if tq is None:
        from codnn.hw.systolic import ColumnCombinedArray
        return ColumnCombinedArray(rows=rows, cols=cols, alpha=alpha, mac=mac, weight_bits=8,
                                   data_bits=network.out_bits, acc_bits=network.acc_bits,
                                   out_bits=network.out_bits, requant=requant), "systolic"
    from codnn.hw.tq import TermQuantArray
    return TermQuantArray(rows=rows, cols=cols, g=tq.g, alpha=tq.alpha, beta=tq.beta,
                          mag_bits=tq.mag_bits, encoding=tq.encoding,
                          acc_bits=network.acc_bits, out_bits=network.out_bits,
                          requant=requant), "tq_array"


def _setting(value, default):
    """The testbench's ``shift`` or ``multiplier``: one integer (``default`` for a layer
    without one), or a list of one per output channel."""
    if value is None or np.ndim(value) == 0:
        return int(default if value is None else value)
    return [int(v) for v in value]


def run_network_on_rtl(network, q, *, rows, cols, alpha, mac="parallel",
                       simulator="verilator", build_root=None, seed=1, progress=None):
    """Run the array layers of ``network`` for integer inputs ``q`` on the RTL.

    Returns one dict per array layer: ``name``, ``vectors``, ``cycles`` (measured, first
    weight beat to last result) and ``model_cycles`` (the cycle model's).

    Raises
    ------
    RtlMismatch
        If golden's tiled run differs from the network's accumulators, or a result or the
        cycle count differs on the RTL (the simulation's failure report).
    """
    from codnn.sim.runner import SimulationFailure, default_build_root, save_workload, simulate

    build_root = Path(build_root or default_build_root())
    tq = network.array_layers[0].tq
    # Requantized by multipliers: an array whose output stage multiplies (a layer without
    # one takes 1, the shift alone).
    requant = network.requant
    array, top = _array(network, tq, rows=rows, cols=cols, alpha=alpha, mac=mac,
                        requant=requant)
    tensors = network.run(q, keep=True)
    results = []
    for k, layer in enumerate(network.array_layers):
        X, _ = layer.columns(tensors[layer.source])
        if tq is None:
            _, acc = run_layer(layer.packed, X, rows=rows, cols=cols,
                               acc_bits=network.acc_bits, bias=layer.bias, alpha=alpha)
        else:
            _, acc = run_tq_layer(layer.packed.dense(), X, g=tq.g, alpha=tq.alpha,
                                  beta=tq.beta, rows=rows, cols=cols,
                                  acc_bits=network.acc_bits, bias=layer.bias,
                                  encoding=tq.encoding, mag_bits=tq.mag_bits)
        if not np.array_equal(acc, layer.accumulate(X, network.acc_bits)):
            raise RtlMismatch(f"layer {layer.name}: golden's tiled run differs from the "
                              f"network's accumulators")
        config = {"rows": rows, "cols": cols, "acc_bits": network.acc_bits,
                  "out_bits": network.out_bits, "shift": _setting(layer.shift, 0),
                  "requant": requant, "multiplier": _setting(layer.multiplier, 1),
                  "inputs": save_workload(build_root, X.astype(np.int64)),
                  "bias": save_workload(build_root, layer.bias.astype(np.int64)),
                  "vectors": int(X.shape[1]), "idle": 0.0, "backpressure": 0.0}
        if tq is None:
            config.update(alpha=alpha, weight_bits=8, data_bits=network.out_bits,
                          data_signed=False, mac=mac,
                          packed=save_workload(build_root, layer.packed.to_arrays()))
        else:
            config.update(g=tq.g, alpha=tq.alpha, beta=tq.beta, mag_bits=tq.mag_bits,
                          encoding=tq.encoding,
                          weights=save_workload(build_root, layer.packed.dense()))
        try:
            report = simulate(array, top=top, testbench=f"codnn.sim.tb_{top}",
                              config=config, simulator=simulator, seed=seed,
                              build_root=build_root).report
        except SimulationFailure as error:
            raise RtlMismatch(f"layer {layer.name}: {error}") from None
        results.append({"name": layer.name, "vectors": int(X.shape[1]),
                        "cycles": report["cycles"],
                        "model_cycles": report["model_cycles_without_stalls"]})
        if progress:
            progress(k + 1, len(network.array_layers), layer.name)
    return results
