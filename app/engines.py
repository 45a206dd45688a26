# amaranth: UnusedElaboratable=no
# (components built here are either elaborated by a flow or dropped when a flow rejects its
# workload with a clear error; the warning would only repeat that error)
"""The engines the command line knows: how to build each one, its parameters, its testbench.

An ``Engine`` turns command-line parameters into an Amaranth component, says which cocotb
testbench holds it against the golden model and with what configuration. Its Verilog
module is named after the engine. New engines register here and every command (generate,
simulate, synth, demo) picks them up.
"""

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS, check_bound_bits
from codnn.golden.network_program import ACT_PORTS, WEIGHT_PORTS
from codnn.golden.packets import DEFAULT_MAX_FRAME, DIRECTIONS
from codnn.golden.systolic import (MAC_KINDS, REQUANT_BITS, REQUANT_KINDS, check_fits,
                                   mac_timing)
from codnn.golden.term_quant import ENCODINGS
from codnn.golden.workloads import quantize_symmetric
from codnn.hw.bfp import BlockAccumulate, BlockDot, BlockRound, SgdUpdate
from codnn.hw.common.fmix32 import Fmix32Unit
from codnn.hw.nic import NIC_ENGINES
from codnn.hw.nic import AxiStreamTop
from codnn.hw.nic.frame_path import FramePath
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.network import NetworkEngine
from codnn.hw.soc import NetworkSoc, NicSoc, SystolicSoc, TqSoc
from codnn.hw.soc.ethernet_board import CORE_CLOCK_HZ, EthernetBoardTop
from codnn.hw.soc.ethernet_bump import EthernetBump
from codnn.hw.systolic import ColumnCombinedArray
from codnn.hw.tq import PMac, TermQuantArray, TMac
from codnn.sim.runner import save_workload

from .gradfile import load_gradients
from .packfile import load_packed

__all__ = ["Param", "Engine", "ENGINES", "get_engine", "BoardDesign", "BOARD_DESIGNS"]


@dataclass(frozen=True)
class Param:
    """One parameter, as a command-line option ``--name`` (``bool``: ``--name/--no-name``;
    a default of None means "not set")."""

    name: str
    type: type
    default: object
    help: str
    choices: tuple = None


@dataclass(frozen=True)
class Engine:
    """An engine the command line can generate, simulate and synthesize.

    Attributes
    ----------
    name, summary : str
    params : tuple of Param
        Generator parameters; ``build(**params)`` returns the component and validates them.
    sim_params : tuple of Param
        Workload parameters of ``simulate`` (beyond beats, stalls and seed).
    testbench : str
        cocotb test module that checks the component against golden.
    tb_config : callable
        ``tb_config(component, sim_params, beats, idle, backpressure, build_root)`` ->
        testbench config; raises ``ValueError`` for a workload that cannot run.
    throughput : callable
        ``(component)`` -> throughput description (the latency is the component's
        ``latency`` property, the same on every engine).
    rate : callable
        ``(component)`` -> ``(items, unit)``: steady-state work per cycle (``codnn sweep``
        multiplies it by Fmax).
    """

    name: str
    summary: str
    params: tuple
    build: object
    testbench: str
    tb_config: object
    throughput: object
    rate: object
    sim_params: tuple = ()

    def default_params(self):
        return {p.name: p.default for p in self.params}


def _packed_workload(dut, path, layer, build_root):
    """Load a user's packed layer, quantize float weights, check it fits the array, and
    write it where the testbench reads it. Returns that path."""
    layers = load_packed(path)
    if layer is None:
        if len(layers) > 1:
            raise ValueError(f"{path} holds layers {', '.join(layers)}: choose one with "
                             f"--layer")
        layer = next(iter(layers))
    if layer not in layers:
        raise ValueError(f"{path} has no layer {layer!r}; it has {', '.join(layers)}")
    packed = layers[layer]
    if not np.all(np.equal(np.mod(packed.P, 1), 0)):
        weights, _ = quantize_symmetric(packed.P, dut.weight_bits)
        packed = dataclasses.replace(packed, P=weights)
    check_fits(packed, alpha=dut.alpha, weight_bits=dut.weight_bits)
    return save_workload(build_root, packed.to_arrays())


