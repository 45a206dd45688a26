"""Read an ONNX model (opset 13 and newer) into a ``codnn.model.graph.FloatNetwork``.

The operators it takes, and how, are ``OPERATORS`` (``codnn infer --list-ops`` prints
them). Anything else, or a shape the arrays cannot take, raises ``ModelError`` naming the
operator and the node.
"""

import numpy as np

from codnn.golden.column_combining import expand_groups, padding_value
from codnn.golden.network import Flatten, Pool

from .graph import Concatenation, FloatNetwork, Layer, Residual

__all__ = ["GROUPS_KEY", "OPERATORS", "ModelError", "load_onnx", "groups_metadata"]

#: The metadata key under which a model trained with column combining keeps its groups:
#: JSON ``{"alpha": a, "gamma": g, "layers": [groups of layer 0, ...]}``, one entry per
#: Conv/Gemm/MatMul layer in graph order.
GROUPS_KEY = "codnn.column_combining"

class ModelError(ValueError):
    """A model file that is not ONNX, or that holds what codnn cannot map to the arrays."""


def _attributes(node):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _where(node):
    return f"{node.op_type} node {node.name or '(unnamed)'!r}"


def _window(node, attrs, what, shape):
    """The square kernel, the stride and the padding of a Conv or pooling node, as
    ``padding_value`` writes it (each side its own: asymmetric pads, ``auto_pad`` SAME
    and ``ceil_mode``, which need the input's ``shape``, ``(C, H, W)``, or None when the
    model does not give it)."""
    kernel = [int(v) for v in attrs.get("kernel_shape", [])]
    strides = [int(v) for v in attrs.get("strides", [1] * len(kernel))]
    dilations = [int(v) for v in attrs.get("dilations", [1] * len(kernel))]
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if len(kernel) != 2 or kernel[0] != kernel[1]:
        raise ModelError(f"{_where(node)}: {what} needs a square 2-D kernel, not {kernel}")
    if len(set(strides)) != 1 or set(dilations) != {1}:
        raise ModelError(f"{_where(node)}: {what} needs equal strides and no dilation "
                         f"(strides {strides}, dilations {dilations})")
    k, s = kernel[0], strides[0]
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if (auto_pad.startswith("SAME") or ceil_mode) and shape is None:
        raise ModelError(f"{_where(node)}: auto_pad {auto_pad} or ceil_mode needs its "
                         f"input's shape, which the model does not give")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(auto_pad, k, s, shape[1:])
    elif auto_pad in ("NOTSET", "VALID"):
        pads = [int(v) for v in attrs.get("pads", [0] * 4)] if auto_pad == "NOTSET" \
            else [0] * 4
    else:
        raise ModelError(f"{_where(node)}: auto_pad {auto_pad!r} is not one of NOTSET, "
                         f"SAME_UPPER, SAME_LOWER, VALID")
    if len(pads) != 4 or min(pads) < 0:
        raise ModelError(f"{_where(node)}: {what} needs four pads (top, left, bottom, "
                         f"right) of at least 0, not {pads}")
    top, left, bottom, right = pads
    if ceil_mode:
        extra = [_ceil_extra(n, k, s, before, after)
                 for n, (before, after) in zip(shape[1:], ((top, bottom), (left, right)))]
        if any(extra) and attrs.get("count_include_pad", 0) and any(pads):
            raise ModelError(f"{_where(node)}: ceil_mode with count_include_pad and pads: "
                             f"the windows past the padding are not supported")
        bottom, right = bottom + extra[0], right + extra[1]
    return k, s, padding_value(top, left, bottom, right)


