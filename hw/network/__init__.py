"""The network engine (docs/semantics.md section 9): a whole network run from a program
and a weight image, with no host step between layers: the engine (``engine``: the array,
the sequencer and the buffers), the gather (the activation buffer and the address
generator that feeds the array), the result writer (where each result of the array goes)
and the post-processing unit (pooling, the residual add)."""

from .engine import NetworkEngine
from .gather import Gather, GatherEntry, Geometry
from .postprocess import PostOp, PostProcess, PostStep
from .results import ResultWriter

__all__ = ["NetworkEngine", "Gather", "GatherEntry", "Geometry", "PostOp", "PostProcess",
           "PostStep", "ResultWriter"]