def _stage_config(dut, sim):
    """An array's simulation settings with its output stage's: ``requant`` and a shift
    (and multiplier) in range."""
    if dut.out_bits is None:
        return {**sim, "requant": dut.requant}
    top = dut.acc_bits + REQUANT_BITS * (dut.requant == "multiplier")
    if not 0 <= sim["shift"] < top:
        raise ValueError(f"Shift must lie in 0..{top - 1}, not {sim['shift']}")
    if not 0 <= sim["multiplier"] < 1 << REQUANT_BITS:
        raise ValueError(f"Multiplier must lie in 0..{(1 << REQUANT_BITS) - 1}, not "
                         f"{sim['multiplier']}")
    return {**sim, "requant": dut.requant}


def _systolic_config(dut, sim, beats, idle, backpressure, build_root):
    config = {"rows": dut.rows, "cols": dut.cols, "alpha": dut.alpha,
              "weight_bits": dut.weight_bits, "data_bits": dut.data_bits,
              "data_signed": dut.data_signed, "acc_bits": dut.acc_bits, "mac": dut.mac,
              "out_bits": dut.out_bits, "vectors": beats, "idle": idle,
              "backpressure": backpressure, **_stage_config(dut, sim)}
    if sim["packed"]:
        config["packed"] = _packed_workload(dut, sim["packed"], sim["layer"], build_root)
    return config


def _network_config(dut, sim, beats, idle, backpressure, build_root):
    """``beats`` images of a network with every step kind
    (``codnn.golden.workloads.residual_network``, layers packed for the engine's alpha) through
    the engine, compiled for it: the program, the weight image and the images in the
    build folder."""
    from codnn.golden.network_program import encode_program
    from codnn.golden.workloads import residual_network
    from codnn.model.compile import compile_network
    rng = np.random.default_rng(sim["workload_seed"])
    config = dut.config
    compiled = compile_network(residual_network(rng, alpha=min(config.alpha, 2),
                                                requant=config.requant), config)
    words = len(encode_program(compiled.program)) // 4
    if words > dut.params["program_words"]:
        raise ValueError(f"the workload's program takes {words} program words, the engine "
                         f"holds {dut.params['program_words']}")
    return {"program": compiled.program.to_dict(),
            "image": save_workload(build_root, np.frombuffer(compiled.image, np.uint8)),
            "inputs": save_workload(build_root, rng.integers(0, 256, (beats, 3, 8, 8))),
            "weight_port": dut.params["weight_port"]}


def _network_rate(dut):
    """The engine's peak: every cell busy, a data beat every ``beat_cycles`` cycles (a
    layer whose groups take at most two streams: one round of gather reads)."""
    config = dut.config
    timing = mac_timing(config.mac, data_bits=config.out_bits, weight_bits=config.weight_bits,
                        cols=config.cols, acc_bits=config.acc_bits)
    return config.rows * config.cols / timing["beat_cycles"], "MAC"


def _tq_config(dut, sim, beats, idle, backpressure, build_root):
    config = {"rows": dut.rows, "cols": dut.cols, "g": dut.g, "alpha": dut.alpha,
              "beta": dut.beta, "mag_bits": dut.mag_bits, "encoding": dut.encoding,
              "acc_bits": dut.acc_bits, "out_bits": dut.out_bits, "vectors": beats, "idle": idle,
              "backpressure": backpressure, **_stage_config(dut, sim)}
    for name in ("layer_rows", "layer_cols"):
        if sim[name] < 1:
            raise ValueError(f"{name.replace('_', ' ').capitalize()} must be positive, "
                             f"not {sim[name]}")
    return config


