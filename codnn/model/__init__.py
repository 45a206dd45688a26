"""Whole networks on the arrays: ONNX import (``onnx_import``), the float network
(``graph``), integer quantization (``quantize``), the layer scheduler (``schedule``), the
data sets that ship with packages (``datasets``) and the runs on golden and RTL
(``infer``). NumPy inside; no Amaranth at import."""
