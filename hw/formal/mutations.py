"""Mutations of the designs' decisions and what each proof makes of them (docs/formal.md,
"What the proofs catch"): ``MUTATIONS``, each one text of a design's source made wrong,
with the proofs that must fail on it and those that do not look at that decision (a gap,
with the reason). ``install(mutation)`` makes the next import of the mutated module in
this process read the mutated source (``benchmarks/formal_proofs.py --mutations`` runs
each mutation in a process of its own)."""

import importlib.abc
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MUTATIONS", "Mutation", "install", "mutated_source"]

#: Why a proof of the stream rules alone cannot see a wrong value or a wrong choice.
_STREAMS_ONLY = ("stream rules only: a wrong value keeps every handshake; the values are "
                 "held to golden by simulation")


@dataclass(frozen=True)
class Mutation:
    """``old``, once in ``module``'s source, made ``new``: ``what`` goes wrong. The
    proofs in ``catch`` must not end as documented on it; those in ``gaps`` do, for the
    reason given."""

    name: str
    module: str
    old: str
    new: str
    what: str
    catch: tuple = ()
    gaps: dict = field(default_factory=dict)


MUTATIONS = (
    Mutation("crc_taken_inverted", "codnn.hw.soc.link_frames",
             "with m.If((byte << 8 | received_crc) == crc):",
             "with m.If((byte << 8 | received_crc) != crc):",
             "the host link takes frames with a bad CRC and refuses good ones",
             ("host_link_answers",),
             {"link_frames": _STREAMS_ONLY, "host_link": _STREAMS_ONLY}),
    Mutation("crc_sent_wrong", "codnn.hw.soc.link_frames",
             "out_crc.eq(0xFFFF), left.eq(length)", "out_crc.eq(0xFFFE), left.eq(length)",
             "the host link sends every answer with a wrong CRC",
             ("host_link_answers",), {"link_frames": _STREAMS_ONLY}),
    Mutation("longest_frame_dropped", "codnn.hw.soc.link_frames",
             "with m.If(length > MAX_PAYLOAD):", "with m.If(length >= MAX_PAYLOAD):",
             "the host link drops a frame of exactly MAX_PAYLOAD bytes as too long",
             ("host_link_answers",)),
    Mutation("zero_class_high", "codnn.hw.nic.inceptionn_format",
             "return RAW_EXPONENT - b", "return RAW_EXPONENT + 1 - b",
             "INCEPTIONN's zero class ends an exponent too high (a wrong bound compare)",
             ("inceptionn_value",), {"compressor": _STREAMS_ONLY}),
    Mutation("decoder_limit_short", "codnn.hw.nic.terngrad",
             "with m.Elif(k.have_header & (count > self.max_values)):",
             "with m.Elif(k.have_header & (count >= self.max_values)):",
             "the TernGrad decoder drops a message of max_values values as too long",
             ("terngrad_decoder_counts",), {"terngrad_decoder": _STREAMS_ONLY}),
    Mutation("ternary_threshold_shifted", "codnn.hw.nic.terngrad",
             "up = stage(Mux(k >= 48, 48, Mux(k > 0, k, 0))[:6]",
             "up = stage(Mux(k >= 48, 48, Mux(k > 1, k - 1, 0))[:6]",
             "the TernGrad encoder compares a value with half its random threshold",
             ("terngrad_value",), {"terngrad": _STREAMS_ONLY,
                  "terngrad_bytes": "counts a message's bytes, which a wrong code keeps"}),
    Mutation("rice_parameter_fixed", "codnn.hw.nic.rice_compressor",
             "rice_k.eq(_argmin(k.job_costs))", "rice_k.eq(0)",
             "the Rice compressor codes every block with parameter 0, not the cheapest",
             (), {"rice_compressor": _STREAMS_ONLY,
                  "rice_loopback": "stream rules only; and parameter 0 still decodes to the "
                                   "same values, only longer"}),
    Mutation("cells_on_the_loading_bank", "codnn.hw.systolic.array",
             "self._parallel_cells(m, row_psum, weight, use_bank, MultiplierPlan(platform))",
             "self._parallel_cells(m, row_psum, weight, ~use_bank, MultiplierPlan(platform))",
             "the array's cells compute with the weight bank being loaded",
             ("systolic_values",), {"systolic": _STREAMS_ONLY}),
    Mutation("spare_replaced", "codnn.hw.common.skid",
             "m.d.sync += [o.payload.eq(spare), spare_valid.eq(0)]",
             "m.d.sync += [o.payload.eq(self.payload), spare_valid.eq(0)]",
             "the skid gives the beat on offer instead of the one its spare holds",
             ("skid_order",), {"skid": "counts the beats held, not which ones: "
                                        "skid_order follows each beat"}),
    Mutation("fmix32_shift", "codnn.hw.common.fmix32",
             "x3 = register(x2 ^ (x2 >> 13)", "x3 = register(x2 ^ (x2 >> 12)",
             "fmix32 shifts by 12 where MurmurHash3 shifts by 13",
             (), {"fmix32": "beats in flight and stream rules: the hash's value is not "
                            "looked at (tests/test_fmix32 holds it to golden)",
                  "fmix32_latency": "a latency, which a wrong shift keeps"}),
    Mutation("gather_top_row_dropped", "codnn.hw.network.gather",
             "inside = ((slot.ky >= bounds.ky_low)", "inside = ((slot.ky > bounds.ky_low)",
             "the gather pads a window's first row that lies inside the map",
             (), {"gather": _STREAMS_ONLY}),
    Mutation("frame_rule_inverted", "codnn.hw.nic.frame_path",
             "& (f.tos == GRADIENT_TOS)", "& (f.tos != GRADIENT_TOS)",
             "the frame path rewrites the frames of every ToS but the gradients'",
             (), {"frame_path": _STREAMS_ONLY}),
    Mutation("reset_keeps_rows", "codnn.hw.soc.array_soc",
             "m.d.sync += [k.written.eq(0), k.valid.eq(0),",
             "m.d.sync += [k.valid.eq(0),",
             "the board top's RESET forgets none of the weight rows written",
             ("soc_reset",)),
    Mutation("axi_offer_withdrawn", "codnn.hw.network.weights",
             "axi.arvalid.eq(stale | ((left != 0)", "axi.arvalid.eq(((left != 0)",
             "the AXI4 weight reader takes back a burst address it has on offer",
             ("axi_weights",)),
)


