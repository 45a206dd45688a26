"""The networks ``codnn train`` builds, for ``1 x H x W`` images (MNIST's 28 x 28, digits'
8 x 8) and 10 classes. Every one imports through ``codnn.model.onnx_import``: convolutions
with batch normalization (folded on import), ReLU, max pooling, residual adds followed by
ReLU, global average pooling, dense layers. A user's own network comes from a Python
file instead (``FILE.py:FUNCTION``, ``build_model``)."""

from pathlib import Path

import torch
from torch import nn

__all__ = ["MODELS", "build_model", "check_model_name", "check_module", "model_label",
           "array_layers", "named_array_layers", "fold_batch_norm"]


class _Features(nn.Module):
    """Convolutions, then flatten and the dense classifier (its input size found by a
    forward pass of a zero image)."""

    def __init__(self, features, input_shape, hidden, classes):
        super().__init__()
        self.features = features
        with torch.no_grad():
            width = features(torch.zeros(1, *input_shape)).numel()
        sizes = (width, *hidden, classes)
        layers = [nn.Flatten()]
        for k, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if k < len(sizes) - 2 else [])
        self.classifier = nn.Sequential(*layers)

    def forward(self, x):
        return self.classifier(self.features(x))


def _conv(a, b, k=3, stride=1, relu=True):
    layers = [nn.Conv2d(a, b, k, stride=stride, padding=k // 2, bias=False),
              nn.BatchNorm2d(b)]
    return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)


def lenet5(input_shape, classes):
    """LeNet-5: two 5 x 5 convolutions (6, 16 filters) with 2 x 2 max pooling, dense 120,
    84, classes. The second convolution is padded when the image is smaller than 16."""
    pad = 0 if input_shape[1] >= 16 else 2
    features = nn.Sequential(nn.Conv2d(input_shape[0], 6, 5, padding=2), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Conv2d(6, 16, 5, padding=pad), nn.ReLU(),
                             nn.MaxPool2d(2))
    return _Features(features, input_shape, (120, 84), classes)


def vgg6(input_shape, classes):
    """A small VGG: six 3 x 3 convolutions (16, 16, 32, 32, 64, 64 filters, batch
    normalization, ReLU), 2 x 2 max pooling after each pair, global average pooling, one
    dense layer."""
    layers, channels = [], input_shape[0]
    for width in (16, 32, 64):
        layers += [_conv(channels, width), _conv(width, width), nn.MaxPool2d(2)]
        channels = width
    features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1))
    return _Features(features, input_shape, (), classes)


class _Block(nn.Module):
    """A basic residual block: two 3 x 3 convolutions, the shortcut a 1 x 1 convolution
    when the shape changes; ReLU after the add."""

    def __init__(self, a, b, stride):
        super().__init__()
        self.body = nn.Sequential(_conv(a, b, stride=stride), _conv(b, b, relu=False))
        self.shortcut = (_conv(a, b, k=1, stride=stride, relu=False)
                         if stride != 1 or a != b else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet20(input_shape, classes):
    """ResNet-20 (He et al.'s CIFAR network): a 3 x 3 stem of 16 filters, three stages of
    three basic blocks (16, 32, 64 filters, stride 2 into the second and third), global
    average pooling, one dense layer: 19 convolutions (and 2 shortcut convolutions) and
    the classifier."""
    layers, channels = [_conv(input_shape[0], 16)], 16
    for stage, width in enumerate((16, 32, 64)):
        for block in range(3):
            layers.append(_Block(channels, width, 2 if stage and not block else 1))
            channels = width
    features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1))
    return _Features(features, input_shape, (), classes)


#: Model name -> builder ``(input_shape, classes) -> nn.Module``.
MODELS = {"lenet5": lenet5, "vgg6": vgg6, "resnet20": resnet20}


def check_model_name(name):
    """Raise ``ValueError`` (one line) unless ``name`` is a built-in model or
    ``FILE.py:FUNCTION`` with an existing file."""
    if name in MODELS:
        return
    path, sep, function = str(name).rpartition(":")
    if not sep or not path.endswith(".py") or not function.isidentifier():
        raise ValueError(f"unknown model {name!r}: one of {', '.join(MODELS)}, or "
                         f"FILE.py:FUNCTION (your own network)")
    if not Path(path).is_file():
        raise ValueError(f"model file {path} does not exist")


