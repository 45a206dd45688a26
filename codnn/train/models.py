"""The networks ``codnn train`` builds, for ``1 x H x W`` images (MNIST's 28 x 28, digits'
8 x 8) and 10 classes. Every one imports through ``codnn.model.onnx_import``: convolutions
with batch normalization (folded on import), ReLU, max pooling, residual adds followed by
ReLU, global average pooling, dense layers."""

import torch
from torch import nn

__all__ = ["MODELS", "build_model", "array_layers", "named_array_layers", "fold_batch_norm"]


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


def build_model(name, input_shape, classes=10):
    """The named model for ``input_shape`` (``C x H x W``).

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}: one of {', '.join(MODELS)}")
    return MODELS[name](tuple(input_shape), classes)


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
    trains the weights the arrays compute with."""
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
