"""Term-quantization-aware training (docs/semantics.md section 3): in the forward pass
every array layer's weights are quantized and revealed (``alpha`` terms per group of ``g``
consecutive columns ``(c, ky, kx)``; a grouped convolution's over all input channels, as
the ONNX import makes it) and its input data quantized and truncated to ``beta`` terms,
exactly as ``codnn.golden.term_quant`` does; the backward pass takes the straight-through
gradient (as if nothing were rounded). The model keeps its float weights; the integer
path (``codnn infer --engine tq``) quantizes and reveals them again for the TQ array.

The grids are the integer network's once ``calibrate`` has run (``LayerScales`` of the
model's integer network on a calibration sample): a layer's input takes its static scale
(a signed input the codes -64..63 at 7 magnitude bits), its weights the scale the output
stage's shift allows (``codnn.model.quantize.weight_scale``: up to a factor 2 coarser
than the weights' own). Before, and for a layer the calibration does not name, the
weights take their max-abs scale and the data the batch's."""

import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils import parametrize

from codnn.golden.column_combining import collapse_groups, expand_groups, pack
from codnn.golden.term_quant import group, quantize, reveal, truncate, ungroup
from codnn.golden.tq_array import reveal_packed
from codnn.model.onnx_import import load_onnx
from codnn.model.quantize import layer_scales, weight_scale

from .arithmetic import straight_through
from .export import export_onnx
from .models import named_array_layers

__all__ = ["CALIBRATION", "attach", "calibrate", "imported", "revealed_weights", "truncated_data"]

#: Training inputs the grids are calibrated on (``codnn infer``'s default calibration).
CALIBRATION = 500

#: Accumulator width of the integer network (the bound of the output stage's shift).
_ACC_BITS = 32


def revealed_weights(w, tq, groups=1, scales=None, packing=None):
    """``w`` (a layer's weight tensor) quantized and revealed; a grouped convolution's
    (``groups``) over all input channels, as the arrays run it. ``scales``: the layer's
    ``LayerScales`` (the integer network's weight grid), or None (max-abs scale).
    ``packing``: the layer's column groups from column combining (its columns over all
    input channels), for the column-combined TQ array: each row's kept weights (at most
    one a group, as the pruning masks leave them) are revealed in groups of ``g``
    packed columns (``codnn.golden.tq_array.reveal_packed``); None: groups of ``g``
    columns, the TQ array's."""
    if groups != 1:
        full = expand_groups(w.detach().double().numpy(), groups)
        kept = revealed_weights(torch.from_numpy(full), tq, scales=scales,
                                packing=packing).numpy()
        return torch.from_numpy(collapse_groups(kept, groups)).to(w.dtype)
    matrix = w.detach().double().numpy().reshape(w.shape[0], -1)
    peak = float(np.abs(matrix).max())
    if peak == 0:
        return w.detach()
    top = (1 << tq.mag_bits) - 1
    scale = peak / top if scales is None else weight_scale(
        peak, scales.input, scales.output, top, _ACC_BITS)[0]
    q = quantize(matrix, scale, tq.mag_bits)
    if packing is None:
        kept = ungroup(reveal(group(q, tq.g), tq.alpha, tq.encoding, tq.mag_bits), q.shape[1])
    else:                       # packed with its groups, as the integer network packs it
        packed = pack(q, max(map(len, packing)), 0.0, groups=packing)
        kept = reveal_packed(packed, g=tq.g, budget=tq.alpha, encoding=tq.encoding,
                             mag_bits=tq.mag_bits).dense()
    return torch.from_numpy(kept * scale).reshape(w.shape).to(w.dtype)


def _truncation_table(tq):
    """Truncated magnitude of every magnitude ``0 .. 2**mag_bits - 1``."""
    magnitudes = np.arange(1 << tq.mag_bits)
    return torch.from_numpy(truncate(magnitudes, tq.beta, tq.encoding, tq.mag_bits))


