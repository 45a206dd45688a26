"""The proofs ``codnn prove`` checks (docs/formal.md): ``PROOFS`` maps a name to a
``ProofSpec``, each design wrapped with its environment and properties by the modules
beside this one (``environment``: any inputs, streams keeping their rules; ``units``,
``nic``, ``arrays``, ``network``, ``link_answers``, ``soc_reset``: each subsystem's
properties)."""

import dataclasses
from dataclasses import dataclass


from codnn.golden.terngrad import message_size as terngrad_message_size
from codnn.hw.bfp.dot import BlockDot
from codnn.hw.formal.arrays import (array_banks_top, array_beats_top, array_latency_top,
                                    array_values_top)
from codnn.hw.formal.environment import stream_engine_top
from codnn.hw.formal.link_answers import check_answer_bounds, link_answers_top
from codnn.hw.formal.network import axi_weights_top, onchip_weights_top
from codnn.hw.formal.nic import (answers_top, header_counts_top, inceptionn_value_top,
                                 message_bytes_top, messages_top, settings_edge_top,
                                 terngrad_value_top, value_frames_top, waits_top)
from codnn.hw.formal.soc_reset import LinkPorts, soc_reset_top
from codnn.hw.formal.units import fmix32_top, skid_top
from codnn.hw.network.gather import Gather
from codnn.hw.nic.frame_path import FramePath
from codnn.hw.nic.maxabs import MaxAbs
from codnn.hw.nic.registry import NIC_ENGINES
from codnn.hw.nic.ring_links import RingLinks
from codnn.hw.soc.link import HostLink
from codnn.hw.soc.link_frames import LinkFrames
from codnn.hw.soc.nic import NicCore, NicSoc
from codnn.hw.soc.systolic import SystolicSoc
from codnn.hw.soc.tq import TqSoc
from codnn.hw.systolic import ColumnCombinedArray
from codnn.hw.tq.array import TermQuantArray
from codnn.hw.tq.encoder import TermEncoder
from codnn.hw.tq.lister import TermLister
from codnn.hw.tq.mac import PMac, TMac
from codnn.hw.tq.revealer import TermRevealer

__all__ = ["ProofSpec", "PROOFS"]


@dataclass(frozen=True)
class ProofSpec:
    """A design with properties: ``build(**params)`` gives the top module; ``params``
    their defaults; ``mode`` and ``depth`` what shows them (k-induction closes at that
    depth); ``properties`` says what is asserted, in words; ``quick``: it ends in
    seconds and runs in the test suite (the others take minutes; ``codnn prove all``
    runs every proof)."""

    build: object
    params: dict
    mode: str
    depth: int
    properties: tuple
    quick: bool = True


def _streams_proof(factory, params, what):
    """The stream rules of every output of ``factory(**params)``, proved by k-induction."""
    return ProofSpec(lambda **settings: stream_engine_top(factory(**settings)), params,
                     "prove", 3, (f"{what}: every output stream keeps the stream rules "
                                  "whatever its inputs (good, bad or cut messages), its "
                                  "settings and its sinks do",))


#: Engines whose first output frame lies past what bmc reaches: the Rice loopback gives
#: nothing before its compressor has coded a block of 16 values and its decompressor
#: decoded it (depth 16 sees no frame, depth 40 did not end in 10 minutes).
_FRAMES_OUT_OF_REACH = {"rice_loopback"}


#: Each NIC engine's longest input wait with its output always ready (``waits_top``, one
#: lane, ``max_values`` 4) and the bmc depth that shows it: a bound one cycle shorter
#: fails within a few cycles, this one holds to the depth (any settings at any cycle, so
#: the waits include a message taken in ``bypass`` waiting for the previous message's
#: values to leave).
_INPUT_WAITS = {"compressor": (4, 16), "decompressor": (15, 20), "terngrad": (4, 16),
                "terngrad_decoder": (6, 16), "maxabs": (4, 16)}


