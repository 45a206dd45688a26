"""PruneTrain (Lym et al., SC 2019): channel group lasso from the first training step,
and every few epochs the network rebuilt as a smaller dense one without the channels the
lasso zeroed (docs/training.md, "PruneTrain").

The network's tensors are grouped into *channel spaces* (``channel_spaces``, from a
``torch.fx`` trace of its forward): the output channels of a Conv2d or Linear layer start a
space; batch normalization, activations, pooling, flatten and dropout keep it; a residual
add joins the spaces of its two operands into one (the channels that meet there). Each
space knows the layers that write it (``producers``), the batch normalizations on it and
the layers that read it (``consumers``: a Conv2d's input channels, or a Linear layer's
inputs, ``per_channel`` of them per channel after a flatten). The network's input and
output spaces are never pruned.

- Penalty (``group_lasso``): for every layer, the L2 norm of each of its output channels'
  weights (its output space not the network's output) and of each of its input
  channels' weights (its input space not the network's input), summed.
- Reconfiguration (``reconfigure``): a channel of a space stays when some producer's
  output group and some consumer's input group of it have a root mean square weight
  (the group's norm over the square root of its size) of at least ``threshold``; the
  layers,
  batch normalizations and Linear inputs of the space are rebuilt with the kept channels
  (a residual join keeps the union of what its layers keep). Removing a channel whose
  producers' weights are zero drops the constant its batch normalization's shift would
  have added: a bias the training goes on to relearn.

Cost: a trace per reconfiguration; the penalty is one norm per group per step.
"""

import operator
from dataclasses import dataclass, field

import torch
from torch import fx, nn

__all__ = ["THRESHOLD", "PruneTrain", "Space", "Lasso", "channel_spaces", "group_lasso",
           "reconfigure", "shrink", "training_flops", "channels"]

#: The default zeroing threshold (root mean square weight of a group).
THRESHOLD = 5e-3
#: Modules that keep the channels of their input.
_KEEP = (nn.ReLU, nn.ReLU6, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Identity,
         nn.Dropout, nn.Flatten)
_KEEP_FUNCTIONS = {torch.relu, torch.flatten, nn.functional.relu,
                   nn.functional.adaptive_avg_pool2d, nn.functional.max_pool2d,
                   nn.functional.avg_pool2d, nn.functional.dropout}
_KEEP_METHODS = {"relu", "flatten", "view", "reshape", "contiguous"}
_ADDS = {operator.add, torch.add}


@dataclass(frozen=True)
class PruneTrain:
    """``penalty``: the share of the first step's objective the group lasso takes (its
    weight fixed then); ``interval``: epochs between reconfigurations; ``threshold``: the
    root mean square weight under which a group counts as zero. The paper's 1e-4 is for
    SGD, which brings a group's weights to zero; under Adam (codnn's optimizer) a group
    that the lasso empties keeps oscillating at about the learning rate (1e-3), so the
    default is above that. ``grow``: after each rebuild the mini-batch grows as the
    network's training FLOPs per sample fall (the memory a sample takes, roughly), and
    the learning rate with it (the paper's option)."""

    penalty: float = 0.2
    interval: int = 5
    threshold: float = THRESHOLD
    grow: bool = False


@dataclass
class Space:
    """A channel space: ``size`` channels written by ``producers`` (names of Conv2d or
    Linear layers), normalized by ``norms`` (BatchNorm names), read by ``consumers``
    (``(name, per_channel)``); ``fixed`` for the network's input and output."""

    size: int
    producers: list = field(default_factory=list)
    norms: list = field(default_factory=list)
    consumers: list = field(default_factory=list)
    fixed: bool = False


class _Spaces:
    """Union-find over the spaces met while tracing."""

    def __init__(self):
        self.parent, self.spaces = [], []

    def new(self, size, fixed=False):
        self.parent.append(len(self.parent))
        self.spaces.append(Space(size, fixed=fixed))
        return len(self.parent) - 1

    def find(self, k):
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def join(self, a, b, where):
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        sa, sb = self.spaces[a], self.spaces[b]
        if sa.size != sb.size:
            raise ValueError(f"{where}: adds maps of {sa.size} and {sb.size} channels")
        self.parent[b] = a
        sa.producers += sb.producers
        sa.norms += sb.norms
        sa.consumers += sb.consumers
        sa.fixed = sa.fixed or sb.fixed
        return a


