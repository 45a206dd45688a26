"""Quantize a float network to the integer network the column-combined array computes
(``codnn.golden.network.IntegerNetwork``), with scales chosen on a calibration sample.

Activations are unsigned ``out_bits``-bit integers, one scale per tensor: the largest value
the calibration sample reaches (for ``Clip(0, m)``: at most ``m``) maps to the top code,
or with ``clip`` its 99.99th percentile or the clip of least squared error
(``clip_peak``).
A layer followed by an activation requantizes in the array's output stage, whose only
knob is a right shift: its weights get the scale ``s_w = s_y / (s_x * 2**shift)`` with the
largest ``shift`` that keeps every weight within ``weight_bits`` (so ``s_w`` is at most a
factor 2 from the weights' own max-abs scale), and its bias ``round(b / (s_x * s_w))`` plus
``2**(shift-1)`` so that the floor shift rounds half up. A layer without an activation
(the logits, or a branch of a residual add) keeps its accumulators at scale ``s_x * s_w``
with ``s_w`` the max-abs scale; one whose output another layer reads gives signed values
in offset binary (``quantize_network``). With ``per_channel``, a layer with an activation
takes a shift per output channel (the arrays' output stage has one per row) and so a
weight scale per channel, ``s_w[n] = s_y / (s_x * 2**shift[n])``: every channel's weights
use most of ``weight_bits`` however small they are next to the layer's largest. Each
layer's integer weights are then packed (column combining, ``alpha`` and ``gamma``), with
the groups the model carries from its training (``codnn.model.onnx_import.GROUPS_KEY``)
when they fit ``alpha``. With ``requant="multiplier"`` the output stage multiplies before
it shifts: weights keep their own max-abs scale and the stage takes the ``fixed_point``
multiplier and shift of the rest. With ``asymmetric``, a signed tensor only layers read
takes a zero point of its own (``asymmetric_grid``).
"""

import math
from dataclasses import dataclass

import numpy as np

from codnn.golden.column_combining import pack, padding_sides
from codnn.golden.network import FRACTION, Add, ArrayLayer, Concat, IntegerNetwork, Pool
from codnn.golden.systolic import REQUANT_BITS

from .graph import Concatenation, Layer, Residual

__all__ = ["CALIBRATIONS", "REQUANTS", "LayerScales", "asymmetric_grid", "clip_peak",
           "fixed_point", "layer_scales", "quantize_network", "weight_scale"]

#: How an activation's scale is chosen from the calibration sample (``clip_peak``).
CALIBRATIONS = ("max", "percentile", "mse")
#: The output stage's requantization: a shift alone (what the arrays build), or a
#: fixed-point multiplier and a shift (``fixed_point``).
REQUANTS = ("shift", "multiplier")


@dataclass(frozen=True)
class LayerScales:
    """What fixes an array layer's integer grid: the scale of its input (``input``; a
    signed input, ``signed``, takes the codes -2**(bits-1) .. 2**(bits-1) - 1) and the
    output scale its activation wants (``output``; None for raw accumulators), from which
    ``weight_scale`` gives its weights' scale."""

    input: float
    output: float | None
    signed: bool


def _code_scale(values, codes, method="max", limit=np.inf):
    """The scale of one code of a tensor whose top code, ``codes``, stands for its
    ``clip_peak`` (at most ``limit``; 1 for a tensor of zeros)."""
    peak = float(min(clip_peak(values, method, codes), limit)) if np.size(values) else 0.0
    return (peak if peak > 0 else 1.0) / codes


def clip_peak(values, method, levels):
    """The largest value a tensor's ``levels`` codes keep, from its calibration
    ``values`` (non-negative: a magnitude): ``max``, their largest; ``percentile``, their
    99.99th percentile; ``mse``, of 64 clips from a tenth of the largest to the largest,
    the one whose codes (rounded, clipped) reproduce the values with the least squared
    error."""
    values = np.asarray(values, np.float64).reshape(-1)
    top = float(values.max())
    if method == "max" or top <= 0:
        return top
    if method == "percentile":
        return float(np.percentile(values, 99.99))
    sample = values if len(values) <= 200_000 else \
        np.random.default_rng(0).choice(values, 200_000, replace=False)
    clips = np.linspace(top / 10, top, 64)
    errors = [np.mean((np.minimum(np.round(sample / (c / levels)), levels) * (c / levels)
                       - sample) ** 2) for c in clips]
    return float(clips[int(np.argmin(errors))])


