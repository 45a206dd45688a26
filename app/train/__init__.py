"""Training for the arrays, on PyTorch (the ``train`` extra): ``models`` (LeNet-5, a small
VGG, ResNet-20), ``column_combine`` (a prune point: prune, pack, masks), ``term_quant``
(the term-quantized forward pass), ``block_float`` (FAST's block floating point),
``arithmetic`` (what those two share), ``export`` (ONNX with the column groups) and ``run``
(a whole run: phases, checkpoints, report; ``codnn train``)."""

__all__ = ["TrainError"]


class TrainError(ValueError):
    """A run that cannot start: bad settings, or a checkpoint that does not belong to it."""
