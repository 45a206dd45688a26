"""DRAM traffic of one training iteration, layer by layer and with mini-batch
serialization (MBS, Lym et al., MLSys 2019): a NumPy-free count over a network's layer
shapes (docs/training.md, "Training memory traffic").

A network is a list of ``TrafficLayer`` in the order the forward pass runs them, over
named tensors whose sizes are per sample (elements). A schedule splits the layers into
*groups* of consecutive layers, each run over the mini-batch of ``batch`` samples in
sub-batches of ``sub_batch``: every layer of a group processes a sub-batch before the
next sub-batch enters, so a tensor whose producer and consumers are all in one group
(*internal*) stays in the on-chip buffer. Layer by layer is every layer its own group,
the whole mini-batch at once. What one iteration moves, in ``value_bytes`` per value:

- each tensor that leaves its group (or is the network's input): written once by its
  producer (not the input), read once by each consumer in another group (forward); its
  gradient written by each such consumer and read by the producer (backward; the input's
  gradient is not computed);
- each tensor a consumer needs again in the backward pass (a Conv2d's or dense layer's
  input, a max pool's): read once per such consumer; an internal one is first written
  (stashed) in the forward pass;
- each layer's weights: read by every sub-batch in the forward pass and in the backward
  pass, its gradient written by the first sub-batch and read and written by each later
  one, then the update (weights and gradient read, weights written).

A group of more than one layer must hold, for ``sub_batch`` samples, the largest set of
its tensors that are alive at once (a layer's inputs and output, and the internal
tensors made before it and read after it); MBS takes the largest sub-batch that fits and
chooses the groups that move the fewest bytes (dynamic programming over the layer order).

Cost: O(layers^3) for the grouping: ResNet-50 in half a second, Inception-v3 (124 layers)
in about six.
"""

from dataclasses import dataclass

__all__ = ["TrafficLayer", "Group", "TrafficError", "layer_by_layer", "serialize",
           "traffic", "from_float_network", "resnet50", "inception_v3", "SHAPES"]


class TrafficError(ValueError):
    """A network or buffer the model cannot take: one line naming what is wrong."""


@dataclass(frozen=True)
class TrafficLayer:
    """A layer: the tensors it ``reads``, its ``output``, its parameter count
    (``weights``) and whether its backward pass reads its inputs again (``stashes``:
    convolutions, dense layers, max pooling)."""

    name: str
    reads: tuple
    output: str
    weights: int = 0
    stashes: bool = False


@dataclass(frozen=True)
class Group:
    """Layers ``first..last`` (indices) in sub-batches of ``sub_batch``."""

    first: int
    last: int
    sub_batch: int


def _consumers(layers):
    users = {}
    for k, layer in enumerate(layers):
        for name in layer.reads:
            users.setdefault(name, []).append(k)
    return users


def _peak(layers, sizes, first, last, users):
    """The most elements per sample alive at once in group ``first..last``."""
    peak = 0
    for k in range(first, last + 1):
        alive = set(layers[k].reads) | {layers[k].output}
        for j in range(first, k):
            out = layers[j].output
            if any(k < u <= last for u in users.get(out, ())):
                alive.add(out)
        peak = max(peak, sum(sizes[t] for t in alive))
    return peak