def mutated_source(mutation):
    """``(path, text)``: the file of ``mutation.module`` and its source with the mutation
    made. Raises ValueError unless ``old`` is in it exactly once."""
    # Found without importing its package, whose ``__init__`` may import the module.
    top, *parts = mutation.module.split(".")
    path = Path(importlib.util.find_spec(top).origin).parent.joinpath(*parts)
    path = path.with_suffix(".py")
    text = path.read_text()
    if text.count(mutation.old) != 1:
        raise ValueError(f"{mutation.name}: {mutation.old!r} is in {path} "
                         f"{text.count(mutation.old)} times, not once")
    return path, text.replace(mutation.old, mutation.new)


class _MutantLoader(importlib.abc.Loader):
    def __init__(self, path, text):
        self._path, self._text = path, text

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = str(self._path)
        exec(compile(self._text, str(self._path), "exec"), module.__dict__)


class _MutantFinder(importlib.abc.MetaPathFinder):
    def __init__(self, mutation):
        self._name = mutation.module
        self._path, self._text = mutated_source(mutation)

    def find_spec(self, name, path=None, target=None):
        if name != self._name:
            return None
        return importlib.util.spec_from_loader(
            name, _MutantLoader(self._path, self._text), origin=str(self._path))


def install(mutation):
    """From now on, this process imports ``mutation.module`` mutated. Raises RuntimeError
    if it is imported already (its users would keep the design as written)."""
    if mutation.module in sys.modules:
        raise RuntimeError(f"{mutation.module} is imported already: install a mutation "
                           "before the designs are imported")
    sys.meta_path.insert(0, _MutantFinder(mutation))