def _nic_config(name, dut, sim, beats, idle, backpressure, build_root):
    """Messages of 0, 1, 7, 8, 9 values, then ``beats`` beats' worth in messages of
    ``message_values`` (or the user's gradients, as float32 in the build folder), plus the
    bad messages with ``corrupt``."""
    lanes = len(dut.s_axis_tkeep) // 4
    size = sim["message_values"]
    if size < 1:
        raise ValueError(f"Message size must be a positive number of values, not {size}")
    if size > dut.engine.max_values:
        raise ValueError(f"Message size {size} is above the engine's --max-values "
                         f"{dut.engine.max_values}")
    if "bound_bits" in sim:
        check_bound_bits(sim["bound_bits"])
    if sim.get("scaler") is not None and not (np.isfinite(sim["scaler"]) and sim["scaler"] > 0):
        raise ValueError(f"Scaler must be a positive number, not {sim['scaler']}")
    total = beats * lanes
    counts = [0, 1, 7, 8, 9] + [size] * (total // size) + ([total % size] if total % size
                                                            else [])
    config = {"engine": name, "lanes": lanes, "counts": counts, "idle": idle,
              "backpressure": backpressure, **sim}
    if sim["gradients"]:
        grads = load_gradients(sim["gradients"]).reshape(-1)
        digest = hashlib.sha256(grads.tobytes()).hexdigest()[:16]
        out = Path(build_root) / "workloads" / f"gradients-{digest}.npy"
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, grads)
        config["gradients"] = str(out)
    return config


_INCEPTIONN_PARAMS = (Param("bound_bits", int, DEFAULT_BOUND_BITS, "error bound 2**-b"),)
_TERNGRAD_PARAMS = (Param("scaler", float, None, "TernGrad scaler (default 2.5 x the std of "
                          "the values)"),)


def _nic_engine(descriptor):
    """A NIC engine's entry, from its descriptor (``codnn.hw.nic.NicDescriptor``): its workload
    options follow its codec (the bound for INCEPTIONN, the scaler for an engine that
    ternarizes values)."""
    name = descriptor.name
    codec_params = {"inceptionn": _INCEPTIONN_PARAMS,
                    "terngrad": _TERNGRAD_PARAMS if descriptor.takes == "values" else ()
                    }.get(descriptor.codec, ())
    return Engine(
        name=name, summary=descriptor.summary,
        params=(Param("lanes", int, 8, "float32 values per beat (1, 2, 4, 8, 16)"),
                Param("max_values", int, DEFAULT_MAX_VALUES, "largest value count a message "
                      "may declare (a larger one is dropped as bad)")),
        build=lambda lanes, max_values: AxiStreamTop(descriptor.component(
            lanes=lanes, max_values=max_values)),
        sim_params=(*codec_params,
                    Param("message_values", int, 4096, "values per message"),
                    Param("corrupt", bool, True, "also send bad messages (error flag, "
                          "recovery)"),
                    Param("gradients", str, None, "send these gradients (.npy, or .npz: "
                          "its arrays in order) instead of random values")),
        testbench="codnn.sim.tb_nic",
        tb_config=lambda dut, sim, beats, idle, backpressure, build_root: _nic_config(
            name, dut, sim, beats, idle, backpressure, build_root),
        throughput=lambda dut: descriptor.full_rate.format(lanes=dut.engine.lanes),
        rate=lambda dut: (dut.engine.lanes, "float32"))