def _same_pads(auto_pad, k, s, sides):
    """ONNX's ``auto_pad`` SAME padding of a ``k``-wide window of stride ``s`` over a map
    of ``sides``: ``[top, left, bottom, right]``, the output ``ceil(n / s)`` along each
    axis; the odd row or column after the map (SAME_UPPER) or before it (SAME_LOWER)."""
    before, after = [], []
    for n in sides:
        total = max((-(-n // s) - 1) * s + k - n, 0)
        first = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        before.append(first)
        after.append(total - first)
    return before + after


def _ceil_extra(n, k, s, before, after):
    """The padding ``ceil_mode`` adds after a side of ``n``: enough for the last window,
    which may run past the padding when it starts inside the map or the padding before
    it (ONNX's and PyTorch's rule); never read."""
    out = -(-(n + before + after - k) // s) + 1
    if (out - 1) * s >= n + before:
        out -= 1
    return max((out - 1) * s + k - (n + before + after), 0)


class _Builder:
    def __init__(self, graph, nodes, outputs, shapes):
        from onnx import numpy_helper
        self.shapes = shapes        # tensor name -> shape after the batch, where known
        self.softmax = []           # Softmax nodes passed through (the model's last step)
        self.constants = {t.name: numpy_helper.to_array(t).astype(np.float64)
                          for t in graph.initializer}
        self.steps = []             # in order; a Layer may be replaced as ops fold into it
        self.producer = {}          # tensor name -> index of the step that writes it
        self.alias = {}
        self.nonnegative = set()
        self.consumers = {}
        for node in nodes:
            for name in node.input:
                self.consumers[name] = self.consumers.get(name, 0) + 1
        for out in outputs:
            self.consumers[out.name] = self.consumers.get(out.name, 0) + 1

    def shape(self, tensor):
        """``tensor``'s shape after the batch axis, or None when the model does not give
        it."""
        return self.shapes.get(tensor)

    def name(self, tensor):
        while tensor in self.alias:
            tensor = self.alias[tensor]
        return tensor

    def constant(self, node, index, what):
        if index >= len(node.input) or node.input[index] == "":
            return None
        name = node.input[index]
        if name not in self.constants:
            raise ModelError(f"{_where(node)}: its {what} must be a constant (an initializer)")
        return self.constants[name]

    def add(self, step):
        self.producer[step.output] = len(self.steps)
        self.steps.append(step)

    def layer_before(self, tensor, node, what):
        """The Layer that writes ``tensor`` (an input of ``node``), when only ``node``
        reads it and nothing follows it yet; else ``ModelError``."""
        index = self.producer.get(self.name(tensor))
        step = None if index is None else self.steps[index]
        if not isinstance(step, Layer) or self.consumers.get(tensor, 0) != 1:
            raise ModelError(f"{_where(node)}: {what} must directly follow a Conv, Gemm or "
                             f"MatMul whose output nothing else reads")
        return index, step

    def replace(self, index, step, node):
        """Replace step ``index`` with ``step`` that now writes ``node``'s output."""
        del self.producer[self.steps[index].output]
        step = type(step)(**{**step.__dict__, "output": node.output[0]})
        self.steps[index] = step
        self.producer[step.output] = index
        return step


def _conv(b, node, attrs):
    weights = b.constant(node, 1, "weight")
    if weights.ndim != 4:
        raise ModelError(f"{_where(node)}: needs 2-D convolution weights, not shape "
                         f"{weights.shape}")
    groups = attrs.get("group", 1)
    if groups != 1:
        if not isinstance(groups, int) or groups < 1 or len(weights) % groups:
            raise ModelError(f"{_where(node)}: group={groups} does not divide its "
                             f"{len(weights)} filters")
        weights = expand_groups(weights, groups)
    attrs.setdefault("kernel_shape", list(weights.shape[2:]))
    kernel, stride, padding = _window(node, attrs, "Conv", b.shape(node.input[0]))
    bias = b.constant(node, 2, "bias")
    b.add(Layer(node.name, b.name(node.input[0]), node.output[0],
                weights.reshape(weights.shape[0], -1),
                np.zeros(weights.shape[0]) if bias is None else bias, None, kernel, stride,
                padding))


def _gemm(b, node, attrs):
    if attrs.get("transA", 0):
        raise ModelError(f"{_where(node)}: transA is not supported (the input's batch "
                         f"axis would be its features)")
    weights = b.constant(node, 1, "weight")
    if weights is None or weights.ndim != 2:
        raise ModelError(f"{_where(node)}: needs a 2-D weight matrix")
    if node.op_type == "MatMul" or not attrs.get("transB", 0):
        weights = weights.T
    weights = weights * attrs.get("alpha", 1.0)
    bias = b.constant(node, 2, "bias") if node.op_type == "Gemm" else None
    b.add(Layer(node.name, b.name(node.input[0]), node.output[0], weights,
                _gemm_bias(node, bias, attrs.get("beta", 1.0), weights.shape[0]), None))


def _gemm_bias(node, bias, beta, outputs):
    """Gemm's ``C`` times ``beta`` as a bias per output: none, a scalar, ``(N,)``,
    ``(1, N)``, or ``(M, N)`` whose rows are equal; a bias that differs by batch row
    is no layer's bias (``ModelError``)."""
    if bias is None:
        return np.zeros(outputs)
    c = np.asarray(bias, np.float64) * beta
    if c.ndim == 2 and np.all(c == c[:1]):
        c = c[0]
    try:
        return np.broadcast_to(c, (outputs,)).copy()
    except ValueError:
        raise ModelError(f"{_where(node)}: a bias C of shape {tuple(np.shape(bias))}; a layer "
                         f"takes one per output: a scalar, ({outputs},) or (1, {outputs}), or "
                         f"rows that are all equal") from None


def _batch_norm(b, node, attrs):
    index, layer = b.layer_before(node.input[0], node, "BatchNormalization")
    scale, shift, mean, var = (b.constant(node, k, what) for k, what in
                               enumerate(("scale", "bias", "mean", "var"), start=1))
    gain = scale / np.sqrt(var + attrs.get("epsilon", 1e-5))
    folded = Layer(**{**layer.__dict__, "weights": layer.weights * gain[:, None],
                      "bias": (layer.bias - mean) * gain + shift})
    b.replace(index, folded, node)


def _activation(b, node, top):
    source = b.name(node.input[0])
    index = b.producer.get(source)
    step = None if index is None else b.steps[index]
    if isinstance(step, Layer) and step.activation is None and b.consumers[node.input[0]] == 1:
        b.replace(index, Layer(**{**step.__dict__, "activation": top}), node)
        b.nonnegative.add(node.output[0])
    elif source in b.nonnegative and top == np.inf:
        b.alias[node.output[0]] = source        # already >= 0: the ReLU does nothing
    else:
        raise ModelError(f"{_where(node)}: an activation must directly follow a Conv, Gemm "
                         f"or MatMul (the array's output stage) or a residual Add")


def _clip(b, node, attrs):
    low = b.constant(node, 1, "min") if len(node.input) > 1 else attrs.get("min")
    high = b.constant(node, 2, "max") if len(node.input) > 2 else attrs.get("max")
    low = 0.0 if low is None else float(np.asarray(low))
    high = np.inf if high is None else float(np.asarray(high))
    if low != 0 or not high > 0:
        raise ModelError(f"{_where(node)}: only Clip(0, max) (ReLU, ReLU6) maps to the "
                         f"output stage, not Clip({low}, {high})")
    _activation(b, node, high)


def _pool(b, node, attrs):
    source = b.name(node.input[0])
    if node.op_type == "GlobalAveragePool":
        step = Pool(node.name, source, node.output[0], "avg")
    else:
        kernel, stride, padding = _window(node, attrs, node.op_type,
                                          b.shape(node.input[0]))
        kind = "max" if node.op_type == "MaxPool" else "avg"
        step = Pool(node.name, source, node.output[0], kind, kernel, stride, padding,
                    bool(attrs.get("count_include_pad", 0)))
    if source in b.nonnegative:
        b.nonnegative.add(node.output[0])
    elif step.kind == "max" and step.padding:
        raise ModelError(f"{_where(node)}: a padded MaxPool needs a ReLU'd input (its "
                         f"padding must not win over negative values)")
    b.add(step)


def _spatial_axes(b, node, attrs, what):
    """The axes of a ReduceMean or Squeeze (an attribute before opset 18 / 13, an input
    after), which must be the two spatial axes of a 4-D tensor; a Squeeze without axes
    of a ``C x 1 x 1`` map (``C > 1``) squeezes them (the batch is kept)."""
    axes = attrs.get("axes")
    if axes is None:
        axes = b.constant(node, 1, "axes")
    shape = b.shape(node.input[0])
    if axes is None and what == "Squeeze" and shape is not None and len(shape) == 3 \
            and shape[0] > 1 and shape[1:] == (1, 1):
        axes = [2, 3]
    axes = sorted(int(a) % 4 for a in np.asarray(axes if axes is not None else []).reshape(-1))
    if axes != [2, 3]:
        raise ModelError(f"{_where(node)}: only a {what} over the two spatial axes (2, 3) of "
                         f"a map is supported, not axes {axes}")


def _reduce_mean(b, node, attrs):
    """ReduceMean over H and W, as PyTorch exports ``adaptive_avg_pool2d(x, 1)`` or
    ``x.mean((2, 3))``: the global average pool, then a flatten without keepdims."""
    _spatial_axes(b, node, attrs, "ReduceMean")
    if attrs.get("noop_with_empty_axes", 0):
        raise ModelError(f"{_where(node)}: noop_with_empty_axes is not supported")
    source = b.name(node.input[0])
    keep = attrs.get("keepdims", 1)
    pooled = node.output[0] if keep else f"{node.output[0]}/pooled"
    b.add(Pool(node.name, source, pooled, "avg"))
    if not keep:
        b.add(Flatten(f"{node.name}/flatten", pooled, node.output[0]))
    if source in b.nonnegative:
        b.nonnegative.update({pooled, node.output[0]})


def _squeeze(b, node, attrs):
    """Squeeze of the 1 x 1 map a global pool leaves: a flatten."""
    _spatial_axes(b, node, attrs, "Squeeze")
    source = b.name(node.input[0])
    b.add(Flatten(node.name, source, node.output[0]))
    if source in b.nonnegative:
        b.nonnegative.add(node.output[0])


def _flatten(b, node, attrs):
    axis = attrs.get("axis", 1)
    shape = b.shape(node.input[0])
    if axis < 0 and shape is not None:
        axis += len(shape) + 1              # the rank: the shape after the batch, and it
    if node.op_type == "Flatten" and axis != 1:
        raise ModelError(f"{_where(node)}: only Flatten with axis 1 (the batch apart from "
                         f"the rest) is supported, not axis {attrs.get('axis')}")
    if node.op_type == "Reshape":
        shape = b.constant(node, 1, "shape")
        if shape.shape != (2,) or shape[1] != -1 and shape[0] not in (-1, 0, 1):
            raise ModelError(f"{_where(node)}: only a Reshape to (batch, features) is "
                             f"supported, not {shape.astype(int).tolist()}")
    source = b.name(node.input[0])
    b.add(Flatten(node.name, source, node.output[0]))
    if source in b.nonnegative:
        b.nonnegative.add(node.output[0])


def _add(b, node, nodes_after):
    constant = [k for k in (0, 1) if node.input[k] in b.constants]
    if constant:
        index, layer = b.layer_before(node.input[1 - constant[0]], node,
                                      "An Add of a constant (a bias)")
        bias = np.broadcast_to(b.constants[node.input[constant[0]]].reshape(-1),
                               layer.bias.shape)
        b.replace(index, Layer(**{**layer.__dict__, "bias": layer.bias + bias}), node)
        return
    follower = nodes_after.get(node.output[0])
    relu = (follower is not None and follower.op_type == "Relu"
            and b.consumers[node.output[0]] == 1)
    b.add(Residual(node.name, b.name(node.input[0]), b.name(node.input[1]), node.output[0],
                   relu))
    if relu:
        b.nonnegative.add(node.output[0])


def _concat(b, node, attrs):
    axis = attrs.get("axis")
    if axis not in (1, -3) or len(node.input) < 2:
        raise ModelError(f"{_where(node)}: only a Concat of maps along the channels (axis 1) "
                         f"is supported, not axis {axis}")
    sources = [b.name(name) for name in node.input]
    if any(name in b.constants for name in node.input):
        raise ModelError(f"{_where(node)}: a Concat of a constant is not supported")
    if not all(name in b.nonnegative for name in sources):
        raise ModelError(f"{_where(node)}: a Concat needs ReLU'd inputs (the arrays' "
                         f"activations are unsigned)")
    b.add(Concatenation(node.name, sources[0], tuple(sources[1:]), node.output[0]))
    b.nonnegative.add(node.output[0])


def _constant(b, node, attrs, nodes_after):
    from onnx import numpy_helper
    b.constants[node.output[0]] = numpy_helper.to_array(attrs["value"]).astype(float)


def _pass_through(b, node, attrs, nodes_after):
    if node.input[0] in b.constants:
        # The exporter writes one initializer for equal ones (zero biases) and copies it
        # to each user through an Identity.
        b.constants[node.output[0]] = b.constants[node.input[0]]
    else:
        b.alias[node.output[0]] = b.name(node.input[0])


def _cast(b, node, attrs, nodes_after):
    """A Cast to a float type (skl2onnx casts its input): passed through."""
    import onnx
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
              onnx.TensorProto.BFLOAT16)
    if attrs.get("to") not in floats:
        raise ModelError(f"{_where(node)}: only a Cast to a float type is supported, not to "
                         f"{onnx.TensorProto.DataType.Name(attrs.get('to', 0))}")
    _pass_through(b, node, attrs, nodes_after)


def _softmax(b, node, attrs, nodes_after):
    """A Softmax over the classes as the model's last step: passed through (checked in
    ``load_onnx``), the outputs being the logits, in the same order."""
    shape = b.shape(node.input[0])
    if shape is not None and len(shape) != 1:
        raise ModelError(f"{_where(node)}: only a Softmax of (batch, classes) logits is "
                         f"supported, not of shape {shape}")
    b.softmax.append(node)
    b.alias[node.output[0]] = b.name(node.input[0])


def _label_nodes(graph):
    """The nodes that compute a classifier's label from its scores (an ArgMax and all
    that reads it, as skl2onnx writes them) and the tensors they write."""
    nodes, tensors = [], set()
    for node in graph.node:
        if node.op_type == "ArgMax" or tensors.intersection(node.input):
            nodes.append(node)
            tensors.update(node.output)
    return nodes, tensors


def _each(handler):
    """``handler(b, node, attrs)`` as a handler of the dispatch table."""
    return lambda b, node, attrs, nodes_after: handler(b, node, attrs)


#: Operator -> ``handler(builder, node, attributes, first readers of each tensor)``.
_HANDLERS = {
    "Constant": _constant, "Conv": _each(_conv), "Gemm": _each(_gemm),
    "MatMul": _each(_gemm), "BatchNormalization": _each(_batch_norm),
    "Relu": lambda b, node, attrs, after: _activation(b, node, np.inf),
    "Clip": _each(_clip), "MaxPool": _each(_pool), "AveragePool": _each(_pool),
    "GlobalAveragePool": _each(_pool), "Flatten": _each(_flatten),
    "Reshape": _each(_flatten), "ReduceMean": _each(_reduce_mean),
    "Squeeze": _each(_squeeze), "Add": lambda b, node, attrs, after: _add(b, node, after),
    "Concat": _each(_concat),
    "Identity": _pass_through, "Dropout": _pass_through, "Cast": _cast,
    "Softmax": _softmax,
}

#: What each operator the importer takes becomes (``codnn infer --list-ops``).
OPERATORS = {
    "Conv": "an array layer: a square kernel, equal strides, no dilation, any pads "
            "(auto_pad SAME_UPPER, SAME_LOWER or VALID too); grouped and depthwise ones as "
            "a convolution over all input channels, zero outside each filter's group",
    "Gemm": "an array layer (transB either way, alpha and beta folded; a bias C of one "
            "value per output: a scalar, (N,), (1, N) or equal rows; no transA)",
    "MatMul": "an array layer by a constant matrix; an Add of a constant after it is its "
              "bias",
    "BatchNormalization": "folded into the Conv or Gemm before it",
    "Relu": "the output stage of the layer before it",
    "Clip": "Clip(0, max), every opset form: the output stage of the layer before it",
    "MaxPool": "pooling (square window, equal strides, pads and auto_pad as Conv's, "
               "ceil_mode either way)",
    "AveragePool": "pooling (as MaxPool; count_include_pad either way, not with "
                   "ceil_mode windows past the pads)",
    "GlobalAveragePool": "global average pooling",
    "ReduceMean": "over the two spatial axes, keepdims either way: global average pooling",
    "Squeeze": "of the spatial axes after a global average (or of no axes named, of a "
               "C x 1 x 1 map): a flatten",
    "Flatten": "axis 1 (or the negative axis that names it): channel-major, as the arrays "
               "read it",
    "Reshape": "to (batch, features): a flatten",
    "Add": "of two tensors, followed by Relu (a residual) or not (a linear bottleneck: "
           "signed activations in offset binary), or of a constant after a MatMul (its "
           "bias)",
    "Concat": "of ReLU'd maps along the channels: each part requantized to the output's "
              "scale",
    "Identity": "passed through (of a constant: that constant)",
    "Dropout": "passed through (inference)",
    "Cast": "to a float type: passed through",
    "Softmax": "over the classes as the last step: passed through (the outputs are the "
               "logits, in the same order)",
    "ArgMax": "and what follows it (a classifier's label output, as skl2onnx writes it): "
              "left out, the label being the argmax of the outputs",
    "Constant": "a constant tensor",
}


def _shapes(model):
    """Each tensor's shape after the batch axis where ONNX's shape inference finds all of
    it (``auto_pad`` SAME and ``ceil_mode`` need their input's)."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        return {}                   # a model it cannot infer: no shapes
    shapes = {}
    for info in (*inferred.input, *inferred.value_info, *inferred.output):
        dims = info.type.tensor_type.shape.dim[1:]          # the batch may be symbolic
        if info.type.tensor_type.HasField("shape") and all(d.HasField("dim_value")
                                                            for d in dims):
            shapes[info.name] = tuple(int(d.dim_value) for d in dims)
    return shapes


def load_onnx(path):
    """Read the ONNX model at ``path``; return a ``FloatNetwork``.

    Raises
    ------
    ModelError
        If the file is not an ONNX model, or holds an operator, attribute or shape that
        codnn does not map to the arrays.
    """
    import onnx
    from google.protobuf.message import DecodeError
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except (DecodeError, onnx.checker.ValidationError, ValueError, RuntimeError) as error:
        raise ModelError(f"{path} is not a valid ONNX model ({str(error).splitlines()[0]})") \
            from None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:
        raise ModelError(f"{path}: opset {opset}; codnn reads opset 13 and newer")
    graph = model.graph
    labels, label_tensors = _label_nodes(graph)
    nodes = [node for node in graph.node if node not in labels]
    outputs = [out for out in graph.output if out.name not in label_tensors]
    b = _Builder(graph, nodes, outputs, _shapes(model))
    inputs = [i for i in graph.input if i.name not in b.constants]
    if len(inputs) != 1 or len(outputs) != 1:
        raise ModelError(f"{path}: the model must have one input and one output (besides a "
                         f"label by ArgMax), not {len(inputs)} and {len(outputs)}")
    dims = [d.dim_value for d in inputs[0].type.tensor_type.shape.dim][1:]
    if len(dims) not in (1, 3) or not all(dims):
        raise ModelError(f"{path}: the input must be (batch, C, H, W) or (batch, features) "
                         f"with fixed sizes, not {dims}")
    nodes_after = {}
    for node in nodes:
        if node.input:
            nodes_after.setdefault(node.input[0], node)
    for node in nodes:
        attrs = _attributes(node)
        op = node.op_type
        if node.domain not in ("", "ai.onnx"):
            raise ModelError(f"unsupported operator {node.domain}.{op} ({_where(node)})")
        if op not in _HANDLERS:
            raise ModelError(f"unsupported operator {op} ({_where(node)})")
        _HANDLERS[op](b, node, attrs, nodes_after)
    if not any(isinstance(step, Layer) for step in b.steps):
        raise ModelError(f"{path}: no Conv, Gemm or MatMul layer to run on the arrays")
    output = b.name(outputs[0].name)
    for node in b.softmax:
        if b.name(node.input[0]) != output:
            raise ModelError(f"{_where(node)}: a Softmax is supported only as the model's "
                             f"last step")
    steps = _with_groups(path, model, b.steps)
    network = FloatNetwork(tuple(steps), inputs[0].name, output, tuple(dims))
    try:
        network.run(np.zeros((1, *dims)))
    except (ValueError, KeyError) as error:
        raise ModelError(f"{path}: the layers' shapes do not chain ({error})") from None
    for step in network.steps:
        if isinstance(step, Layer) and not np.all(np.isfinite(step.weights)) \
                or isinstance(step, Layer) and not np.all(np.isfinite(step.bias)):
            raise ModelError(f"{path}: layer {step.name!r} has NaN or infinite weights")
    return network


def groups_metadata(alpha, gamma, layer_groups):
    """The ``GROUPS_KEY`` value for a model's layers' column groups (in graph order)."""
    import json
    return json.dumps({"alpha": alpha, "gamma": gamma,
                       "layers": [[list(map(int, g)) for g in groups]
                                  for groups in layer_groups]})


def _with_groups(path, model, steps):
    import json
    entry = next((p.value for p in model.metadata_props if p.key == GROUPS_KEY), None)
    if entry is None:
        return steps
    layers = [k for k, step in enumerate(steps) if isinstance(step, Layer)]
    try:
        groups = json.loads(entry)["layers"]
        if len(groups) != len(layers):
            raise ValueError(f"{len(groups)} layers of groups for {len(layers)} layers")
        groups = [tuple(tuple(int(c) for c in g) for g in layer) for layer in groups]
    except (ValueError, KeyError, TypeError) as error:
        raise ModelError(f"{path}: metadata {GROUPS_KEY} is malformed ({error})") from None
    steps = list(steps)
    for k, layer_groups in zip(layers, groups):
        steps[k] = Layer(**{**steps[k].__dict__, "groups": layer_groups})
    return steps