def _group_bytes(layers, sizes, first, last, batch, sub_batch, users, network_input):
    """Values one group moves per iteration, split ``(activations, weights)`` per layer:
    a list of ``(activation values, weight values)``."""
    passes = -(-batch // sub_batch)
    moved = []
    for k in range(first, last + 1):
        layer = layers[k]
        act = 0
        # What this layer reads: tensors from other groups (or the input) in the forward
        # pass; their gradients back to their producers (not the input's).
        for name in layer.reads:
            outside = name == network_input or not any(
                layers[j].output == name for j in range(first, k))
            if outside:
                act += batch * sizes[name] * (1 if name == network_input else 3)
            if layer.stashes:
                act += batch * sizes[name]                      # read again, backward
        # What it writes: its output, once if anyone outside reads it, stashed if a
        # reader inside needs it again.
        readers = users.get(layer.output, [])
        if any(u > last for u in readers) or not readers:
            act += batch * sizes[layer.output]
        elif any(layers[u].stashes for u in readers):
            act += batch * sizes[layer.output]                  # the stash's write
        w = layer.weights * (2 * passes + (2 * passes - 1) + 3)
        moved.append((act, w))
    return moved


def traffic(layers, sizes, groups, batch, value_bytes=2):
    """Bytes one training iteration moves per layer under ``groups`` (a list of
    ``Group``): a list of ``{"layer", "activations", "weights"}``."""
    users = _consumers(layers)
    network_input = layers[0].reads[0]
    rows = []
    for g in groups:
        for k, (act, w) in zip(range(g.first, g.last + 1),
                               _group_bytes(layers, sizes, g.first, g.last, batch,
                                            g.sub_batch, users, network_input)):
            rows.append({"layer": layers[k].name, "activations": act * value_bytes,
                         "weights": w * value_bytes})
    return rows


def layer_by_layer(layers, batch):
    """The baseline schedule: every layer its own group, the whole mini-batch at once."""
    return [Group(k, k, batch) for k in range(len(layers))]


def serialize(layers, sizes, batch, buffer_bytes, value_bytes=2):
    """MBS's schedule: the groups and sub-batch sizes that move the fewest bytes with an
    on-chip buffer of ``buffer_bytes``.

    Raises
    ------
    TrafficError
        If a layer alone does not fit the buffer with one sample (its minimum working
        set: its inputs and output).
    """
    users = _consumers(layers)
    network_input = layers[0].reads[0]
    for k, layer in enumerate(layers):
        need = _peak(layers, sizes, k, k, users) * value_bytes
        if need > buffer_bytes:
            raise TrafficError(f"{layer.name}: one sample's inputs and output ({need} bytes) "
                               f"do not fit the {buffer_bytes}-byte buffer")
    best = [(0, [])] + [None] * len(layers)             # bytes, groups of layers[:k]
    for last in range(len(layers)):
        for first in range(last, -1, -1):
            if first == last:
                sub = batch                              # one layer streams, as baseline
            else:
                peak = _peak(layers, sizes, first, last, users) * value_bytes
                sub = min(batch, buffer_bytes // peak)
                if sub < 1:
                    break                                # longer groups need more
            moved = sum(a + w for a, w in _group_bytes(layers, sizes, first, last, batch,
                                                        sub, users, network_input))
            total = best[first][0] + moved
            if best[last + 1] is None or total < best[last + 1][0]:
                best[last + 1] = (total, best[first][1] + [Group(first, last, sub)])
    return best[-1][1]


def from_float_network(network):
    """The layers and per-sample tensor sizes of an imported network
    (``codnn.model.graph.FloatNetwork``); a flatten is no layer (the tensor keeps its
    name's size)."""
    import numpy as np

    from codnn.golden.network import Flatten, Pool

    from .graph import Concatenation, Layer, Residual
    tensors = network.run(np.zeros((1, *network.input_shape)), keep=True)
    sizes = {name: int(value[0].size) for name, value in tensors.items()}
    alias, layers = {}, []
    for step in network.steps:
        source = alias.get(step.source, step.source)
        if isinstance(step, Flatten):
            alias[step.output] = source
            continue
        if isinstance(step, Layer):
            layers.append(TrafficLayer(step.name, (source,), step.output,
                                       int(step.weights.size + step.bias.size), True))
        elif isinstance(step, Pool):
            layers.append(TrafficLayer(step.name, (source,), step.output, 0,
                                       step.kind == "max"))
        elif isinstance(step, Residual):
            layers.append(TrafficLayer(step.name, (source, alias.get(step.other, step.other)),
                                       step.output))
        elif isinstance(step, Concatenation):
            layers.append(TrafficLayer(step.name, (source, *(alias.get(n, n)
                                                             for n in step.others)),
                                       step.output))
        else:
            raise TrafficError(f"{step.name}: no traffic rule for a {type(step).__name__}")
    return layers, sizes


def resnet50(image=224, classes=1000):
    """ResNet-50 (He et al., 2016) as layers and per-sample sizes: a 7 x 7 stride-2 stem
    of 64, 3 x 3 stride-2 max pooling, bottleneck stages of 3, 4, 6, 3 blocks (widths 64,
    128, 256, 512, expanded 4x; stride 2 into stages 2-4 on the 3 x 3 convolution, a 1 x 1
    projection on each stage's first shortcut), global average pooling, dense
    ``classes``. Batch normalization and ReLU are applied as each layer's output is made
    (no traffic of their own)."""
    layers, sizes = [], {"image": 3 * image * image}

    def conv(name, source, out, c_in, c_out, k, side):
        layers.append(TrafficLayer(name, (source,), out, c_in * c_out * k * k + 2 * c_out,
                                   True))
        sizes[out] = c_out * side * side
        return out

    side = (image + 1) // 2
    x = conv("conv1", "image", "conv1", 3, 64, 7, side)
    side = (side + 1) // 2
    layers.append(TrafficLayer("pool1", (x,), "pool1", 0, True))
    sizes["pool1"] = 64 * side * side
    x, c = "pool1", 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512)), 2):
        for b in range(blocks):
            stride = 2 if stage > 2 and b == 0 else 1
            out_side = (side + stride - 1) // stride
            p = f"res{stage}{chr(97 + b)}"
            a = conv(f"{p}_1", x, f"{p}_1", c, width, 1, side)
            m = conv(f"{p}_2", a, f"{p}_2", width, width, 3, out_side)
            e = conv(f"{p}_3", m, f"{p}_3", width, 4 * width, 1, out_side)
            short = x if b else conv(f"{p}_proj", x, f"{p}_proj", c, 4 * width, 1, out_side)
            layers.append(TrafficLayer(f"{p}_add", (e, short), f"{p}_add"))
            sizes[f"{p}_add"] = 4 * width * out_side * out_side
            x, c, side = f"{p}_add", 4 * width, out_side
    layers.append(TrafficLayer("pool5", (x,), "pool5"))
    sizes["pool5"] = c
    layers.append(TrafficLayer("fc", ("pool5",), "fc", c * classes + classes, True))
    sizes["fc"] = classes
    return layers, sizes