def channel_spaces(model, input_shape):
    """The channel spaces of ``model`` (a list of ``Space``) for inputs of
    ``input_shape``.

    Raises
    ------
    ValueError
        One line naming the module or operation the reconfiguration cannot follow (a
        grouped convolution, an operation that mixes channels other than an add...).
    """
    try:
        graph = fx.symbolic_trace(model).graph
    except Exception as error:                      # torch raises many kinds
        raise ValueError(f"PruneTrain cannot trace the model's forward: "
                         f"{type(error).__name__}: {error}") from None
    spaces = _Spaces()
    at = {}                                         # node -> space index
    modules = dict(model.named_modules())
    for node in graph.nodes:
        first = node.args[0] if node.args else None
        if node.op == "placeholder":
            at[node] = spaces.new(input_shape[0], fixed=True)
        elif node.op == "call_module":
            module = modules[node.target]
            space = spaces.find(at[first])
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                if isinstance(module, nn.Conv2d) and module.groups != 1:
                    raise ValueError(f"{node.target}: a grouped convolution; PruneTrain "
                                     f"rebuilds dense convolutions only")
                size = spaces.spaces[space].size
                width = module.in_channels if isinstance(module, nn.Conv2d) \
                    else module.in_features
                if width % size:
                    raise ValueError(f"{node.target}: {width} inputs do not divide into the "
                                     f"{size} channels it reads")
                spaces.spaces[space].consumers.append((node.target, width // size))
                out = module.out_channels if isinstance(module, nn.Conv2d) \
                    else module.out_features
                at[node] = spaces.new(out)
                spaces.spaces[at[node]].producers.append(node.target)
            elif isinstance(module, nn.BatchNorm2d):
                spaces.spaces[space].norms.append(node.target)
                at[node] = space
            elif isinstance(module, _KEEP):
                at[node] = space
            else:
                raise ValueError(f"{node.target}: PruneTrain cannot follow channels through "
                                 f"a {type(module).__name__}")
        elif node.op in ("call_function", "call_method"):
            tensors = [a for a in node.args if isinstance(a, fx.Node) and a in at]
            if node.op == "call_function" and node.target in _ADDS and len(tensors) == 2:
                at[node] = spaces.join(at[tensors[0]], at[tensors[1]], node.name)
            elif (node.target in _KEEP_FUNCTIONS or node.target in _KEEP_METHODS) and tensors:
                at[node] = at[tensors[0]]
            elif node.op == "call_method" and node.target == "size":
                continue                            # a shape, not a tensor
            else:
                raise ValueError(f"{node.name}: PruneTrain cannot follow channels through "
                                 f"{getattr(node.target, '__name__', node.target)}")
        elif node.op == "output":
            spaces.spaces[spaces.find(at[first])].fixed = True
    roots = sorted({spaces.find(k) for k in at.values()})
    return [spaces.spaces[k] for k in roots]


def _out_groups(module):
    """Per output channel, its weights (a row each)."""
    return module.weight.flatten(1)


def _in_groups(module, per_channel):
    """Per input channel, the weights that read it (a row each)."""
    w = module.weight
    if isinstance(module, nn.Conv2d):
        return w.transpose(0, 1).flatten(1)
    return w.reshape(w.shape[0], -1, per_channel).transpose(0, 1).flatten(1)


def group_lasso(model, spaces):
    """The penalty: the sum of every output-channel and input-channel group's L2 norm
    (groups on the network's input and output spaces left out)."""
    modules = dict(model.named_modules())
    total = 0.0
    for space in spaces:
        if space.fixed:
            continue
        for name in space.producers:
            total = total + _out_groups(modules[name]).norm(dim=1).sum()
        for name, per_channel in space.consumers:
            total = total + _in_groups(modules[name], per_channel).norm(dim=1).sum()
    return total


def _rms(groups):
    return groups.pow(2).mean(dim=1).sqrt()


def _kept(model, space, threshold):
    """The channels of ``space`` that stay: a producer's output group and a consumer's
    input group with a root mean square weight of at least ``threshold`` (at least one
    channel)."""
    modules = dict(model.named_modules())
    with torch.no_grad():
        out = torch.stack([_rms(_out_groups(modules[n])) for n in space.producers]).amax(0)
        used = torch.stack([_rms(_in_groups(modules[n], k))
                            for n, k in space.consumers]).amax(0)
    keep = torch.nonzero((out >= threshold) & (used >= threshold)).flatten()
    return keep if len(keep) else torch.argmax(out * used).reshape(1)


def _replace(model, name, module):
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


def shrink(model, spaces, keep):
    """Rebuild ``model`` in place with channels ``keep[k]`` (index lists) of each
    not-fixed space ``k`` of ``spaces``."""
    modules = dict(model.named_modules())
    free = [s for s in spaces if not s.fixed]
    with torch.no_grad():
        for space, chosen in zip(free, keep):
            chosen = torch.as_tensor(chosen, dtype=torch.long)
            for name in space.producers:
                old = modules[name]
                if isinstance(old, nn.Conv2d):
                    new = nn.Conv2d(old.in_channels, len(chosen), old.kernel_size, old.stride,
                                    old.padding, old.dilation, bias=old.bias is not None)
                else:
                    new = nn.Linear(old.in_features, len(chosen), bias=old.bias is not None)
                new.weight.copy_(old.weight[chosen])
                if old.bias is not None:
                    new.bias.copy_(old.bias[chosen])
                modules[name] = new
            for name in space.norms:
                old = modules[name]
                new = nn.BatchNorm2d(len(chosen), old.eps, old.momentum, old.affine,
                                     old.track_running_stats)
                for key in ("weight", "bias", "running_mean", "running_var"):
                    getattr(new, key).copy_(getattr(old, key)[chosen])
                new.num_batches_tracked.copy_(old.num_batches_tracked)
                modules[name] = new
            for name, per_channel in space.consumers:
                old = modules[name]
                if isinstance(old, nn.Conv2d):
                    new = nn.Conv2d(len(chosen), old.out_channels, old.kernel_size, old.stride,
                                    old.padding, old.dilation, bias=old.bias is not None)
                    new.weight.copy_(old.weight[:, chosen])
                else:
                    columns = (chosen[:, None] * per_channel
                               + torch.arange(per_channel)).flatten()
                    new = nn.Linear(len(columns), old.out_features, bias=old.bias is not None)
                    new.weight.copy_(old.weight[:, columns])
                if old.bias is not None:
                    new.bias.copy_(old.bias)
                modules[name] = new
    for space in free:
        for name in space.producers + space.norms + [n for n, _ in space.consumers]:
            _replace(model, name, modules[name])
    return model


def reconfigure(model, input_shape, threshold):
    """Rebuild ``model`` (in place) without the channels whose groups are under
    ``threshold``; return the kept index lists (what ``shrink`` takes, for a checkpoint
    to replay)."""
    spaces = channel_spaces(model, input_shape)
    keep = [_kept(model, space, threshold).tolist() for space in spaces if not space.fixed]
    shrink(model, spaces, keep)
    return keep


def channels(model, input_shape):
    """The channels of the model's prunable spaces, summed."""
    return sum(s.size for s in channel_spaces(model, input_shape) if not s.fixed)


def training_flops(model, input_shape):
    """Training FLOPs per image, counted from the layer shapes: each Conv2d and Linear
    multiply-accumulate is 2 FLOPs, in the forward pass, the backward pass to the data and
    the one to the weights (3 x 2 per MAC)."""
    macs = []

    def count(module, inputs, output):
        per_output = module.weight[0].numel()
        macs.append(output[0].numel() * per_output)
    hooks = [m.register_forward_hook(count) for m in model.modules()
             if isinstance(m, (nn.Conv2d, nn.Linear))]
    training = model.training
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(1, *input_shape))
    finally:
        for hook in hooks:
            hook.remove()
        model.train(training)
    return 6 * sum(macs)


class Lasso:
    """A PruneTrain phase's penalty for ``model``: ``lasso(loss)`` is the weighted group
    lasso, its weight fixed at the first call (or given) so that it is ``share`` of the
    objective then. ``refresh()`` after a reconfiguration."""

    def __init__(self, model, input_shape, share, weight=None):
        self.model, self.input_shape, self.share, self.weight = model, input_shape, share, weight
        self.refresh()

    def refresh(self):
        self.spaces = channel_spaces(self.model, self.input_shape)

    def __call__(self, loss):
        penalty = group_lasso(self.model, self.spaces)
        if self.weight is None:
            self.weight = self.share * loss.item() / ((1 - self.share)
                                                      * max(penalty.item(), 1e-12))
        return self.weight * penalty