def fixed_point(factor, acc_bits):
    """``(multiplier, shift)``, one each or one per entry of ``factor``: ``multiplier /
    2**shift`` nearest ``factor`` with ``multiplier`` below ``2**REQUANT_BITS`` (its top
    bit set where the shift allows) and ``shift`` 0 .. ``acc_bits + REQUANT_BITS - 1``."""
    factor = np.asarray(factor, np.float64)
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(factor > 0, factor, 1.0)))
    shift = np.clip(REQUANT_BITS - 1 - exponent, 0, acc_bits + REQUANT_BITS - 1)
    multiplier = np.round(factor * np.exp2(shift))
    over = multiplier >= 1 << REQUANT_BITS              # rounded up to the next power
    shift = np.where(over & (shift > 0), shift - 1, shift)
    multiplier = np.clip(np.round(factor * np.exp2(shift)), 0, (1 << REQUANT_BITS) - 1)
    return multiplier.astype(np.int64), shift.astype(np.int64)


def _channel_weights(layer, s_x, s_y, top, acc_bits):
    """Integer weights, bias and a shift per output channel of ``layer``, all channels
    at the output scale ``s_y``: channel n takes the largest shift that keeps its weights
    within ``top`` (0..acc_bits-2; a channel of zeros takes the largest)."""
    w = np.asarray(layer.weights, dtype=np.float64)
    peak = np.abs(w.reshape(len(w), -1)).max(axis=1)
    with np.errstate(divide="ignore"):
        shift = np.floor(np.log2(top * s_y / (s_x * peak)))
    shift = np.clip(np.nan_to_num(shift, posinf=acc_bits), 0, acc_bits - 2).astype(np.int64)
    s_w = s_y / (s_x * np.exp2(shift))
    q = np.clip(np.floor(w / s_w.reshape((-1,) + (1,) * (w.ndim - 1)) + 0.5),
                -top, top).astype(np.int64)
    bias = np.floor(layer.bias / (s_x * s_w) + 0.5).astype(np.int64)
    bias += np.where(shift > 0, 1 << np.maximum(shift - 1, 0), 0)
    return q, bias, shift, s_y


def weight_scale(peak, s_x, s_y, top, acc_bits):
    """``(s_w, shift, s_out)`` of a layer with one weight scale: its largest weight
    magnitude ``peak``, input scale ``s_x``, the output scale ``s_y`` its activation
    wants (None: raw accumulators), ``top`` the largest weight code. The output stage
    shifts only, so ``s_w = s_y / (s_x * 2**shift)`` with the largest ``shift`` (0 to
    ``acc_bits - 2``) that keeps ``peak`` within ``top``: up to a factor 2 coarser than
    the weights' own ``peak / top``; ``s_out``, the output's scale, is ``s_y`` unless a
    bound of the shift or ``peak / top`` moves it."""
    peak = peak or 1.0
    if s_y is None:
        s_w = peak / top
        return s_w, None, s_x * s_w
    shift = math.floor(math.log2(top * s_y / (s_x * peak)))
    shift = min(max(shift, 0), acc_bits - 2)
    s_w = max(s_y / (s_x * 2 ** shift), peak / top)
    return s_w, shift, s_x * s_w * 2 ** shift


