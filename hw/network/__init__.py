"""The network engine (docs/semantics.md section 9): a whole network run from a program
and a weight image, with no host step between layers. Being built: the gather (the
activation buffer and the address generator that feeds the array)."""

from .gather import Gather, GatherEntry, Geometry

__all__ = ["Gather", "GatherEntry", "Geometry"]