def _frame_path_config(dut, sim, beats, idle, backpressure, build_root):
    """Fuzzed frames (``frames`` of them), or a capture's (``pcap``)."""
    check_bound_bits(sim["bound_bits"])
    if sim["pcap"] is None and sim["frames"] < 1:
        raise ValueError(f"Frame count must be positive, not {sim['frames']}")
    if sim["pcap"] is not None:
        from codnn.sim.pcapfile import read_frames
        read_frames(sim["pcap"])                # a capture that cannot be read: one line
        sim = {**sim, "pcap": str(Path(sim["pcap"]).resolve())}
    if sim["pcap_out"] is not None:
        sim = {**sim, "pcap_out": str(Path(sim["pcap_out"]).resolve())}
    path = dut.engine
    return {"direction": path.direction, "width": path.width, "max_frame": path.max_frame,
            "idle": idle, "backpressure": backpressure, **sim}


#: The training step's units' parameters.
_TRAINING_BLOCK = (Param("g", int, 16, "values per block"),
                   Param("m", int, 8, "widest mantissa (magnitude bits, 2..8)"))


def _unit_engine(name, component, summary, params, count, rate, item):
    """A stream unit of the block floating point family: built from its parameters, its
    testbench ``codnn.sim.tb_NAME`` given them, ``count`` items and the unit's latency;
    one ``item`` a cycle."""
    return Engine(
        name=name, summary=summary, params=params,
        build=lambda **p: component(**p), testbench=f"codnn.sim.tb_{name}",
        tb_config=lambda dut, sim, beats, idle, backpressure, build_root: {
            **{p.name: getattr(dut, p.name) for p in params}, count: beats, "idle": idle,
            "backpressure": backpressure, "latency": dut.latency},
        throughput=lambda dut: f"1 {item}/cycle ({rate(dut)[0]} {rate(dut)[1]}s/cycle)",
        rate=rate)


def _mac_engine(name, cls, summary, sim_params, group_beats):
    return Engine(
        name=name, summary=summary,
        params=(Param("mag_bits", int, 7, "magnitude bits of the values"),
                Param("acc_bits", int, 32, "accumulator width")),
        build=lambda **p: cls(**p),
        sim_params=sim_params,
        testbench="codnn.sim.tb_tq",
        tb_config=lambda dut, sim, beats, idle, backpressure, build_root: {
            "unit": name, "mag_bits": dut.mag_bits, "acc_bits": dut.acc_bits, "groups": beats,
            "idle": idle, "backpressure": backpressure, "latency": dut.latency,
            **{("alpha" if key == "budget" else key): value for key, value in sim.items()}},
        throughput=lambda dut: f"1 {group_beats}/cycle",
        rate=lambda dut: (1, group_beats))