def model_label(name):
    """A short name for folders and titles: the built-in model's, or ``FILE-FUNCTION``."""
    if name in MODELS:
        return name
    path, _, function = str(name).rpartition(":")
    return f"{Path(path).stem}-{function}"


def _user_model(name, input_shape, classes):
    """``FUNCTION(input_shape, classes)`` from the user's ``FILE.py``, checked: a torch
    module with a Conv2d or Linear layer whose forward takes a batch of the input shape
    and gives ``classes`` scores."""
    import importlib.util
    path, _, function = name.rpartition(":")
    spec = importlib.util.spec_from_file_location(f"codnn_user_model_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:                      # the user's code: say where it broke
        raise ValueError(f"{path} fails to import: {type(error).__name__}: {error}") from None
    factory = getattr(module, function, None)
    if not callable(factory):
        raise ValueError(f"{path} has no function {function}")
    try:
        model = factory(tuple(input_shape), classes)
    except Exception as error:
        raise ValueError(f"{name}{(tuple(input_shape), classes)} fails: "
                         f"{type(error).__name__}: {error}") from None
    if not isinstance(model, nn.Module):
        raise ValueError(f"{name} returns a {type(model).__name__}, not a torch.nn.Module")
    return check_module(model, input_shape, classes, name)


def check_module(model, input_shape, classes, name="the model"):
    """``model`` (a torch module), checked for training on the arrays: it has a Conv2d or
    Linear layer and maps a batch of ``input_shape`` inputs to ``classes`` scores; returned
    in training mode. ``ValueError`` (one line, naming ``name``) otherwise."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"{name} is a {type(model).__name__}, not a torch.nn.Module")
    if not array_layers(model):
        raise ValueError(f"{name}: the model has no Conv2d or Linear layer for the arrays")
    try:
        with torch.no_grad():
            scores = model.eval()(torch.zeros(2, *input_shape))
    except Exception as error:
        raise ValueError(f"{name}: its forward fails on a batch of 2 x "
                         f"{' x '.join(map(str, input_shape))} inputs: "
                         f"{type(error).__name__}: {error}") from None
    if tuple(scores.shape) != (2, classes):
        raise ValueError(f"{name}: its forward gives {tuple(scores.shape)} for a batch of 2, "
                         f"not (2, {classes}) class scores")
    return model.train()


def build_model(name, input_shape, classes=10):
    """The named model for ``input_shape`` (``C x H x W``): a built-in one, or
    ``FILE.py:FUNCTION``, the module ``FUNCTION(input_shape, classes)`` of the user's file
    returns.

    Raises
    ------
    ValueError
        For an unknown name, or a user's model that does not build, has no layer for the
        arrays, or does not map a batch of inputs to class scores (one line each).
    """
    check_model_name(name)
    if name in MODELS:
        return MODELS[name](tuple(input_shape), classes)
    return _user_model(name, input_shape, classes)


def named_array_layers(model):
    """``(name, module)`` of the layers the arrays run (convolutions and dense layers), in
    the order the forward pass runs them (and the ONNX graph holds them)."""
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, (nn.Conv2d, nn.Linear))]


def array_layers(model):
    """The modules of ``named_array_layers``."""
    return [m for _, m in named_array_layers(model)]


def fold_batch_norm(model):
    """Fold every batch normalization into the convolution before it (in place; the
    normalization becomes an identity), as the ONNX import does: training on from here
    trains the weights the arrays compute with. A normalization is found where it follows
    its Conv2d in an ``nn.Sequential``.

    Raises
    ------
    ValueError
        If a BatchNorm2d is left that does not follow a Conv2d in an ``nn.Sequential`` (a
        user's model that applies it in ``forward``).
    """
    for sequence in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        for k in range(len(sequence) - 1):
            conv, norm = sequence[k], sequence[k + 1]
            if not (isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d)):
                continue
            with torch.no_grad():
                scale = norm.weight / torch.sqrt(norm.running_var + norm.eps)
                bias = conv.bias if conv.bias is not None else torch.zeros_like(scale)
                conv.weight.mul_(scale[:, None, None, None])
                conv.bias = nn.Parameter(norm.bias + (bias - norm.running_mean) * scale)
            sequence[k + 1] = nn.Identity()
    left = [name for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)]
    if left:
        raise ValueError(f"batch normalization {left[0]!r} cannot be folded: put it right "
                         f"after its Conv2d in an nn.Sequential")