def _multiplier_weights(layer, s_x, s_y, top, acc_bits, per_channel):
    """Integer weights at their own max-abs scale (one, or one per output channel), the
    bias, and the output stage's ``fixed_point`` multiplier and shift that bring the
    accumulators to ``s_y``; the bias takes ``2**(shift-1) / multiplier``, rounded, so
    that the floor of the stage rounds half up (to within a part in ``multiplier``)."""
    w = np.asarray(layer.weights, dtype=np.float64)
    rows = np.abs(w.reshape(len(w), -1)).max(axis=1)
    peak = np.where(rows > 0, rows, 1.0) if per_channel else \
        np.full(len(w), float(rows.max()) or 1.0)
    s_w = peak / top
    q = np.clip(np.floor(w / s_w.reshape((-1,) + (1,) * (w.ndim - 1)) + 0.5),
                -top, top).astype(np.int64)
    bias = np.floor(layer.bias / (s_x * s_w) + 0.5).astype(np.int64)
    multiplier, shift = fixed_point(s_x * s_w / s_y, acc_bits)
    half_step = np.where(shift > 0, np.int64(1) << np.maximum(shift - 1, 0), 0)
    bias += _over_multiplier(half_step, multiplier)
    if not per_channel:
        multiplier, shift = int(multiplier[0]), int(shift[0])
    return q, bias, shift, s_y, multiplier


def _weights(layer, s_x, s_y, weight_bits, acc_bits, per_channel=False, requant="shift"):
    """Integer weights, bias, shift and multiplier (one, or one per output channel;
    multiplier None for the shift-only stage) of ``layer``; its output scale."""
    top = (1 << (weight_bits - 1)) - 1
    if requant == "multiplier" and s_y is not None:
        return _multiplier_weights(layer, s_x, s_y, top, acc_bits, per_channel)
    if per_channel and s_y is not None:
        return (*_channel_weights(layer, s_x, s_y, top, acc_bits), None)
    s_w, shift, s_out = weight_scale(float(np.abs(layer.weights).max()), s_x, s_y, top,
                                     acc_bits)
    q = np.clip(np.floor(layer.weights / s_w + 0.5), -top, top).astype(np.int64)
    bias = np.floor(layer.bias / (s_x * s_w) + 0.5).astype(np.int64)
    if shift:
        bias += 1 << (shift - 1)
    return q, bias, shift, s_out, None


def _pack(layer, q, alpha, gamma):
    """Pack with the groups the model was trained with when they fit ``alpha``."""
    fixed = layer.groups if layer.groups and max(map(len, layer.groups)) <= alpha else None
    return pack(q, alpha, gamma, groups=fixed)


def _readers(network):
    """The steps that read each tensor."""
    readers = {}
    for step in network.steps:
        for name in {step.source, getattr(step, "other", None), *getattr(step, "others", ())}:
            readers.setdefault(name, []).append(step)
    return readers


def _reaches_add(name, readers):
    """Whether a residual add reads tensor ``name``, directly or through pooling (which
    keeps its codes' zero point)."""
    return any(isinstance(r, Residual) or (isinstance(r, Pool)
                                           and _reaches_add(r.output, readers))
               for r in readers.get(name, ()))


def asymmetric_grid(values, levels, method="max"):
    """``(scale, zero point)`` of a signed tensor's codes ``0..levels`` over its own
    range (``--asymmetric``): its low end ``-clip_peak`` of its negative values'
    magnitudes, its high end ``clip_peak`` of its positive values (0 always inside),
    ``scale = (high - low) / levels`` and the zero point the code of the value 0,
    ``round(-low / scale)`` (a tensor of zeros: scale ``1 / levels``, zero point 0)."""
    values = np.asarray(values, np.float64).reshape(-1)
    low = clip_peak(np.maximum(-values, 0.0), method, levels) if values.size else 0.0
    high = clip_peak(np.maximum(values, 0.0), method, levels) if values.size else 0.0
    if low + high <= 0:
        return 1.0 / levels, 0
    scale = (low + high) / levels
    return scale, int(min(max(round(low / scale), 0), levels))


def _check_signed_reader(step):
    """Raise ``ValueError`` for a step that cannot read a signed (offset-binary) tensor:
    a concatenation, an average that counts its padding."""
    if isinstance(step, Concatenation):
        raise ValueError(f"{step.name!r}: a Concat of signed activations (no ReLU before "
                         f"it) is not supported")
    if isinstance(step, Pool) and step.kind == "avg" and step.count_pad \
            and padding_sides(step.padding) != ((0, 0), (0, 0)):
        raise ValueError(f"{step.name!r} averages signed activations (no ReLU before it) "
                         f"over padding it counts: not supported")


