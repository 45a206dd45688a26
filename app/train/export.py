"""ONNX export of a trained model: opset 17, input ``image`` (batch ``1 x C x H x W``),
output ``logits``, and the column groups under ``codnn.model.onnx_import.GROUPS_KEY``
when the model was trained with column combining."""

import warnings

import onnx
import torch

from codnn.model.onnx_import import GROUPS_KEY, groups_metadata

__all__ = ["export_onnx"]


def export_onnx(model, path, input_shape, column_groups=None):
    """Write ``model`` to ``path``. ``column_groups``: ``(alpha, gamma, groups per array
    layer)``, or None."""
    model.eval()
    with warnings.catch_warnings():                 # the exporter's deprecation notices
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, *input_shape),), str(path), dynamo=False,
                          input_names=["image"], output_names=["logits"], opset_version=17)
    if column_groups:
        saved = onnx.load(str(path))
        onnx.helper.set_model_props(saved, {GROUPS_KEY: groups_metadata(*column_groups)})
        onnx.save(saved, str(path))