def truncated_data(x, tq, table=None, scales=None):
    """``x`` quantized and each value truncated to its top ``beta`` terms. Without
    ``scales``: scale ``max|x| / (2**mag_bits - 1)``, golden's round half away from zero,
    saturating. With the layer's ``LayerScales``: its input scale, rounded half up, and
    clamped to the codes the integer network gives (0 .. 2**mag_bits - 1, or for a
    signed input -2**(mag_bits-1) .. 2**(mag_bits-1) - 1)."""
    table = _truncation_table(tq) if table is None else table
    x64 = x.detach().double()
    top = (1 << tq.mag_bits) - 1
    if scales is None:
        peak = float(x64.abs().max())
        if peak == 0:
            return x.detach()
        scale = peak / top
        magnitude = torch.clamp(torch.floor(x64.abs() / scale + 0.5), max=top)
        return (torch.sign(x64) * table[magnitude.long()] * scale).to(x.dtype)
    scale, half = scales.input, 1 << (tq.mag_bits - 1)
    low, high = (-half, half - 1) if scales.signed else (0, top)
    value = torch.clamp(torch.floor(x64 / scale + 0.5), low, high)
    return (torch.sign(value) * table[value.abs().long()] * scale).to(x.dtype)


class _Grids:
    """The grids an attached forward computes on (``{layer name: LayerScales}``, filled
    by ``calibrate``), and whether it is on (off while ``calibrate`` exports the plain
    model)."""

    def __init__(self):
        self.scales, self.on = {}, True


class _Reveal(torch.nn.Module):
    def __init__(self, tq, groups, grids, name, packing):
        super().__init__()
        self.tq, self.groups, self.grids, self.name = tq, groups, grids, name
        self.packing = packing

    def forward(self, w):
        if not self.grids.on:
            return w
        return straight_through(w, revealed_weights(w, self.tq, self.groups,
                                                    self.grids.scales.get(self.name),
                                                    self.packing))


def attach(model, tq, packing=None):
    """Make ``model``'s array layers compute with term quantization ``tq``
    (``codnn.golden.network.TermQuantization``), at max-abs and batch scales until
    ``calibrate`` gives them the integer network's; with ``packing`` (each array layer's
    column groups, from column combining), as the column-combined TQ array does. Return
    the hooks for ``arithmetic.detach``."""
    grids = _Grids()
    table = _truncation_table(tq)

    def truncate_input(name, x):
        if not grids.on:
            return x
        return straight_through(x, truncated_data(x, tq, table, grids.scales.get(name)))
    hooks = []
    layers = named_array_layers(model)
    for (name, layer), layer_packing in zip(layers, packing or [None] * len(layers)):
        parametrize.register_parametrization(
            layer, "weight", _Reveal(tq, getattr(layer, "groups", 1), grids, name,
                                     layer_packing))
        hooks.append(layer.register_forward_pre_hook(
            lambda _, args, name=name: (truncate_input(name, args[0]),)))
    return hooks


def _matrix(layer):
    """A layer's weights as the ONNX import holds them: ``N x C*k*k`` over all input
    channels."""
    w = layer.weight.detach().double().numpy()
    groups = getattr(layer, "groups", 1)
    full = expand_groups(w, groups) if groups != 1 else w
    return full.reshape(len(full), -1)


def imported(model, input_shape):
    """``model`` as ``codnn infer`` will see it: exported and imported
    (``codnn.model.graph.FloatNetwork``). Leaves ``model`` in the training mode it was in.

    Raises
    ------
    ValueError
        If the export does not import (the importer's one-line error).
    """
    training = model.training
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "model.onnx"
            export_onnx(model, path, input_shape)
            return load_onnx(path)
    finally:
        model.train(training)


def calibrate(model, tq, input_shape, calibration, clip="max"):
    """Give ``model``'s attached forward (``attach``) the integer network's grids: the
    plain model (its float weights) exported, imported and calibrated on ``calibration``
    (float inputs, ``B x input_shape``) with ``clip`` (``codnn.model.quantize``'s
    ``CALIBRATIONS``) as ``codnn infer --engine tq --calibrate CLIP`` will calibrate it.

    Raises
    ------
    ValueError
        If the model does not import (its error), or an array layer is not found in the
        imported network.
    """
    layers = named_array_layers(model)
    grids = layers[0][1].parametrizations.weight[0].grids
    grids.on = False
    try:
        network = imported(model, input_shape)
        scales = layer_scales(network, np.asarray(calibration, dtype=np.float64), tq=tq,
                              clip=clip)
        candidates = [(step.name, np.asarray(step.weights, dtype=np.float64))
                      for step in network.steps if step.name in scales]
        found = {}
        for name, layer in layers:
            mine = _matrix(layer)
            match = [step for step, w in candidates if w.shape == mine.shape
                     and np.allclose(w, mine, rtol=1e-6, atol=1e-9)]
            if not match:
                raise ValueError(f"layer {name!r} is not in the network its export "
                                 f"imports as")
            found[name] = scales[match[0]]
    finally:
        grids.on = True
    grids.scales.update(found)