def quantize_network(network, calibration, *, alpha, gamma, weight_bits=8, out_bits=8,
                     acc_bits=32, tq=None, per_channel=False, requant="shift", clip="max",
                     asymmetric=False, progress=None):
    """The integer network of ``network`` for an array with ``alpha`` streams per column,
    or with ``tq`` (``codnn.golden.network.TermQuantization``) for the TQ array: weights and
    activations then take its sign-magnitude width (``mag_bits``: 7 gives -127..127 and
    0..127); ``alpha`` 1 is the TQ array itself (its groups of ``g`` are the layer's
    columns), more the column-combined TQ array (layers packed, then each group of ``g``
    packed columns revealed: semantics section 3). ``per_channel``: a weight scale (and output-stage
    shift) per output channel in every layer with an activation. ``requant``
    (``REQUANTS``): ``shift``, the output stage shifts only (each layer's weight scale
    chosen so that it may); ``multiplier``, weights at their own max-abs scale and the
    stage's ``fixed_point`` multiplier and shift (the arrays' and the network engine's
    output stages built with ``requant="multiplier"``). ``clip`` (``CALIBRATIONS``): how
    each activation's scale comes from its calibration values (``clip_peak``).
    ``asymmetric``: a signed tensor that layers read (directly or through pooling, but no
    residual add) takes codes over its own range with a zero point of its own
    (``asymmetric_grid``) instead of offset binary.

    ``calibration``: float inputs (``B x input_shape``), non-negative. ``progress(name)``
    is called as each layer is packed.

    Signed tensors (what a layer without an activation hands to another layer, an add
    without a ReLU) are offset-binary codes at the scale of their largest magnitude over
    ``2**(out_bits-1) - 1``: a layer reading one takes ``2**(out_bits-1) * sum(F[n])``
    off its bias (on the TQ array it reads the values, ``ArrayLayer.columns``) and pads
    with the code ``2**(out_bits-1)`` (the value 0), a layer writing
    one adds ``2**(out_bits-1) << shift[n]`` to its bias.

    Raises
    ------
    ValueError
        If the calibration inputs are negative or not finite, or a signed tensor goes
        where no step takes it (an average counting padding, a concatenation, the
        output).
    """
    return _quantize(network, calibration, alpha=alpha, gamma=gamma, weight_bits=weight_bits,
                     out_bits=out_bits, acc_bits=acc_bits, tq=tq, per_channel=per_channel,
                     requant=requant, clip=clip, asymmetric=asymmetric,
                     progress=progress)[0]


def layer_scales(network, calibration, *, tq=None, clip="max"):
    """``{layer name: LayerScales}`` of every array layer of ``network`` as
    ``quantize_network`` (with one weight scale per layer) calibrates it on
    ``calibration`` with ``clip``: what a training forward needs to compute on the grids
    the integer network will take (``codnn.train.term_quant``). Raises as
    ``quantize_network``."""
    return _quantize(network, calibration, alpha=1, gamma=0.0, tq=tq, weight_bits=8,
                     out_bits=8, acc_bits=32, per_channel=False, requant="shift",
                     clip=clip, asymmetric=False, progress=None)[1]


def _over_multiplier(value, multiplier):
    """``value / multiplier`` rounded half up (integers; a multiplier of 0 taken as 1):
    what a bias takes for the output stage to add ``value >> shift`` after it
    multiplies."""
    m = np.maximum(np.asarray(multiplier, np.int64), 1)
    return (2 * np.asarray(value, np.int64) + m) // (2 * m)


def _offset_term(zero, shift, multiplier):
    """What a layer's bias takes so that its output stage adds ``zero`` (the code of the
    value 0: ``2**(out_bits-1)`` in offset binary): ``zero << shift``, over the
    multiplier when there is one."""
    term = np.int64(zero) << np.asarray(shift, np.int64)
    return term if multiplier is None else _over_multiplier(term, multiplier)