ENGINES = {engine.name: engine for engine in [
    Engine(
        name="fmix32",
        summary="pipelined counter-based hash fmix32 (TernGrad's random source)",
        params=(Param("lanes", int, 1, "values per beat"),),
        build=lambda lanes: Fmix32Unit(lanes=lanes),
        testbench="codnn.sim.tb_fmix32",
        tb_config=lambda dut, sim, beats, idle, backpressure, build_root: {
            "lanes": dut.lanes, "beats": beats, "idle": idle,
            "backpressure": backpressure, "latency": dut.latency},
        throughput=lambda dut: f"{dut.lanes} values/cycle",
        rate=lambda dut: (dut.lanes, "hash"),
    ),
    Engine(
        name="systolic",
        summary="column-combined weight-stationary systolic array",
        params=(Param("rows", int, 4, "array rows"),
                Param("cols", int, 4, "array columns"),
                Param("alpha", int, 4, "data streams per column (1 = dense array)"),
                Param("weight_bits", int, 8, "weight width, two's complement"),
                Param("data_bits", int, 8, "data width"),
                Param("data_signed", bool, False, "signed data"),
                Param("acc_bits", int, 32, "accumulator width"),
                Param("mac", str, "parallel", "MAC kind", MAC_KINDS),
                Param("out_bits", int, None, "output stage width (default: none)"),
                Param("requant", str, "shift", "the output stage: a shift, or a 16-bit "
                      "multiplier and a shift", REQUANT_KINDS)),
        build=lambda **p: ColumnCombinedArray(**p),
        sim_params=(Param("layer_rows", int, 12, "filters of the random layer"),
                    Param("layer_cols", int, 40, "input channels of the random layer"),
                    Param("sparsity", float, 0.8, "fraction of weights pruned"),
                    Param("gamma", float, 0.5, "allowed conflicts per row"),
                    Param("shift", int, 8, "output stage shift"),
                    Param("multiplier", int, 1, "output stage multiplier (requant "
                          "multiplier)"),
                    Param("packed", str, None, "run this packed layer file (codnn pack) "
                          "instead of a random layer; float weights are quantized"),
                    Param("layer", str, None, "layer of the packed file")),
        testbench="codnn.sim.tb_systolic",
        tb_config=_systolic_config,
        throughput=lambda dut: (f"1 vector/{dut.beat_cycles} cycles "
                                f"({dut.rows * dut.cols} MACs/vector)"
                                if dut.beat_cycles > 1 else
                                f"1 vector/cycle ({dut.rows * dut.cols} MACs/cycle)"),
        rate=lambda dut: (dut.rows * dut.cols / dut.beat_cycles, "MAC"),
    ),
    Engine(
        name="tq",
        summary="term-quantization array of tMACs (term revealing, lockstep term pairs)",
        params=(Param("rows", int, 4, "array rows"),
                Param("cols", int, 4, "array columns (groups per row)"),
                Param("g", int, 8, "values per group"),
                Param("budget", int, 12, "weight terms per group (the TQ paper's alpha)"),
                Param("beta", int, 3, "terms kept per data value"),
                Param("mag_bits", int, 7, "magnitude bits of weights and data"),
                Param("encoding", str, "naf", "data term encoding", ENCODINGS),
                Param("acc_bits", int, 32, "accumulator width"),
                Param("out_bits", int, None, "output stage width (default: none)"),
                Param("requant", str, "shift", "the output stage: a shift, or a 16-bit "
                      "multiplier and a shift", REQUANT_KINDS)),
        build=lambda budget, **p: TermQuantArray(alpha=budget, **p),
        sim_params=(Param("layer_rows", int, 8, "outputs of the random layer"),
                    Param("layer_cols", int, 64, "inputs of the random layer"),
                    Param("shift", int, 12, "output stage shift"),
                    Param("multiplier", int, 1, "output stage multiplier (requant "
                          "multiplier)")),
        testbench="codnn.sim.tb_tq_array",
        tb_config=_tq_config,
        throughput=lambda dut: (f"1 vector/{dut.beat_cycles} cycles "
                                f"({dut.rows * dut.cols} groups of {dut.g} MACs)"),
        rate=lambda dut: (dut.rows * dut.cols * dut.g / dut.beat_cycles, "MAC"),
    ),
    Engine(
        name="network",
        summary="the network engine: a whole network from a program and a weight image "
                "(the array, the gather, pooling and residual adds, a sequencer)",
        params=(Param("rows", int, 4, "array rows (lanes of the buffers' words)"),
                Param("cols", int, 4, "array columns"),
                Param("alpha", int, 2, "data streams per column"),
                Param("mac", str, "bitserial", "MAC kind", MAC_KINDS),
                Param("act_words", int, 512, "activation buffer words"),
                Param("acc_words", int, 16, "accumulator buffer words"),
                Param("psum_words", int, 64, "partial-sum buffer words"),
                Param("weight_words", int, 1024, "weight memory words (2 x cols bytes)"),
                Param("program_words", int, 256, "program memory words (32 bits)"),
                Param("weight_port", str, "onchip", "the weight image on chip, or in external "
                      "memory on an AXI4 read port", WEIGHT_PORTS),
                Param("act_port", str, "none", "external activation memory on an AXI4 port "
                      "(load and store steps), or none", ACT_PORTS),
                Param("gather_ports", int, 2, "read ports of each lane bank of the "
                      "activation buffer (stream slots the gather reads a cycle)"),
                Param("weight_ports", int, 2, "read ports of the on-chip weight memory: 2 "
                      "reads a tile's gather table beside its cells, 1 after them"),
                Param("requant", str, "shift", "the output stage: a shift, or a 16-bit "
                      "multiplier per row and a shift", REQUANT_KINDS)),
        build=lambda **p: NetworkEngine(**p),
        sim_params=(Param("workload_seed", int, 1, "seed of the random network and "
                          "images"),),
        testbench="codnn.sim.tb_network_engine",
        tb_config=_network_config,
        throughput=lambda dut: "a network's images one after another, cycles by its program",
        rate=_network_rate,
    ),
    *(_nic_engine(descriptor) for descriptor in NIC_ENGINES.values()),
    Engine(
        name="framepath",
        summary="NIC frame path: Ethernet/IPv4/UDP gradient frames compressed (or restored) "
                "in flight, AXI4-Stream",
        params=(Param("direction", str, "compress", "compress (sender) or decompress "
                      "(receiver)", DIRECTIONS),
                Param("width", int, 8, "bytes per beat (1 for 1 GbE, 8 for 10 GbE)"),
                Param("max_frame", int, DEFAULT_MAX_FRAME, "largest frame in or out, bytes "
                      "without FCS")),
        build=lambda **p: AxiStreamTop(FramePath(**p)),
        sim_params=(*_INCEPTIONN_PARAMS,
                    Param("frames", int, 1000, "fuzzed frames to send (without --pcap)"),
                    Param("pcap", str, None, "replay this capture's frames instead"),
                    Param("pcap_out", str, None, "write the frames the RTL sent to this "
                          "capture")),
        testbench="codnn.sim.tb_frame_path",
        tb_config=_frame_path_config,
        throughput=lambda dut: f"{max(4, dut.engine.width)} bytes/cycle per stage, store "
                               f"and forward",
        rate=lambda dut: (dut.engine.width, "byte"),
    ),
    _mac_engine("tmac", TMac, "term-pair MAC (one term pair per cycle)",
                (Param("g", int, 8, "values per group"),
                 Param("budget", int, 12, "weight terms per group (the TQ paper's alpha)"),
                 Param("beta", int, 3, "terms kept per data value"),
                 Param("encoding", str, "naf", "term encoding", ENCODINGS)), "term pair"),
    _mac_engine("pmac", PMac, "parallel MAC baseline (one product per cycle)",
                (Param("g", int, 8, "values per group"),), "product"),
    _unit_engine("block_dot", BlockDot, "FAST block floating point MAC: a block dot product "
                 "per cycle, its result rounded stochastically",
                 (Param("g", int, 16, "values per block"),
                  Param("m", int, 4, "mantissa magnitude bits of the operands"),
                  Param("out_m", int, 8, "mantissa magnitude bits of the result")),
                 "blocks", lambda dut: (dut.g, "MAC"), "block"),
    _unit_engine("block_round", BlockRound, "float32 values into a block of block floating "
                 "point (the shared exponent, mantissas rounded stochastically or to "
                 "nearest), a block a cycle", _TRAINING_BLOCK, "blocks",
                 lambda dut: (dut.g, "value"), "block"),
    _unit_engine("block_accumulate", BlockAccumulate, "a block pair added to a float32 sum, "
                 "the step of the BFP training step's products: the exact block dot "
                 "product, rounded to float32, then added", _TRAINING_BLOCK, "pairs",
                 lambda dut: (dut.g, "MAC"), "block pair"),
    _unit_engine("sgd_update", SgdUpdate, "the BFP training step's update: SGD with momentum "
                 "and weight decay on float32 master weights, a weight a cycle", (),
                 "weights", lambda dut: (1, "weight"), "weight"),
]}


