"""A whole network from a model file to a report: import, quantize and pack for an array,
schedule, accuracy of the float and the integer network on a data set, cycles and images
per second, optionally a sample of images through the RTL, and plots.

The golden integer network runs the whole test split (thousands of images per second);
the RTL runs ``rtl_images`` of them, every array result checked against golden.
"""

import time
from pathlib import Path

import numpy as np

from codnn.golden.systolic import MAX_CELLS
from codnn.golden.term_quant import unfillable_budget

from .datasets import DATASETS, load_dataset
from .onnx_import import ModelError, load_onnx
from .quantize import quantize_network
from .schedule import schedule_network

__all__ = ["InputError", "load_inputs", "infer", "write_plots"]


class InputError(ValueError):
    """Inputs that do not fit the model: wrong shape or dtype, NaN, a missing file."""


def load_inputs(spec, network, calibration):
    """``(calibration_x, test_x, test_y, description)`` for ``spec``: a data set name
    (``mnist``, ``digits``: its train split calibrates, its test split is evaluated; each
    image reshaped, its values in order, for a model of as many flat inputs) or an
    ``.npz`` with float inputs ``x`` (``B x input_shape``) and optional labels ``y`` (the
    first ``calibration`` inputs calibrate)."""
    if spec in DATASETS:
        data = load_dataset(spec)
        x_cal, x, y = data.train_x[:calibration], data.test_x, data.test_y
        described = (f"{spec}: {len(y)} test images, calibration on {len(x_cal)} train "
                     f"images")
        shape = tuple(network.input_shape)
        if x.shape[1:] != shape and np.prod(x.shape[1:]) == np.prod(shape):
            # A model of flat inputs (an MLP): the images' values in their order.
            x_cal, x = x_cal.reshape(-1, *shape), x.reshape(-1, *shape)
            described += f", each as {shape}"
    else:
        if not str(spec).endswith(".npz"):
            raise InputError(f"--data must be one of {', '.join(DATASETS)} or an .npz file "
                             f"with arrays x (and y), not {spec!r}")
        try:
            with np.load(spec, allow_pickle=False) as arrays:
                if "x" not in arrays:
                    raise InputError(f"{spec} has no array 'x' (it has "
                                     f"{', '.join(arrays.files) or 'none'})")
                x = arrays["x"]
                y = arrays["y"] if "y" in arrays else None
        except (OSError, ValueError) as error:
            if isinstance(error, InputError):
                raise
            raise InputError(f"{spec} is not a readable .npz file ({error})") from None
        x_cal = x[:calibration]
        described = f"{spec}: {len(x)} inputs, calibration on the first {len(x_cal)}"
    if not np.issubdtype(np.asarray(x).dtype, np.floating) and \
            not np.issubdtype(np.asarray(x).dtype, np.integer):
        raise InputError(f"inputs must be numbers, not {np.asarray(x).dtype}")
    if np.asarray(x).shape[1:] != tuple(network.input_shape):
        raise InputError(f"inputs have shape {np.asarray(x).shape[1:]} per item; the model "
                         f"takes {tuple(network.input_shape)}")
    if not np.all(np.isfinite(x)):
        raise InputError("inputs hold NaN or infinite values")
    if y is not None and (np.asarray(y).shape != (len(x),)
                          or not np.issubdtype(np.asarray(y).dtype, np.integer)):
        raise InputError(f"labels y must be {len(x)} integers, not {np.asarray(y).dtype} "
                         f"{np.asarray(y).shape}")
    return np.asarray(x_cal, float), np.asarray(x, float), y, described


def _accuracy(scores, labels):
    return None if labels is None else float((scores.argmax(axis=1) == labels).mean())