def _quantize(network, calibration, *, alpha, gamma, weight_bits, out_bits, acc_bits, tq,
              per_channel, requant, clip, asymmetric, progress):
    """``(IntegerNetwork, {layer name: LayerScales})``."""
    if requant not in REQUANTS or clip not in CALIBRATIONS:
        raise ValueError(f"requant must be one of {', '.join(REQUANTS)} and clip one of "
                         f"{', '.join(CALIBRATIONS)}, not {requant!r} and {clip!r}")
    if tq is not None:
        weight_bits, out_bits = tq.mag_bits + 1, tq.mag_bits
    calibration = np.asarray(calibration, dtype=np.float64)
    if not np.all(np.isfinite(calibration)):
        raise ValueError("calibration inputs hold NaN or infinite values")
    if calibration.min() < 0:
        raise ValueError("the arrays take unsigned activations: the model's inputs must be "
                         f"non-negative (the calibration sample reaches {calibration.min():g})")
    levels = (1 << out_bits) - 1
    half = 1 << (out_bits - 1)
    floats = network.run(calibration, keep=True)
    scale = {network.input: _code_scale(calibration, levels)}

    def unsigned_scale(name, limit=np.inf):
        return _code_scale(floats[name], levels, clip, limit)

    def signed_scale(name):                 # offset binary: magnitudes to half - 1
        return _code_scale(np.abs(floats[name]), half - 1, clip)
    readers = _readers(network)
    steps, grids = [], {}
    raw, offset = set(), {}       # accumulators; signed codes: {tensor: its zero's code}
    for step in network.steps:
        reads = (step.source, *getattr(step, "others", ()))
        if raw.intersection(reads) and not isinstance(step, Residual):
            raise ValueError(f"{step.name!r} reads a layer's raw accumulators")
        if offset.keys() & set(reads):
            _check_signed_reader(step)
        if isinstance(step, Layer):
            s_x = scale[step.source]
            if step.activation is not None:
                s_y = unsigned_scale(step.output, step.activation)
            elif step.output == network.output or all(
                    isinstance(r, Residual) for r in readers[step.output]):
                s_y = None                     # accumulators: logits, or an add's operand
                raw.add(step.output)
            elif asymmetric and not _reaches_add(step.output, readers):
                s_y, offset[step.output] = asymmetric_grid(floats[step.output], levels,
                                                           clip)
            else:                              # signed values for a layer: offset binary
                s_y, offset[step.output] = signed_scale(step.output), half
            grids[step.name] = LayerScales(s_x, s_y, step.source in offset)
            q, bias, shift, scale[step.output], multiplier = _weights(
                step, s_x, s_y, weight_bits, acc_bits, per_channel, requant)
            if progress:
                progress(step.name)
            packed = _pack(step, q, alpha, gamma)
            zero_in = offset.get(step.source, 0)
            if tq is None:                     # the input's zero point, via the weights
                bias = bias - zero_in * packed.dense().sum(axis=1)
            if step.output in offset:          # the output's, before the output stage
                bias = bias + _offset_term(offset[step.output], shift, multiplier)
            steps.append(ArrayLayer(step.name, step.source, step.output, packed, bias, shift,
                                    step.kernel, step.stride, step.padding, tq, zero_in,
                                    multiplier))
        elif isinstance(step, Residual):
            s_y = unsigned_scale(step.output) if step.relu else signed_scale(step.output)
            if not step.relu:
                offset[step.output] = half
            ma, mb = (int(round(scale[name] / s_y * (1 << FRACTION)))
                      for name in (step.source, step.other))
            scale[step.output] = s_y
            steps.append(Add(step.name, step.source, step.other, step.output, ma, mb,
                             step.source in offset, step.other in offset, not step.relu))
        elif isinstance(step, Concatenation):
            s_y = unsigned_scale(step.output)
            scale[step.output] = s_y
            steps.append(Concat(step.name, step.source, step.others, step.output, tuple(
                int(round(scale[name] / s_y * (1 << FRACTION))) for name in reads)))
        else:
            scale[step.output] = scale[step.source]
            if step.source in offset:
                offset[step.output] = offset[step.source]
            steps.append(step)
    if network.output in offset:
        raise ValueError("the network ends in signed activations (an add without a ReLU); "
                         "end it with a layer")
    return IntegerNetwork(tuple(steps), network.input, network.output, network.input_shape,
                          scale[network.input], scale[network.output], acc_bits,
                          out_bits), grids