class _Maps:
    """Builds a network's layers from shapes: each tensor's channels and side."""

    def __init__(self, image, channels):
        self.layers, self.sizes, self.shape = [], {}, {}
        self._set("image", channels, image)

    def _set(self, name, channels, side):
        self.shape[name] = (channels, side)
        self.sizes[name] = channels * side * side

    def conv(self, name, source, out, kernel, stride=1, padding=0):
        """A convolution with batch normalization (its scale and shift are parameters);
        ``kernel`` and ``padding`` an int or ``(h, w)`` (the side follows ``h``)."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        ph = padding if isinstance(padding, int) else padding[0]
        c, side = self.shape[source]
        self.layers.append(TrafficLayer(name, (source,), name, c * out * kh * kw + 2 * out,
                                        True))
        self._set(name, out, (side + 2 * ph - kh) // stride + 1)
        return name

    def pool(self, name, source, kind, kernel=3, stride=1, padding=0):
        c, side = self.shape[source]
        self.layers.append(TrafficLayer(name, (source,), name, 0, kind == "max"))
        self._set(name, c, (side + 2 * padding - kernel) // stride + 1)
        return name

    def join(self, name, sources, kind="concat"):
        """A channel concatenation, or (``kind="add"``) a residual add."""
        shapes = [self.shape[t] for t in sources]
        channels = sum(c for c, _ in shapes) if kind == "concat" else shapes[0][0]
        self.layers.append(TrafficLayer(name, tuple(sources), name))
        self._set(name, channels, shapes[0][1])
        return name

    def dense(self, name, source, out):
        c, side = self.shape[source]
        self.layers.append(TrafficLayer(name, (source,), name, c * side * side * out + out,
                                        True))
        self._set(name, out, 1)
        return name


def inception_v3(image=299, classes=1000):
    """Inception-v3 (Szegedy et al., 2016, as torchvision defines it) as layers and
    per-sample sizes: the stem, three InceptionA, InceptionB, four InceptionC,
    InceptionD and two InceptionE modules, global average pooling, dense ``classes``
    (the auxiliary classifier left out)."""
    n = _Maps(image, 3)
    x = n.conv("Conv2d_1a", "image", 32, 3, 2)
    x = n.conv("Conv2d_2a", x, 32, 3)
    x = n.conv("Conv2d_2b", x, 64, 3, padding=1)
    x = n.pool("MaxPool_1", x, "max", 3, 2)
    x = n.conv("Conv2d_3b", x, 80, 1)
    x = n.conv("Conv2d_4a", x, 192, 3)
    x = n.pool("MaxPool_2", x, "max", 3, 2)
    for name, pool_features in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        b1 = n.conv(f"{name}/1x1", x, 64, 1)
        b5 = n.conv(f"{name}/5x5", n.conv(f"{name}/5x5_1", x, 48, 1), 64, 5, padding=2)
        b3 = n.conv(f"{name}/3x3dbl_1", x, 64, 1)
        b3 = n.conv(f"{name}/3x3dbl_2", b3, 96, 3, padding=1)
        b3 = n.conv(f"{name}/3x3dbl_3", b3, 96, 3, padding=1)
        bp = n.conv(f"{name}/pool_1x1", n.pool(f"{name}/pool", x, "avg", 3, 1, 1),
                    pool_features, 1)
        x = n.join(name, (b1, b5, b3, bp))
    b3 = n.conv("Mixed_6a/3x3", x, 384, 3, 2)
    bd = n.conv("Mixed_6a/3x3dbl_1", x, 64, 1)
    bd = n.conv("Mixed_6a/3x3dbl_2", bd, 96, 3, padding=1)
    bd = n.conv("Mixed_6a/3x3dbl_3", bd, 96, 3, 2)
    x = n.join("Mixed_6a", (b3, bd, n.pool("Mixed_6a/pool", x, "max", 3, 2)))
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160),
                     ("Mixed_6e", 192)):
        b1 = n.conv(f"{name}/1x1", x, 192, 1)
        b7 = n.conv(f"{name}/7x7_1", x, c7, 1)
        b7 = n.conv(f"{name}/7x7_2", b7, c7, (1, 7), padding=(0, 3))
        b7 = n.conv(f"{name}/7x7_3", b7, 192, (7, 1), padding=(3, 0))
        bd = n.conv(f"{name}/7x7dbl_1", x, c7, 1)
        for k, (kernel, pad, out) in enumerate((((7, 1), (3, 0), c7), ((1, 7), (0, 3), c7),
                                                ((7, 1), (3, 0), c7), ((1, 7), (0, 3), 192))):
            bd = n.conv(f"{name}/7x7dbl_{k + 2}", bd, out, kernel, padding=pad)
        bp = n.conv(f"{name}/pool_1x1", n.pool(f"{name}/pool", x, "avg", 3, 1, 1), 192, 1)
        x = n.join(name, (b1, b7, bd, bp))
    b3 = n.conv("Mixed_7a/3x3_2", n.conv("Mixed_7a/3x3_1", x, 192, 1), 320, 3, 2)
    b7 = n.conv("Mixed_7a/7x7x3_1", x, 192, 1)
    b7 = n.conv("Mixed_7a/7x7x3_2", b7, 192, (1, 7), padding=(0, 3))
    b7 = n.conv("Mixed_7a/7x7x3_3", b7, 192, (7, 1), padding=(3, 0))
    b7 = n.conv("Mixed_7a/7x7x3_4", b7, 192, 3, 2)
    x = n.join("Mixed_7a", (b3, b7, n.pool("Mixed_7a/pool", x, "max", 3, 2)))
    for name in ("Mixed_7b", "Mixed_7c"):
        b1 = n.conv(f"{name}/1x1", x, 320, 1)
        b3 = n.conv(f"{name}/3x3_1", x, 384, 1)
        b3 = n.join(f"{name}/3x3", (n.conv(f"{name}/3x3_2a", b3, 384, (1, 3), padding=(0, 1)),
                                    n.conv(f"{name}/3x3_2b", b3, 384, (3, 1), padding=(1, 0))))
        bd = n.conv(f"{name}/3x3dbl_2", n.conv(f"{name}/3x3dbl_1", x, 448, 1), 384, 3,
                    padding=1)
        bd = n.join(f"{name}/3x3dbl", (
            n.conv(f"{name}/3x3dbl_3a", bd, 384, (1, 3), padding=(0, 1)),
            n.conv(f"{name}/3x3dbl_3b", bd, 384, (3, 1), padding=(1, 0))))
        bp = n.conv(f"{name}/pool_1x1", n.pool(f"{name}/pool", x, "avg", 3, 1, 1), 192, 1)
        x = n.join(name, (b1, b3, bd, bp))
    x = n.pool("avgpool", x, "avg", n.shape[x][1])
    n.dense("fc", x, classes)
    return n.layers, n.sizes


#: The networks ``codnn traffic`` knows by name.
SHAPES = {"resnet50": resnet50, "inception_v3": inception_v3}