#: The engines whose settings proof runs, and its depth: past the first output beat. The
#: two-copy check grows fast with depth (the compressor: 9.6 s at 4, 46 s at 8, over 600 s
#: at 12, short of its latency of 12 and the first value beat out), so the engines with
#: long pipelines are not listed.
_SETTINGS_DEPTHS = {"terngrad_decoder": 6}


def _array(rows, cols, alpha, bitserial):
    return ColumnCombinedArray(rows=rows, cols=cols, alpha=alpha,
                               mac="bitserial" if bitserial else "parallel", out_bits=8)


def _tq_array(rows, cols, g, alpha, beta):
    return TermQuantArray(rows=rows, cols=cols, g=g, alpha=alpha, beta=beta)


def _link_answers(timeout, stall, answer):
    """``link_answers_top`` on the link's frames, its bounds checked before they are
    built."""
    check_answer_bounds(timeout, stall, answer)
    return link_answers_top(LinkFrames(timeout=timeout), stall, answer)


#: The TQ array the proofs take by default.
_TQ_PARAMS = {"rows": 2, "cols": 2, "g": 2, "alpha": 2, "beta": 1}


PROOFS = {
    "skid": ProofSpec(skid_top, {"width": 8}, "prove", 4, (
        "o keeps the stream rules (a beat held stays, unchanged)",
        "the beats held (o.valid, and the spare while free is low) are the beats written "
        "and not yet given; the spare holds one only behind o")),
    "skid_order": ProofSpec(lambda width=8: skid_top(width, order=True), {"width": 8},
                            "bmc", 12, (
        "the k-th beat out is the k-th beat written (any k < 16): no loss, reorder or "
        "copy",)),
    "fmix32": ProofSpec(fmix32_top, {}, "bmc", 12, (
        "o keeps the stream rules whatever the sink does",
        "at most 5 beats in flight; never more beats out than in")),
    "fmix32_latency": ProofSpec(lambda: fmix32_top(latency_only=True), {}, "prove", 8, (
        "with the sink always ready: i always ready, and each beat out exactly 5 cycles "
        "after it went in",)),
    **{name: _streams_proof(lambda lanes, e=engine: e.component(lanes=lanes), {"lanes": 1},
                            f"the {name}") for name, engine in NIC_ENGINES.items()},
    **{f"{name}_frames": ProofSpec(
        lambda lanes, max_values, e=engine: value_frames_top(e, lanes, max_values),
        {"lanes": 1, "max_values": 20}, "bmc", 16, (
            f"the {name}: every output frame is a descriptor with a count n of at most "
            f"max_values, then exactly ceil(n / lanes) value beats, last on the final one "
            f"only, whatever bytes come in",), quick=False)
       for name, engine in NIC_ENGINES.items()
       if engine.gives == "values" and name not in _FRAMES_OUT_OF_REACH},
    **{f"{name}_messages": ProofSpec(
        lambda lanes, e=engine: messages_top(e.component(lanes=lanes)), {"lanes": 1}, "bmc", 12, (
            f"the {name}: no output message begins before an input message has, one out "
            f"for each in at most, whatever the messages, the sink and the resets do",),
        quick=False)
       for name, engine in NIC_ENGINES.items()},
    **{f"{name}_waits": ProofSpec(
        lambda lanes, max_values, wait, e=NIC_ENGINES[name]: waits_top(
            e.component(lanes=lanes, max_values=max_values), wait),
        {"lanes": 1, "max_values": 4, "wait": wait}, "bmc", depth, (
            f"the {name} with its output always ready: an input beat on offer is taken "
            f"within {wait} cycles, whatever the messages and the settings are",),
        quick=False)
       for name, (wait, depth) in _INPUT_WAITS.items()},
    "terngrad_bytes": ProofSpec(
        lambda max_values: message_bytes_top(
            NIC_ENGINES["terngrad"].component(lanes=1, max_values=max_values), max_values,
            terngrad_message_size),
        {"max_values": 4}, "bmc", 20, (
            "the TernGrad encoder with good value messages in and its sink at random: each "
            "message out carries exactly message_size(n) bytes (codnn.golden.terngrad: the "
            "8-byte header and ceil(n / 4) code bytes) for the n values of its message in",),
        quick=False),
    "terngrad_decoder_counts": ProofSpec(
        lambda lanes, max_values: header_counts_top(
            NIC_ENGINES["terngrad_decoder"].component(lanes=lanes, max_values=max_values),
            max_values),
        {"lanes": 1, "max_values": 4}, "bmc", 12, (
            "the TernGrad decoder with messages of any bytes past a header whose count is "
            "at most max_values (cut short, too long, any scaler and codes): each output "
            "frame's count is its input message's header count, and the frame is that "
            "many values",), quick=False),
    "maxabs_answers": ProofSpec(
        lambda max_values, answer: answers_top(MaxAbs(lanes=1, max_values=max_values),
                                               max_values, answer),
        {"max_values": 4, "answer": 4}, "bmc", 14, (          # MaxAbs.latency at one lane
            "max-abs with good value messages in, its output always ready: each message's "
            "maximum leaves at most its latency (4 cycles at one lane) after the message's "
            "last beat was taken",), quick=False),
    **{f"{name}_settings": ProofSpec(
        lambda lanes, max_values, e=NIC_ENGINES[name]: settings_edge_top(e, lanes, max_values),
        {"lanes": 1, "max_values": 20}, "bmc", depth, (
            f"the {name}: two copies, one with each message's settings held as documented, "
            f"the other with the same values only at the edge that takes a message's first "
            f"beat and any at every other cycle, give the same outputs (streams, readies, "
            f"counters, flags) at every cycle",))
       for name, depth in _SETTINGS_DEPTHS.items()},
    "systolic": _streams_proof(_array, {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0},
                               "the column-combined array (weights, data, results)"),
    "tq_array": _streams_proof(_tq_array, _TQ_PARAMS, "the TQ array"),
    "systolic_beats": ProofSpec(
        lambda **settings: array_beats_top(_array(**settings)),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0}, "bmc", 24, (
            "the column-combined array: never more results out than data beats in, and at "
            "most fifo_depth data beats whose results have not left, whatever its inputs, "
            "sinks and resets do",), quick=False),
    "systolic_values": ProofSpec(
        lambda rows, cols, alpha, bitserial, reset: array_values_top(ColumnCombinedArray(
            rows=rows, cols=cols, alpha=alpha, weight_bits=2, data_bits=2, acc_bits=4,
            mac="bitserial" if bitserial else "parallel"), reset=bool(reset)),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0, "reset": 1}, "bmc", 16, (
            "the column-combined array (2-bit weights and data, 4-bit sums): the k-th "
            "result since a reset is the k-th data beat's sum with its own tile's weights: "
            "no tile computes with a bank being written or another tile's, and nothing of "
            "the work before a reset comes out after it",)),
    "tq_array_values": ProofSpec(
        lambda rows, cols, g, alpha, beta, reset: array_values_top(TermQuantArray(
            rows=rows, cols=cols, g=g, alpha=alpha, beta=beta, mag_bits=2, acc_bits=6),
            reset=bool(reset)),
        {"rows": 2, "cols": 2, "g": 2, "alpha": 2, "beta": 1, "reset": 1}, "bmc", 22, (
            "the TQ array (2-bit magnitudes, 6-bit sums): the k-th result since a reset is "
            "the k-th data beat's sum of its weight terms times the data values they name, "
            "truncated to beta terms, with its own tile's weights; nothing of the work "
            "before a reset comes out after it",), quick=False),
    "systolic_banks": ProofSpec(
        lambda rows, cols, alpha, bitserial: array_banks_top(ColumnCombinedArray(
            rows=rows, cols=cols, alpha=alpha, weight_bits=2, data_bits=2, acc_bits=4,
            mac="bitserial" if bitserial else "parallel")),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0}, "prove", 8, (
            "the column-combined array, its inputs anyhow and a reset at "
            "any cycle: whenever a cell reads a bank for a beat in flight, the bank holds "
            "that beat's tile's weights in that cell (written by the tile's own weight "
            "beat, and not since): no tile computes with a bank being written or with "
            "another tile's",)),
    "systolic_latency": ProofSpec(
        lambda **settings: array_latency_top(_array(**settings)),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0}, "bmc", 20, (
            "the column-combined array with its result sink always ready: each result "
            "leaves exactly its latency after its data beat went in, and none otherwise",)),
    "tq_array_latency": ProofSpec(
        lambda **settings: array_latency_top(_tq_array(**settings)), _TQ_PARAMS, "bmc", 24, (
            "the TQ array with its result sink always ready: each result leaves exactly "
            "its latency after its data beat went in, and none otherwise",), quick=False),
    "tq_array_beats": ProofSpec(
        lambda **settings: array_beats_top(_tq_array(**settings)), _TQ_PARAMS, "bmc", 24, (
            "the TQ array: never more results out than data beats in, and at most "
            "fifo_depth data beats whose results have not left",), quick=False),
    "inceptionn_value": ProofSpec(inceptionn_value_top, {}, "prove", 1, (
        "every float32 and every bound 7..15 through the INCEPTIONN-style compressor's "
        "class and payload and the decompressor's decode: the value of semantics "
        "section 4's table, and a finite |x| < 1 within 2**-b below |x|, its sign kept",)),
    "terngrad_value": ProofSpec(terngrad_value_top, {}, "prove", 1, (
        "every finite float32 g, finite non-negative scaler s and 24-bit uniform u through "
        "a TernGrad encoder lane's product and comparison: g is kept exactly when "
        "|g| * 2**24 > u * s (semantics section 5)",), quick=False),
    "block_dot": _streams_proof(lambda g: BlockDot(g=g), {"g": 4}, "the block dot unit"),
    "term_encoder": _streams_proof(
        lambda lanes, mag_bits: TermEncoder(lanes=lanes, mag_bits=mag_bits),
        {"lanes": 2, "mag_bits": 7}, "the TQ term encoder"),
    "term_revealer": _streams_proof(
        lambda lanes, group, budget, mag_bits: TermRevealer(
            lanes=lanes, group=group, budget=budget, mag_bits=mag_bits),
        {"lanes": 2, "group": 2, "budget": 3, "mag_bits": 7}, "the TQ term revealer"),
    "term_lister": _streams_proof(
        lambda lanes, slots, mag_bits: TermLister(lanes=lanes, slots=slots, mag_bits=mag_bits),
        {"lanes": 2, "slots": 3, "mag_bits": 7}, "the TQ term lister"),
    "tmac": _streams_proof(lambda mag_bits, acc_bits: TMac(mag_bits=mag_bits, acc_bits=acc_bits),
                           {"mag_bits": 7, "acc_bits": 16}, "the term-pair MAC"),
    "pmac": _streams_proof(lambda mag_bits, acc_bits: PMac(mag_bits=mag_bits, acc_bits=acc_bits),
                           {"mag_bits": 7, "acc_bits": 16}, "the parallel MAC"),
    "gather": _streams_proof(
        lambda cols, alpha, lanes, depth: Gather(cols=cols, alpha=alpha, lanes=lanes,
                                                 depth=depth),
        {"cols": 2, "alpha": 3, "lanes": 2, "depth": 8},
        "the network engine's gather (its starts, geometry, table and writes at any cycle)"),
    "onchip_weights": ProofSpec(
        onchip_weights_top, {"word_bits": 16, "words": 16}, "prove", 3, (
            "the network engine's on-chip weight reader, its runs started and its memory "
            "written only while no word is on offer: o keeps the stream rules",)),
    "axi_weights": ProofSpec(axi_weights_top, {"word_bits": 32}, "prove", 3, (
        "the network engine's AXI4 weight reader: the read address channel keeps AXI4's "
        "handshake rule, every burst is word-aligned and inside its 4 KB page, and o "
        "keeps the stream rules, for any runs from any word",)),
    "frame_path": _streams_proof(
        lambda decompress, width, max_frame: FramePath(
            direction="decompress" if decompress else "compress", width=width,
            max_frame=max_frame),
        {"decompress": 0, "width": 1, "max_frame": 64},
        "the frame path (any frames, good, bad, cut or too long)"),
    "ring_links": dataclasses.replace(_streams_proof(
        lambda nodes, lanes: RingLinks(nodes=nodes, lanes=lanes), {"nodes": 2, "lanes": 1},
        "the emulated ring's links (each node's flat AXI4-Stream ports)"), quick=False),
    "nic_core": _streams_proof(
        lambda lanes, quiet: NicCore(NIC_ENGINES["terngrad_decoder"].component(lanes=lanes),
                                     quiet=quiet),
        {"lanes": 1, "quiet": 64},
        "the NIC engines' SoC shell (its configuration, data and result streams; the "
        "TernGrad decoder inside)"),
    "host_link": _streams_proof(
        lambda divisor: HostLink(divisor=divisor), {"divisor": 4},
        "the host link (its request, response and response data streams, the UART line "
        "any bits)"),
    "link_frames": _streams_proof(
        lambda timeout: LinkFrames(timeout=timeout), {"timeout": 14},
        "the host link's frames (the bytes they send and the requests they offer, any "
        "bytes in)"),
    "soc_reset": ProofSpec(
        lambda rows, cols, depth: soc_reset_top(SystolicSoc(
            rows=rows, cols=cols, weight_bits=2, data_bits=2, acc_bits=4, depth=depth,
            link=LinkPorts())),
        {"rows": 2, "cols": 2, "depth": 1}, "prove", 4, (
            "the systolic array's board top, its requests any at any cycle as the link "
            "gives them and a reset at any cycle: RUN and WRITE_DATA are answered OK only "
            "when every weight row has been written since the last RESET (RESET forgets "
            "every row), NO_WEIGHTS only when one has not, and a response header comes "
            "only for a request taken",)),
    "tq_soc_reset": ProofSpec(
        lambda rows, cols, depth: soc_reset_top(TqSoc(
            rows=rows, cols=cols, g=2, alpha=2, beta=1, mag_bits=3, acc_bits=8, depth=depth,
            link=LinkPorts())),
        {"rows": 2, "cols": 2, "depth": 1}, "prove", 4, (
            "the TQ array's board top, as soc_reset: RUN and WRITE_DATA answered OK only "
            "with every weight row written since the last RESET, NO_WEIGHTS only without",)),
    "nic_soc_reset": ProofSpec(
        lambda lanes, depth: soc_reset_top(NicSoc(kind="terngrad_decoder", lanes=lanes,
                                                  depth=depth, link=LinkPorts())),
        {"lanes": 2, "depth": 2}, "prove", 4, (
            "a NIC engine's board top (the TernGrad decoder), as soc_reset: RUN and "
            "WRITE_DATA answered OK only with the configuration word written since the "
            "last RESET, NO_WEIGHTS only without",)),
    "host_link_answers": ProofSpec(
        lambda timeout, stall, answer: _link_answers(timeout, stall, answer),
        {"timeout": 14, "stall": 1, "answer": 12}, "prove", 4, (
            "the host link's frames, any bytes in at any cycles, the sink ready once in "
            "every stall + 1 cycles, the executor anyhow but answering only a request it "
            "took: every frame sent is whole (SYNC, status, length, the bytes, their "
            "CRC), an error answer when no request is served",
            "a frame received is decided by its MAX_PAYLOAD + 6-th byte, one too long "
            "dropped by its length + 6-th, neither outlives timeout quiet cycles; an "
            "error found is answered within answer cycles; the line quiet for timeout + "
            "answer + 2 cycles with no request on offer or served, the link waits for a "
            "SYNC",
            "a frame is offered as a request exactly when its CRC is right (a ghost "
            "CRC-16 of the frame received), else answered BAD_CRC; one longer than "
            "MAX_PAYLOAD is dropped with BAD_LENGTH")),
}
