"""Whole networks on the arrays: ONNX import (``onnx_import``), the float network
(``graph``), integer quantization (``quantize``), the layer scheduler (``schedule``), the
network engine's compiler (``compile``), the data sets that ship with packages
(``datasets``), the runs on the RTL (``rtl``) and on a board (``on_board``), and the flow
that ties them into a report (``infer``). NumPy at import; Amaranth and the simulators
load only for an RTL or board run."""
