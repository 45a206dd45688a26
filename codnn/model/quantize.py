"""Quantize a float network to the integer network the column-combined array computes
(``codnn.golden.network.IntegerNetwork``), with scales chosen on a calibration sample.

Activations are unsigned ``out_bits``-bit integers, one scale per tensor: the largest value
the calibration sample reaches (for ``Clip(0, m)``: at most ``m``) maps to the top code.
A layer followed by an activation requantizes in the array's output stage, whose only
knob is a right shift: its weights get the scale ``s_w = s_y / (s_x * 2**shift)`` with the
largest ``shift`` that keeps every weight within ``weight_bits`` (so ``s_w`` is at most a
factor 2 from the weights' own max-abs scale), and its bias ``round(b / (s_x * s_w))`` plus
``2**(shift-1)`` so that the floor shift rounds half up. A layer without an activation
(the logits, or a branch of a residual add) keeps its accumulators at scale ``s_x * s_w``
with ``s_w`` the max-abs scale. One scale per layer: the single output-stage shift allows
no per-channel weight scale. Each layer's integer weights are then packed (column
combining, ``alpha`` and ``gamma``), with the groups the model carries from its training
(``codnn.model.onnx_import.GROUPS_KEY``) when they fit ``alpha``.
"""

import math

import numpy as np

from codnn.golden.column_combining import pack
from codnn.golden.network import FRACTION, Add, ArrayLayer, Concat, IntegerNetwork

from .graph import Concatenation, Layer, Residual

__all__ = ["quantize_network"]


def _top_scale(values, limit=np.inf):
    peak = float(min(np.max(values), limit)) if np.size(values) else 0.0
    return peak if peak > 0 else 1.0


def _weights(layer, s_x, s_y, weight_bits, acc_bits):
    """Integer weights, bias and shift of ``layer``; its output scale."""
    top = (1 << (weight_bits - 1)) - 1
    peak = float(np.abs(layer.weights).max()) or 1.0
    if s_y is None:                                  # raw accumulators
        s_w, shift = peak / top, None
        s_out = s_x * s_w
    else:
        shift = math.floor(math.log2(top * s_y / (s_x * peak)))
        shift = min(max(shift, 0), acc_bits - 2)
        s_w = max(s_y / (s_x * 2 ** shift), peak / top)
        s_out = s_x * s_w * 2 ** shift
    q = np.clip(np.floor(layer.weights / s_w + 0.5), -top, top).astype(np.int64)
    bias = np.floor(layer.bias / (s_x * s_w) + 0.5).astype(np.int64)
    if shift:
        bias += 1 << (shift - 1)
    return q, bias, shift, s_out


def _pack(layer, q, alpha, gamma):
    """Pack with the groups the model was trained with when they fit ``alpha``."""
    fixed = layer.groups if layer.groups and max(map(len, layer.groups)) <= alpha else None
    return pack(q, alpha, gamma, groups=fixed)


def quantize_network(network, calibration, *, alpha, gamma, weight_bits=8, out_bits=8,
                     acc_bits=32, tq=None, progress=None):
    """The integer network of ``network`` for an array with ``alpha`` streams per column,
    or with ``tq`` (``golden.network.TermQuantization``) for the TQ array: weights and
    activations then take its sign-magnitude width (``mag_bits``: 7 gives -127..127 and
    0..127), and layers are not packed.

    ``calibration``: float inputs (``B x input_shape``), non-negative. ``progress(name)``
    is called as each layer is packed.

    Raises
    ------
    ValueError
        If the calibration inputs are negative or not finite.
    """
    if tq is not None:
        weight_bits, out_bits, alpha, gamma = tq.mag_bits + 1, tq.mag_bits, 1, 0.0
    calibration = np.asarray(calibration, dtype=np.float64)
    if not np.all(np.isfinite(calibration)):
        raise ValueError("calibration inputs hold NaN or infinite values")
    if calibration.min() < 0:
        raise ValueError("the arrays take unsigned activations: the model's inputs must be "
                         f"non-negative (the calibration sample reaches {calibration.min():g})")
    levels = (1 << out_bits) - 1
    floats = network.run(calibration, keep=True)
    scale = {network.input: _top_scale(calibration) / levels}
    steps, signed = [], set()
    for step in network.steps:
        reads = (step.source, *getattr(step, "others", ()))
        if not isinstance(step, Residual) and signed.intersection(reads):
            raise ValueError(f"{step.name!r} reads the signed output of a layer with no "
                             f"activation; the arrays take unsigned activations")
        if isinstance(step, Layer):
            if step.activation is None:
                signed.add(step.output)
            s_x = scale[step.source]
            s_y = None if step.activation is None else \
                _top_scale(floats[step.output], step.activation) / levels
            q, bias, shift, scale[step.output] = _weights(step, s_x, s_y, weight_bits,
                                                          acc_bits)
            if progress:
                progress(step.name)
            packed = _pack(step, q, alpha, gamma) if tq is None else pack(q, 1, 0.0)
            steps.append(ArrayLayer(step.name, step.source, step.output, packed, bias, shift,
                                    step.kernel, step.stride, step.padding, tq))
        elif isinstance(step, Residual):
            s_y = _top_scale(floats[step.output]) / levels
            ma, mb = (int(round(scale[name] / s_y * (1 << FRACTION)))
                      for name in (step.source, step.other))
            scale[step.output] = s_y
            steps.append(Add(step.name, step.source, step.other, step.output, ma, mb))
        elif isinstance(step, Concatenation):
            s_y = _top_scale(floats[step.output]) / levels
            scale[step.output] = s_y
            steps.append(Concat(step.name, step.source, step.others, step.output, tuple(
                int(round(scale[name] / s_y * (1 << FRACTION))) for name in reads)))
        else:
            scale[step.output] = scale[step.source]
            steps.append(step)
    return IntegerNetwork(tuple(steps), network.input, network.output, network.input_shape,
                          scale[network.input], scale[network.output], acc_bits, out_bits)