def infer(model, data, *, rows, cols, alpha, gamma=0.5, mac="parallel", calibration=500,
          fmax_mhz=None, rtl_images=0, simulator="verilator", build_root=None,
          device_images=0, device=None, tq=None, per_channel=False, requant="shift",
          clip="max", asymmetric=False, progress=None):
    """Run ``model`` (an ONNX file) on ``data``; return the report (a dict) and the layers'
    schedules. ``device(network, q, progress)``, when given, runs ``device_images`` inputs
    on a board (``codnn.board_flows.run_network_on_device``). With ``tq``
    (``codnn.golden.network.TermQuantization``) the network runs on the TQ array instead
    (``alpha`` 1), or with ``alpha`` above 1 on the column-combined TQ array (golden and
    its schedule only: no ``rtl_images``, no device);
    ``per_channel``: a weight scale per output channel; ``requant``, ``clip``,
    ``asymmetric``: the output stage's requantization, the activations' calibration and
    their signed codes' zero points (``codnn.model.quantize``;
    with a multiplier stage ``rtl_images`` run on arrays whose output stage multiplies,
    and a device's accumulators go through golden's).

    Raises
    ------
    ModelError, InputError
        For a model or inputs codnn cannot take.
    """
    say = progress or (lambda message: None)
    if rows * cols > MAX_CELLS:
        raise InputError(f"an array of {rows} x {cols} cells is larger than codnn models "
                         f"(at most {MAX_CELLS} cells, e.g. 128 x 128)")
    if not str(model).endswith(".onnx"):
        raise ModelError(f"{model}: codnn infer reads ONNX models (.onnx)")
    if tq is not None and alpha > 1 and (rtl_images or (device_images and device)):
        raise InputError("the column-combined TQ array has no gateware yet: run it without "
                         "--rtl and a device, or on the TQ array (alpha 1)")
    if tq is not None:
        unfillable = unfillable_budget(tq.g, tq.alpha, tq.encoding, tq.mag_bits)
        if unfillable:
            raise InputError(f"{unfillable}: the TQ array would spend cycles on slots no "
                             f"data can fill")
    network = load_onnx(model)
    x_cal, x, y, described = load_inputs(data, network, calibration)
    packing = f"and packing it (alpha {alpha}, gamma {gamma})"
    say(f"quantizing {model} " + (packing if tq is None else f"for the TQ array ({tq})"
                                  if alpha == 1 else f"{packing} for TQ cells ({tq})"))
    try:
        integer = quantize_network(network, x_cal, alpha=alpha, gamma=gamma, tq=tq,
                                   per_channel=per_channel, requant=requant, clip=clip,
                                   asymmetric=asymmetric)
    except ValueError as error:
        raise ModelError(f"{model}: {error}") from None
    for layer in integer.array_layers:
        if layer.packed.rows == 0 or layer.packed.columns == 0:
            raise ModelError(f"{model}: layer {layer.name!r} is empty")
    say(f"float and integer inference on {len(x)} inputs")
    float_scores = network.run(x)
    q = integer.quantize_input(x)
    start = time.perf_counter()
    int_scores = integer.run(q)
    seconds = time.perf_counter() - start
    layers, host = schedule_network(integer, rows=rows, cols=cols, alpha=alpha, mac=mac)
    cycles = sum(layer.cycles for layer in layers)
    dense_cycles = sum(layer.dense_cycles for layer in layers)
    tiles = sum(layer.tiles for layer in layers)
    dense_tiles = sum(layer.dense_tiles for layer in layers)
    report = {
        "model": str(model), "data": described,
        "array": {"rows": rows, "cols": cols, "alpha": alpha, "gamma": gamma, "mac": mac}
        if tq is None else {"engine": "tq" if alpha == 1 else "cc-tq", "rows": rows,
                            "cols": cols, **({"alpha": alpha, "gamma": gamma} if alpha > 1
                                             else {}),
                            "g": tq.g, "budget": tq.alpha, "beta": tq.beta,
                            "encoding": tq.encoding, "mag_bits": tq.mag_bits},
        "weight_scales": "per channel" if per_channel else "per layer",
        "requantization": requant, "activation_scales": clip,
        "signed_activations": "asymmetric" if asymmetric else "offset binary",
        "float_accuracy": _accuracy(float_scores, y),
        "integer_accuracy": _accuracy(int_scores, y),
        "integer_agrees_with_float": float((int_scores.argmax(1)
                                            == float_scores.argmax(1)).mean()),
        "golden_images_per_second": round(len(x) / seconds, 1),
        "layers": [_layer_row(layer) for layer in layers],
        "host_steps": [f"{name} ({kind})" for name, kind in host],
        "tiles": tiles, "dense_tiles": dense_tiles, "tile_ratio": round(tiles / dense_tiles, 4),
        "cycles_per_image": cycles, "dense_cycles_per_image": dense_cycles,
        "cycle_ratio": round(cycles / dense_cycles, 4),
        "fmax_mhz": fmax_mhz,
        "images_per_second": None if fmax_mhz is None else round(fmax_mhz * 1e6 / cycles, 1),
        "rtl": None,
    }
    if rtl_images:
        report["rtl"] = _on_rtl(integer, q[:rtl_images], rows=rows, cols=cols, alpha=alpha,
                                mac=mac, simulator=simulator, build_root=build_root, say=say)
    if device_images and device is not None:
        sample = q[:device_images]
        say(f"{len(sample)} inputs on the device, layer by layer")
        outputs, runs = device(integer, sample, lambda done, total, name: say(
            f"  device layer {done}/{total} ({name}): every accumulator equals golden"))
        report["device"] = {"images": len(sample), "result": "pass",
                            "accuracy": _accuracy(outputs, None if y is None
                                                  else y[:device_images]),
                            "layers": runs}
    return report, layers


