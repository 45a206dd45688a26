"""codnn: hardware generator for algorithm/hardware co-design of deep learning.

The command line (``codnn``) and the flows that tie the layers together:
generate -> simulate against golden -> synthesize -> report.
"""

__version__ = "0.1.0"