def get_engine(name):
    """Return the engine called ``name``.

    Raises
    ------
    ValueError
        If there is no such engine; the message lists the known ones.
    """
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"Engine must be one of {', '.join(ENGINES)}, not {name!r}") from None


@dataclass(frozen=True)
class BoardDesign:
    """A board-ready top ``codnn bitstream`` builds: an engine behind the UART host link.

    ``build(divisor=..., **params)`` returns the component (``rx``, ``tx``, ``busy``
    ports); ``params`` are its command-line options. ``top(design, board)``, if set, is
    the board top that requests the design's pins and makes its clock, ``clock_hz``
    (``codnn.synth.bitstream.build_bitstream``); otherwise the design runs on the board's clock
    behind ``codnn.hw.soc.BoardTop``. ``ethernet_ports``: the Ethernet ports a board needs for it.
    """

    name: str
    summary: str
    params: tuple
    build: object
    top: object = None
    clock_hz: float = None
    ethernet_ports: int = 0

    def default_params(self):
        return {p.name: p.default for p in self.params}


def _soc_params(engine, **defaults):
    """A board design's parameters: the engine's (no output stage, so no requantization:
    the host reads the accumulators), new ``defaults``, and the depth of the vector memories."""
    return tuple(dataclasses.replace(p, default=defaults.get(p.name, p.default))
                 for p in ENGINES[engine].params if p.name not in ("out_bits", "requant")) + (
        Param("depth", int, 16, "data vectors and results held"),)


