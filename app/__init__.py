"""codnn: hardware generator for algorithm/hardware co-design of deep learning.

The command line (``codnn``) and the flows that tie the layers together:
generate -> simulate against golden -> synthesize -> report. Installed as ``codnn`` (the
folder ``app/``); the layers install beneath it: ``codnn.golden`` (``golden/``),
``codnn.hw`` (``hw/``), ``codnn.sim`` (``sim/``), ``codnn.synth`` (``synth/``).
"""

__version__ = "0.1.0"