def _on_rtl(integer, sample, *, rows, cols, alpha, mac, simulator, build_root, say):
    """``sample`` through the arrays' RTL layer by layer (``codnn.model.rtl``): the
    report's ``rtl`` entry, each layer's cycles beside its model's and its schedule's."""
    from .rtl import run_network_on_rtl
    say(f"{len(sample)} inputs through the RTL ({simulator}), layer by layer")
    runs = run_network_on_rtl(
        integer, sample, rows=rows, cols=cols, alpha=alpha, mac=mac, simulator=simulator,
        build_root=build_root,
        progress=lambda done, total, name: say(f"  RTL layer {done}/{total} ({name}): "
                                               f"every result equals golden"))
    scheduled, _ = schedule_network(integer, rows=rows, cols=cols, alpha=alpha, mac=mac,
                                    batch=len(sample))
    for run, layer in zip(runs, scheduled):
        run["scheduled_cycles"] = layer.cycles
    return {"images": len(sample), "simulator": simulator, "result": "pass",
            "cycles_equal_model": all(r["cycles"] == r["model_cycles"]
                                      == r["scheduled_cycles"] for r in runs),
            "layers": runs}


def _layer_row(layer):
    return {"layer": layer.name, "kind": layer.kind,
            "shape": f"{layer.filters}x{layer.columns}", "groups": layer.groups,
            "vectors": layer.vectors, "tiles": layer.tiles, "dense_tiles": layer.dense_tiles,
            "blocks": f"{layer.row_blocks}x{layer.col_blocks}",
            "cycles": layer.cycles, "dense_cycles": layer.dense_cycles,
            "utilization": round(layer.utilization, 4),
            "dense_utilization": round(layer.dense_utilization, 4),
            "macs_per_cycle": round(layer.macs_per_cycle, 2),
            "weight_bytes": layer.weight_bytes, "data_bytes": layer.data_bytes,
            "psum_bytes": layer.psum_bytes,
            **{f"{part}_cycles": n for part, n in layer.spent.items()}}


def write_plots(layers, folder, title):
    """Two PNGs in ``folder``: per-layer cycles and utilization, packed vs dense; and each
    layer's array-column fill, sorted. Returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = [layer.name.strip("/") for layer in layers]
    at = np.arange(len(layers))
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    top.bar(at - 0.2, [layer.dense_cycles for layer in layers], 0.4, label="dense array")
    top.bar(at + 0.2, [layer.cycles for layer in layers], 0.4, label="column-combined")
    top.set_ylabel("cycles per image")
    top.legend()
    top.set_title(title)
    bottom.bar(at - 0.2, [layer.dense_utilization for layer in layers], 0.4)
    bottom.bar(at + 0.2, [layer.utilization for layer in layers], 0.4)
    bottom.set_ylabel("utilization")
    bottom.set_xticks(at, names, rotation=20)
    figure.tight_layout()
    cycles_png = folder / "layers.png"
    figure.savefig(cycles_png, dpi=100)
    plt.close(figure)
    figure, axes = plt.subplots(figsize=(8, 4))
    for layer, name in zip(layers, names):
        fill = sorted(layer.column_fill, reverse=True)
        axes.plot(np.linspace(0, 1, len(fill)), fill, label=f"{name} ({len(fill)} columns)")
    axes.set_xlabel("array columns of the layer, fullest first (fraction)")
    axes.set_ylabel("filled cells / rows")
    axes.set_title("column-combined occupancy per layer")
    axes.legend(fontsize="small")
    figure.tight_layout()
    fill_png = folder / "occupancy.png"
    figure.savefig(fill_png, dpi=100)
    plt.close(figure)
    return [str(cycles_png), str(fill_png)]