def _ethernet_top(design, board):
    return EthernetBoardTop(design, ports=board.ethernet[:2], led=board.led)


# Defaults: the systolic one fits every board; the TQ one (its edge encodes, reveals and
# lists every data value; its weight queues sit in flip-flops) and the NIC one need an ECP5
# board (the iCEBreaker takes the TQ array at 1 x 1).
BOARD_DESIGNS = {design.name: design for design in [
    BoardDesign(
        name="systolic",
        summary="the systolic array with memories for one tile (codnn.hw.soc.SystolicSoc)",
        params=_soc_params("systolic", rows=2, cols=2, alpha=2),
        build=lambda **p: SystolicSoc(**p)),
    BoardDesign(
        name="tq",
        summary="the TQ array with memories for one tile (codnn.hw.soc.TqSoc)",
        params=_soc_params("tq", rows=2, cols=2, g=4, budget=6, beta=2),
        build=lambda budget, **p: TqSoc(alpha=budget, **p)),
    BoardDesign(
        name="nic",
        summary="a NIC engine with memories for one frame in and out (codnn.hw.soc.NicSoc)",
        params=(Param("kind", str, "compressor", "NIC engine", tuple(NIC_ENGINES)),
                Param("lanes", int, 2, "float32 values per beat (1, 2, 4, 8, 16)"),
                Param("depth", int, 64, "beats held in and out")),
        build=lambda **p: NicSoc(**p)),
    BoardDesign(
        name="network",
        summary="the network engine with its program, weight and activation memories: a "
                "whole network per image over the link (codnn.hw.soc.NetworkSoc)",
        params=tuple(p for p in ENGINES["network"].params
                     if p.name not in ("weight_port", "act_port")),
        build=lambda **p: NetworkSoc(**p)),
    BoardDesign(
        name="ethernet_bump",
        summary="a bump in the wire between two Gigabit Ethernet ports: gradient frames "
                "compressed one way, restored the other (codnn.hw.nic.EthernetBump; boards with "
                "two RGMII ports)",
        params=(Param("bound_bits", int, DEFAULT_BOUND_BITS, "error bound 2**-b"),
                Param("max_frame", int, DEFAULT_MAX_FRAME, "largest frame, bytes without "
                      "FCS"),
                Param("restore", bool, True, "restore port 1's frames on their way to port "
                      "0 (off: forwarded as they are; the Colorlight's default, for room)")),
        build=lambda **p: EthernetBump(**p),
        top=_ethernet_top, clock_hz=CORE_CLOCK_HZ, ethernet_ports=2),
]}
