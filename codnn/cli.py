"""The ``codnn`` command line.

Every command has ``--help``, prints a table by default and JSON with ``--json``. Bad
arguments give one line on stderr saying what is wrong and exit code 2; a failed simulation
or synthesis exits with 1.
"""

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from golden.term_quant import ENCODINGS
from golden.value_frames import NIC_ENGINES, NicCodec, engine_frames
from sim.runner import SimulationFailure, default_build_root
from sim.simulators import SIMULATORS, SimulatorMissing
from synth.baseline import BaselineError
from synth.bitstream import BOARDS
from synth.devices import DEVICES
from synth.flow import SynthesisError
from synth.tools import ToolMissing

from . import __version__
from .engines import BOARD_DESIGNS, ENGINES
from .flows import ParameterError, generate, run_bitstream, run_simulation, run_synthesis
from .gradfile import CODECS
from .packfile import WeightFileError
from .render import err_console, print_json, print_record, print_rows
from .sweep import COLUMNS, SweepError

__all__ = ["main"]


class UsageError(Exception):
    """Bad arguments: reported in one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _number(convert, accept, expected):
    """An argparse type: ``convert`` the text, then require ``accept(value)``."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}")
        return value
    return parse


_positive_int = _number(int, lambda v: v > 0, "a positive integer")
_non_negative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
_positive_float = _number(float, lambda v: 0 < v < float("inf"), "a positive number")
_non_negative_float = _number(float, lambda v: 0 <= v < float("inf"), "a finite number >= 0")
_probability = _number(float, lambda v: 0 <= v < 1, "a probability in [0, 1)")


def _output_file(suffix=None):
    """An argparse type: the file a command writes, with ``suffix`` added unless it ends so
    (as NumPy adds ``.npz``), refused up front when it cannot be written there."""
    def parse(text):
        if not text:
            raise argparse.ArgumentTypeError("the output path is empty")
        path = Path(text)
        if suffix and not text.endswith(suffix):
            path = Path(text + suffix)
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{path} is a folder, not a file")
        if path.exists() and not path.is_file():
            raise argparse.ArgumentTypeError(f"{path} exists and is not a regular file")
        if not path.parent.is_dir():
            raise argparse.ArgumentTypeError(f"folder {path.parent} does not exist")
        if not os.access(path.parent, os.W_OK):
            raise argparse.ArgumentTypeError(f"cannot write in folder {path.parent}")
        return path
    return parse


def _output_folder(text):
    """An argparse type: the folder ``generate`` writes into (created if missing)."""
    if not text:
        raise argparse.ArgumentTypeError("the output folder is empty")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a folder")
    return path


def _add_param(parser, param, prefix, default_text=None):
    option = f"--{param.name.replace('_', '-')}"
    if default_text is None:
        default_text = "none" if param.default is None else param.default
    common = {"dest": f"{prefix}{param.name}", "default": param.default,
              "help": f"{param.help} (default {default_text})"}
    if param.type is bool:
        parser.add_argument(option, action=argparse.BooleanOptionalAction, **common)
    elif param.type is int:
        parser.add_argument(option, type=_non_negative_int, **common)
    else:
        parser.add_argument(option, type=param.type, choices=param.choices, **common)


def _add_engines(subparsers, command, help_text, add_options, with_sim_params=False,
                 required=True):
    """Add ``command ENGINE [engine options]``; return the command's parser."""
    parser = subparsers.add_parser(command, help=help_text, description=help_text)
    engines = parser.add_subparsers(dest="engine", metavar="ENGINE", required=required,
                                    parser_class=_Parser)
    for engine in ENGINES.values():
        sub = engines.add_parser(engine.name, help=engine.summary,
                                 description=f"{help_text}: {engine.summary}.")
        for param in engine.params:
            _add_param(sub, param, "param_")
        if with_sim_params:
            for param in engine.sim_params:
                _add_param(sub, param, "sim_")
        add_options(sub)
        sub.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def _build_parser():
    parser = _Parser(prog="codnn", description="Hardware generator for algorithm/hardware "
                     "co-design of deep learning.")
    parser.add_argument("--version", action="version", version=f"codnn {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     parser_class=_Parser)

    doctor = commands.add_parser("doctor", help="check the toolchain",
                                 description="Report which parts of the toolchain are "
                                 "installed, their versions and how to get what is missing.")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")

    def target_option(sub, what):
        sub.add_argument("--device", choices=list(DEVICES), default=None,
                         help=f"{what} as elaborated for this FPGA, with its primitives "
                              "where the engine has a faster form (ECP5: MULT18X18D "
                              "multipliers with their registers); default: portable")
        dsp_option(sub)

    def dsp_option(sub):
        sub.add_argument("--dsp-blocks", type=_non_negative_int, default=None, metavar="N",
                         help="use at most N of the device's DSP blocks, the other "
                              "multipliers in LUTs (default: all of them)")

    def generate_options(sub):
        sub.add_argument("-o", "--output", required=True, metavar="DIR", type=_output_folder,
                         help="folder for the Verilog and manifest.json (created if "
                              "missing)")
        target_option(sub, "the Verilog")

    def build_dir_option(sub):
        sub.add_argument("--build-dir", metavar="DIR", default=None,
                         help="artifact folder (default $CODNN_BUILD_DIR or ./build)")

    def simulate_options(sub):
        sub.add_argument("--sim", choices=SIMULATORS, default="verilator",
                         help="simulator (default verilator)")
        sub.add_argument("--waves", action="store_true", help="record a waveform")
        sub.add_argument("--beats", type=_positive_int, default=1000,
                         help="input beats of random stimulus (per tile for arrays; "
                              "default 1000)")
        sub.add_argument("--idle", type=_probability, default=0.2,
                         help="probability of an idle input cycle (default 0.2)")
        sub.add_argument("--backpressure", type=_probability, default=0.2,
                         help="probability of output backpressure per cycle (default 0.2)")
        sub.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
        target_option(sub, "the engine")
        build_dir_option(sub)

    def board_options(sub):
        where = sub.add_mutually_exclusive_group(required=True)
        where.add_argument("--port", help="serial port of the board, e.g. /dev/ttyUSB0")
        where.add_argument("--sim", action="store_true",
                           help="run on the simulated board top (Amaranth simulator)")
        sub.add_argument("--baud", type=_positive_int, default=115200,
                         help="baud rate (default 115200)")

    def parallel_options(sub):
        sub.add_argument("--workers", type=_positive_int, default=None,
                         help="parallel synthesis processes (default: one per core)")
        sub.add_argument("--scheduler", metavar="ADDRESS", default=None,
                         help="run on the Dask cluster at ADDRESS (tcp://host:port) instead")

    def synth_options(sub):
        sub.add_argument("--device", choices=list(DEVICES), required=True, help="FPGA device")
        dsp_option(sub)
        sub.add_argument("--clock-mhz", type=_positive_float, default=None,
                         help="clock constraint in MHz (default: per device)")
        build_dir_option(sub)

    _add_engines(commands, "generate", "Generate Verilog and manifest.json", generate_options)
    _add_engines(commands, "simulate", "Simulate against the golden model", simulate_options,
                 with_sim_params=True)
    synth_cmd = _add_engines(commands, "synth", "Synthesize, place and time on an FPGA",
                             synth_options, required=False)
    baseline = synth_cmd.add_argument_group(
        "baselines", "instead of ENGINE: the reference configurations of the baseline file "
        "against their committed figures (exit 1 on a regression beyond the file's "
        "tolerance)")
    baseline.add_argument("--check-baseline", action="store_true",
                          help="synthesize the baseline's configurations and compare")
    baseline.add_argument("--update-baseline", action="store_true",
                          help="synthesize them and write the figures into the file")
    baseline.add_argument("--baseline", metavar="FILE", default=None,
                          help="baseline file (default synth/baselines.json)")
    baseline.add_argument("--quick", action="store_true",
                          help="only the entries marked quick (what the test suite checks)")
    parallel_options(baseline)
    baseline.add_argument("--build-dir", metavar="DIR", default=None, dest="baseline_build_dir",
                          help="artifact folder (default $CODNN_BUILD_DIR or ./build)")
    baseline.add_argument("--json", action="store_true", dest="baseline_json",
                          help="print the report as JSON")

    pack_cmd = commands.add_parser(
        "pack", help="pack sparse layers by column combining",
        description="Group the columns of each layer (column combining), prune conflicts, "
                    "write the packed form and report groups, conflicts pruned, packing "
                    "efficiency and tiles against a dense array.")
    pack_cmd.add_argument("weights", metavar="WEIGHTS",
                          help=".npy (one N x C or conv layer) or .npz (one layer per key)")
    pack_cmd.add_argument("--alpha", type=_positive_int, default=8,
                          help="columns per group (default 8)")
    pack_cmd.add_argument("--gamma", type=_non_negative_float, default=0.5,
                          help="allowed conflicts per row (default 0.5)")
    pack_cmd.add_argument("--rows", type=_positive_int, default=32,
                          help="array rows for the tile count (default 32)")
    pack_cmd.add_argument("--cols", type=_positive_int, default=32,
                          help="array columns for the tile count (default 32)")
    pack_cmd.add_argument("-o", "--output", required=True, metavar="FILE.npz",
                          type=_output_file(".npz"))
    pack_cmd.add_argument("--json", action="store_true", help="print the report as JSON")

    quant_cmd = commands.add_parser(
        "quantize", help="term-quantize layers (term revealing)",
        description="Quantize each layer to sign-magnitude integers, keep the top ALPHA "
                    "terms of every group of G input channels, write both and report terms "
                    "per weight, term pairs against 8-bit uniform quantization and error.")
    quant_cmd.add_argument("weights", metavar="WEIGHTS",
                           help=".npy (one N x C or conv layer) or .npz (one layer per key)")
    quant_cmd.add_argument("--group", type=_positive_int, default=8,
                           help="values per group along the input axis (default 8)")
    quant_cmd.add_argument("--budget", type=_positive_int, default=12,
                           help="terms kept per group, alpha (default 12)")
    quant_cmd.add_argument("--data-terms", type=_positive_int, default=3,
                           help="terms kept per data value, beta, for the pair count "
                                "(default 3)")
    quant_cmd.add_argument("--encoding", choices=ENCODINGS, default="naf",
                           help="term encoding (default naf)")
    quant_cmd.add_argument("--mag-bits", type=_positive_int, default=7,
                           help="magnitude bits (default 7: -127..127)")
    quant_cmd.add_argument("-o", "--output", required=True, metavar="FILE.npz",
                           type=_output_file(".npz"))
    quant_cmd.add_argument("--json", action="store_true", help="print the report as JSON")

    compress_cmd = commands.add_parser(
        "compress", help="compress gradients (INCEPTIONN-style or TernGrad)",
        description="Compress a .npy of gradients (converted to float32) with the golden "
                    "codec into a self-describing file; report the ratio and the error.")
    compress_cmd.add_argument("gradients", metavar="GRADS.npy")
    compress_cmd.add_argument("--codec", choices=CODECS, required=True)
    compress_cmd.add_argument("--bound-bits", type=int, default=10,
                              help="inceptionn: error bound 2**-B, B in 7..15 (default 10)")
    compress_cmd.add_argument("--seed", type=int, default=0,
                              help="terngrad: random seed, 0..2**32-1 (default 0)")
    compress_cmd.add_argument("--clip", type=_positive_float, default=None,
                              help="terngrad: scaler CLIP * std instead of max|g| "
                                   "(the paper uses 2.5)")
    compress_cmd.add_argument("-o", "--output", required=True, metavar="OUT.bin",
                              type=_output_file())
    compress_cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    decompress_cmd = commands.add_parser(
        "decompress", help="decode a file written by codnn compress",
        description="Decode a compressed gradient file into a .npy of float32.")
    decompress_cmd.add_argument("compressed", metavar="IN.bin")
    decompress_cmd.add_argument("-o", "--output", required=True, metavar="OUT.npy|OUT.npz",
                                type=_output_file())
    decompress_cmd.add_argument("--json", action="store_true", help="print the report as JSON")

    pcap_cmd = commands.add_parser(
        "pcap", help="apply the NIC packet rule to a packet capture",
        description="Compress every gradient frame (Ethernet II / IPv4 / UDP, ToS 0x28, "
                    "whole float32 payload) of a classic pcap capture as the NIC engine "
                    "does, or with --decompress restore them; other frames pass unchanged.")
    pcap_cmd.add_argument("capture", metavar="IN.pcap")
    pcap_cmd.add_argument("-o", "--output", required=True, metavar="OUT.pcap",
                          type=_output_file())
    pcap_cmd.add_argument("--bound-bits", type=_positive_int, default=10,
                          help="error bound 2**-b, b in 7..15 (default 10)")
    pcap_cmd.add_argument("--decompress", action="store_true",
                          help="restore the values of ToS 0x28 frames (the receiver)")
    pcap_cmd.add_argument("--json", action="store_true", help="print the report as JSON")

    run_cmd = commands.add_parser(
        "run", help="run a packed or term-quantized layer on a board (or a simulated one)",
        description="Run one layer on a board top (hw/soc) through the UART host link, "
                    "tile by tile, and check the accumulators against golden: a packed "
                    "layer (codnn pack) on the systolic array, a term-quantized one (codnn "
                    "quantize) on the TQ array.")
    run_cmd.add_argument("layers", metavar="LAYERS.npz",
                         help="written by codnn pack or codnn quantize")
    run_cmd.add_argument("inputs", metavar="INPUTS.npy",
                         help="integer inputs, channels x vectors")
    run_cmd.add_argument("--layer", default=None, help="layer name (default: the first)")
    board_options(run_cmd)
    for name, default in (("rows", 4), ("cols", 4), ("depth", 16)):
        run_cmd.add_argument(f"--{name}", type=_positive_int, default=default,
                             help=f"--sim: array {name} (default {default})")
    run_cmd.add_argument("--beta", type=_positive_int, default=3,
                         help="--sim, TQ array: terms kept per data value (default 3)")
    run_cmd.add_argument("--json", action="store_true", help="print the report as JSON")

    bitstream_cmd = commands.add_parser(
        "bitstream", help="build a board's bitstream of a host-link design",
        description="Build the bitstream of a board-ready design (an engine behind the UART "
                    "host link, hw/soc) for a board, through amaranth-boards and the YoWASP "
                    "tools, and report utilization, Fmax against the board clock and where "
                    "the bitstream is. Nothing is programmed.")
    bitstream_cmd.add_argument("--board", required=True, metavar="BOARD",
                               help=f"one of {', '.join(BOARDS)}")
    bitstream_cmd.add_argument("--design", choices=list(BOARD_DESIGNS), default="systolic",
                               help="design: " + "; ".join(f"{d.name}: {d.summary}" for d in
                                                          BOARD_DESIGNS.values())
                               + " (default systolic)")
    defaults = {}                           # every design's parameters, each once
    for design in BOARD_DESIGNS.values():
        for param in design.params:
            defaults.setdefault(param.name, (param, []))[1].append(
                f"{design.name} {param.default}")
    for param, texts in defaults.values():     # unset: the chosen design's default
        _add_param(bitstream_cmd, dataclasses.replace(param, default=None), "param_",
                   default_text=", ".join(texts))
    bitstream_cmd.add_argument("--baud", type=_positive_int, default=115200,
                               help="UART baud rate (default 115200)")
    build_dir_option(bitstream_cmd)
    bitstream_cmd.add_argument("--json", action="store_true", help="print the report as JSON")

    sweep_cmd = commands.add_parser(
        "sweep", help="synthesize a grid of configurations in parallel",
        description="Synthesize every combination of the given parameter values on every "
                    "device, in parallel on this machine's cores or on a Dask cluster, and "
                    "write the figures as CSV and JSON with a Pareto plot (PNG) of "
                    "throughput (Fmax x work per cycle) against LUTs.")
    sweep_cmd.add_argument("engine", metavar="ENGINE", choices=list(ENGINES),
                           help=f"one of {', '.join(ENGINES)}")
    sweep_cmd.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                           help="values of one parameter (repeat for more; others default)")
    sweep_cmd.add_argument("--device", required=True, metavar="D1,D2",
                           help=f"devices, comma-separated: {', '.join(DEVICES)}")
    sweep_cmd.add_argument("--clock-mhz", type=_positive_float, default=None,
                           help="clock constraint in MHz (default: per device)")
    parallel_options(sweep_cmd)
    sweep_cmd.add_argument("-o", "--output", metavar="PREFIX", default=None,
                           help="write PREFIX.csv, PREFIX.json, PREFIX.png (default "
                                "BUILD_DIR/sweep/ENGINE)")
    build_dir_option(sweep_cmd)
    sweep_cmd.add_argument("--json", action="store_true", help="print the rows as JSON")

    stream_cmd = commands.add_parser(
        "stream", help="stream gradients through a NIC engine on a board (or a simulated one)",
        description="Send gradients as messages through the NIC engine of a board top "
                    "(hw/soc NicSoc) over the UART host link and check every output byte "
                    "against golden; decoders get the messages golden encodes.")
    stream_cmd.add_argument("gradients", metavar="GRADS", help=".npy or .npz of gradients")
    board_options(stream_cmd)
    stream_cmd.add_argument("--kind", choices=NIC_ENGINES, default="compressor",
                            help="--sim: the engine (default compressor; a board says its own)")
    stream_cmd.add_argument("--lanes", type=_positive_int, default=2,
                            help="--sim: float32 values per beat (default 2)")
    stream_cmd.add_argument("--depth", type=_positive_int, default=64,
                            help="--sim: beats held in and out (default 64)")
    stream_cmd.add_argument("--message-values", type=_positive_int, default=64,
                            help="values per message (default 64)")
    stream_cmd.add_argument("--bound-bits", type=_positive_int, default=10,
                            help="INCEPTIONN error bound 2**-b, b in 7..15 (default 10)")
    stream_cmd.add_argument("--seed", type=_non_negative_int, default=0,
                            help="TernGrad seed (default 0)")
    stream_cmd.add_argument("--scaler", type=_positive_float, default=None,
                            help="TernGrad scaler (default 2.5 x the std of the gradients)")
    stream_cmd.add_argument("--json", action="store_true", help="print the report as JSON")

    demo = commands.add_parser("demo", help="run the main flow end to end",
                               description="Generate, simulate against golden and synthesize "
                               "every engine, then print a summary.")
    demo.add_argument("--quick", action="store_true", help="smaller runs, Verilator only")
    build_dir_option(demo)
    return parser


def _show(args, title, report):
    """Print a command's report (a table, or JSON with ``--json``); return exit code 0."""
    if args.json:
        print_json(report)
    else:
        print_record(title, report)
    return 0


def _params(args, prefix="param_"):
    return {key[len(prefix):]: value for key, value in vars(args).items()
            if key.startswith(prefix)}


def _doctor(args):
    from .doctor import check_toolchain
    rows = check_toolchain()
    if args.json:
        print_json(rows)
    else:
        for row in rows:
            row["status"] = "ok" if row["found"] else ("MISSING" if row["required"]
                                                       else "missing (optional)")
            row["fix"] = None if row["found"] else row["remedy"]
        columns = [("name", "part"), ("status", "status"), ("version", "version"),
                   ("role", "role")]
        if not all(row["found"] for row in rows):
            columns.append(("fix", "how to get it"))
        print_rows("codnn toolchain", rows, columns)
    return 0 if all(row["found"] for row in rows if row["required"]) else 1


def _generate(args):
    manifest = generate(args.engine, _params(args), args.output, device=args.device,
                        dsp_blocks=args.dsp_blocks)
    if args.json:
        print_json(manifest)
    else:
        shown = {k: v for k, v in manifest.items() if k != "ports"}
        shown["device"] = manifest["device"] or "none (portable Verilog)"
        if manifest["device"] and manifest["dsp_blocks"] is None:
            shown["dsp_blocks"] = "all of the device's"
        shown["primitives"] = ", ".join(manifest["primitives"]) or "none"
        shown["ports"] = ", ".join(f"{p['name']}[{p['width']}]" for p in manifest["ports"])
        shown["written"] = (f"{args.output / manifest['verilog']}, "
                            f"{args.output / 'manifest.json'}")
        print_record(f"codnn generate {args.engine}", shown)
    return 0


def _simulate(args):
    with err_console.status(f"simulating {args.engine} on {args.sim}..."):
        report = run_simulation(args.engine, _params(args), simulator=args.sim,
                                beats=args.beats, idle=args.idle,
                                backpressure=args.backpressure, seed=args.seed,
                                waves=args.waves, build_root=args.build_dir,
                                sim_params=_params(args, "sim_"), device=args.device,
                                dsp_blocks=args.dsp_blocks)
    if args.json:
        print_json(report)
    else:
        print_record(f"codnn simulate {args.engine}", report)
        if report["waves"]:
            err_console.print(f"waveform written to {report['waves']}")
    return 0


def _synth(args):
    if args.check_baseline or args.update_baseline:
        if args.engine is not None:
            raise UsageError("codnn synth: give an ENGINE or --check-baseline, not both")
        return _check_baseline(args)
    if args.engine is None:
        raise UsageError("codnn synth: give an ENGINE (see codnn synth --help) or "
                         "--check-baseline")
    baseline_only = [option for option, given in [
        ("--baseline", args.baseline is not None), ("--quick", args.quick),
        ("--workers", args.workers is not None), ("--scheduler", args.scheduler is not None)]
        if given]
    if baseline_only:
        raise UsageError(f"codnn synth: {', '.join(baseline_only)} only with --check-baseline "
                         "or --update-baseline")
    # --json and --build-dir given before ENGINE apply to it.
    args.json = args.json or args.baseline_json
    build_dir = args.build_dir or args.baseline_build_dir
    with err_console.status(f"synthesizing {args.engine} for {args.device}...") as status:
        report = run_synthesis(args.engine, _params(args), device=args.device,
                               clock_mhz=args.clock_mhz, dsp_blocks=args.dsp_blocks,
                               build_root=build_dir,
                               progress=lambda stage: status.update(stage + "..."))
    return _show(args, f"codnn synth {args.engine} --device {args.device}", report)


def _pack(args):
    from golden.column_combining import dense_tiles, tiles

    from .packfile import pack_file, save_packed
    with err_console.status(f"packing {args.weights}..."):
        layers = pack_file(args.weights, args.alpha, args.gamma)
    save_packed(args.output, {name: packed for name, (_, packed) in layers.items()})
    rows = []
    for name, (matrix, packed) in layers.items():
        packed_tiles = tiles(packed, args.rows, args.cols)
        dense = dense_tiles(matrix.shape, args.rows, args.cols)
        rows.append({"layer": name, "shape": f"{matrix.shape[0]}x{matrix.shape[1]}",
                     "nonzeros": int((matrix != 0).sum()), "groups": len(packed.groups),
                     "conflicts_pruned": packed.pruned,
                     "packing_efficiency": round(packed.efficiency, 4),
                     "tiles": packed_tiles, "dense_tiles": dense,
                     "tiles_vs_dense": round(packed_tiles / dense, 4)})
    if args.json:
        print_json({"alpha": args.alpha, "gamma": args.gamma, "array": [args.rows, args.cols],
                    "output": str(args.output), "layers": rows})
    else:
        print_rows(f"codnn pack (alpha={args.alpha}, gamma={args.gamma}, "
                   f"{args.rows}x{args.cols} array) -> {args.output}", rows,
                   [("layer", "layer"), ("shape", "N x C"), ("nonzeros", "nnz"),
                    ("groups", "groups"), ("conflicts_pruned", "pruned"),
                    ("packing_efficiency", "pack eff"), ("tiles", "tiles"),
                    ("dense_tiles", "dense"), ("tiles_vs_dense", "ratio")])
    return 0


def _quantize(args):
    from .quantfile import quantize_file
    try:
        with err_console.status(f"quantizing {args.weights}..."):
            rows = quantize_file(args.weights, args.output, g=args.group, alpha=args.budget,
                                 beta=args.data_terms, encoding=args.encoding,
                                 mag_bits=args.mag_bits)
    except ValueError as error:
        if isinstance(error, WeightFileError):     # already says which file and why
            raise
        raise UsageError(str(error)) from error
    if args.json:
        print_json({"group": args.group, "budget": args.budget, "data_terms": args.data_terms,
                    "encoding": args.encoding, "output": str(args.output), "layers": rows})
    else:
        print_rows(f"codnn quantize (g={args.group}, alpha={args.budget}, "
                   f"beta={args.data_terms}, {args.encoding}) -> {args.output}", rows,
                   [("layer", "layer"), ("shape", "N x C"), ("terms_before", "terms/w UQ"),
                    ("terms_after", "terms/w TQ"), ("pairs_per_mac_tq", "pairs/MAC TQ"),
                    ("pairs_ratio", "fewer pairs than UQ8"), ("sqnr_uq_db", "SQNR UQ dB"),
                    ("sqnr_tq_db", "SQNR TQ dB")])
    return 0


def _compress(args):
    from .gradfile import compress_file
    try:
        with err_console.status(f"compressing {args.gradients} ({args.codec})..."):
            report = compress_file(args.gradients, args.output, codec=args.codec,
                                   bound_bits=args.bound_bits, seed=args.seed, clip=args.clip)
    except ValueError as error:
        if isinstance(error, WeightFileError):
            raise
        raise UsageError(str(error)) from error
    return _show(args, f"codnn compress --codec {args.codec}", report)


def _decompress(args):
    from .gradfile import decompress_file
    with err_console.status(f"decompressing {args.compressed}..."):
        report = decompress_file(args.compressed, args.output)
    return _show(args, "codnn decompress", report)


def _pcap(args):
    from .pcapfile import rewrite_pcap
    try:
        report = rewrite_pcap(args.capture, args.output, bound_bits=args.bound_bits,
                              decompress=args.decompress)
    except ValueError as error:             # PcapError, a bad bound, a corrupt frame
        raise UsageError(str(error)) from None
    return _show(args, f"codnn pcap {args.capture}", report)


def _run(args):
    import numpy as np

    from golden.systolic import run_layer
    from golden.tq_array import run_tq_layer

    from .board import Board, DeviceError, LinkError, open_serial
    from .packfile import load_packed, read_layer_arrays
    from .quantfile import load_quantized
    arrays = read_layer_arrays(args.layers, "layer", "codnn pack or codnn quantize")
    tq = all("tq" in layer for layer in arrays.values())     # codnn quantize writes <layer>/tq
    layers = load_quantized(args.layers) if tq else load_packed(args.layers)
    name = args.layer or next(iter(layers))
    if name not in layers:
        raise UsageError(f"{args.layers} has no layer {name!r}; it has {', '.join(layers)}")
    layer = layers[name]
    columns = layer.q.shape[1] if tq else layer.columns
    try:
        X = np.load(args.inputs, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise UsageError(f"{args.inputs} is not a readable .npy file ({error})") from None
    if X.ndim != 2 or X.shape[0] != columns or not np.issubdtype(X.dtype, np.integer):
        raise UsageError(f"{args.inputs}: expected integer inputs of shape "
                         f"({columns}, T), not {X.dtype} {X.shape}")

    def host(port):
        board = Board(port)
        status = board.status()
        try:
            if tq:
                device = {k: status.config.get(k) for k in ("g", "alpha", "mag_bits")}
                code = status.config["encoding"]
                device["encoding"] = ENCODINGS[code] if code < len(ENCODINGS) else code
                mine = {"g": layer.g, "alpha": layer.alpha, "mag_bits": layer.mag_bits,
                        "encoding": layer.encoding}
                if device != mine:
                    raise ValueError(f"the device's TQ array has {device}, the layer {mine}")
                acc, cycles = board.run_tq_layer(layer.q, X)
            else:
                acc, cycles = board.run_layer(layer, X)
        except ValueError as error:
            raise UsageError(str(error)) from None
        return status, acc, cycles

    try:
        with err_console.status(f"running layer {name} on "
                                f"{'the simulated board' if args.sim else args.port}..."):
            if args.sim:
                from sim.uart_bridge import run_with_port
                size = {"rows": args.rows, "cols": args.cols, "depth": args.depth,
                        "divisor": 4, "timeout_bytes": 16}
                try:
                    dut = (BOARD_DESIGNS["tq"].build(
                        g=layer.g, alpha=layer.alpha, beta=args.beta, mag_bits=layer.mag_bits,
                        encoding=layer.encoding, **size) if tq
                        else BOARD_DESIGNS["systolic"].build(alpha=layer.alpha, **size))
                except (TypeError, ValueError) as error:
                    raise UsageError(str(error)) from None
                status, acc, cycles = run_with_port(dut, 4, host)
            else:
                status, acc, cycles = host(open_serial(args.port, args.baud))
    except (LinkError, DeviceError, OSError) as error:
        print(f"codnn: error: {error}", file=sys.stderr)
        return 1
    size = {"rows": status.rows, "cols": status.cols, "acc_bits": status.acc_bits}
    config = status.config
    if tq:
        _, want = run_tq_layer(layer.q, X, g=layer.g, alpha=layer.alpha, beta=config["beta"],
                               encoding=layer.encoding, mag_bits=layer.mag_bits, **size)
        array = (f"TQ {status.rows}x{status.cols}, g {config['g']}, alpha {config['alpha']}, "
                 f"beta {config['beta']}")
    else:
        _, want = run_layer(layer, X, **size)
        array = f"{status.rows}x{status.cols}, alpha {config['alpha']}"
    ok = bool(np.array_equal(acc, want))
    report = {"layer": name, "device": "simulated board top" if args.sim else args.port,
              "array": array, "vectors": int(X.shape[1]), "device_cycles": cycles,
              "result": "pass" if ok else "FAIL"}
    if args.json:
        print_json(report)
    else:
        print_record("codnn run", report)
    return 0 if ok else 1


def _stream(args):
    import numpy as np

    from golden.inceptionn import check_bound_bits
    from hw.soc.protocol import NIC_PORTS, Engine

    from .board import Board, DeviceError, LinkError, open_serial
    from .gradfile import load_gradients
    try:
        check_bound_bits(args.bound_bits)
    except ValueError as error:
        raise UsageError(str(error)) from None
    values = load_gradients(args.gradients).reshape(-1)
    size = args.message_values
    messages = [values[k:k + size] for k in range(0, len(values), size)]

    def host(port):
        board = Board(port)
        status = board.status()
        if status.engine != Engine.NIC:
            raise UsageError(f"the device runs the {status.engine.name.lower()} array, not "
                             f"a NIC engine")
        kind, lanes = NIC_ENGINES[status.config["kind"]], status.config["lanes"]
        codec = NicCodec(kind, bound_bits=args.bound_bits, seed=args.seed,
                         scaler=args.scaler, messages=messages)
        frames = [engine_frames(codec, lanes, x) for x in messages]
        settings = {"bound_bits": args.bound_bits, "seed": codec.seed,
                    "scaler": int(np.float32(codec.scaler).view(np.uint32))}
        names = {name for name, _, _ in NIC_PORTS[kind][0]}
        try:
            outputs, report, cycles = board.run_frames(
                [frame for frame, _, _ in frames],
                **{k: v for k, v in settings.items() if k in names})
        except ValueError as error:
            raise UsageError(f"{error}: send fewer --message-values") from None
        return kind, lanes, frames, outputs, report, cycles

    try:
        with err_console.status(f"streaming {len(values)} values through "
                                f"{'the simulated board' if args.sim else args.port}..."):
            if args.sim:
                from sim.uart_bridge import run_with_port
                try:
                    dut = BOARD_DESIGNS["nic"].build(kind=args.kind, lanes=args.lanes,
                                                     depth=args.depth, divisor=4,
                                                     timeout_bytes=16)
                except ValueError as error:
                    raise UsageError(str(error)) from None
                result = run_with_port(dut, 4, host)
            else:
                result = host(open_serial(args.port, args.baud))
    except (LinkError, DeviceError, OSError) as error:
        print(f"codnn: error: {error}", file=sys.stderr)
        return 1
    kind, lanes, frames, outputs, report, cycles = result
    wanted = [want for _, want, _ in frames]
    ok = outputs == wanted
    sent, received = sum(len(f) for f, _, _ in frames), sum(len(o) for o in outputs)
    summary = {"engine": kind, "lanes": lanes, "device": "simulated board top" if args.sim
               else args.port, "messages": len(messages), "values": int(len(values)),
               "bytes_in": sent, "bytes_out": received,
               "ratio": round(sent / received, 3) if received else None,
               "device_cycles": cycles, **report, "result": "pass" if ok else "FAIL"}
    _show(args, f"codnn stream ({kind})", summary)
    return 0 if ok else 1


def _bitstream(args):
    with err_console.status(f"building {args.design} for {args.board}...") as status:
        params = {k: v for k, v in _params(args).items() if v is not None}
        report = run_bitstream(args.design, params, board=args.board, baud=args.baud,
                               build_root=args.build_dir,
                               progress=lambda stage: status.update(stage + "..."))
    return _show(args, f"codnn bitstream --board {args.board} --design {args.design}", report)


def _check_baseline(args):
    from synth.baseline import BASELINE_FILE

    from .baseline import check_baseline
    path = args.baseline or BASELINE_FILE
    with err_console.status("synthesizing the baseline's configurations...") as status:
        report = check_baseline(path, quick=args.quick, update=args.update_baseline,
                                workers=args.workers, scheduler=args.scheduler,
                                build_root=args.baseline_build_dir,
                                progress=lambda *a: status.update(_progress_line(*a)))
    if args.baseline_json:
        print_json(report)
    else:
        rows = [{"entry": r["entry"],
                 "verdict": r["verdict"] + (f": {r['note']}" if "note" in r else ""),
                 **{m: _baseline_cell(r["metrics"].get(m)) for m in _BASELINE_COLUMNS}}
                for r in report["entries"]]
        tolerance = report["tolerance"]
        print_rows(f"codnn synth --check-baseline {path} (tolerance: resources "
                   f"+{tolerance['resources']:.0%}, Fmax -{tolerance['fmax']:.0%})", rows,
                   [("entry", "configuration"), *((m, h) for m, h in _BASELINE_COLUMNS.items()),
                    ("verdict", "verdict")])
        if report["tools"]["baseline"] and report["tools"]["baseline"] != report["tools"]["now"]:
            print(f"note: the baseline was measured with {report['tools']['baseline']}, "
                  f"these tools are {report['tools']['now']}")
        if args.update_baseline:
            print(f"updated {path}")
    if report["regressions"] and not args.update_baseline:
        print(f"codnn: {report['regressions']} configuration(s) regressed against {path}",
              file=sys.stderr)
        return 1
    return 0


_BASELINE_COLUMNS = {"lut": "LUT", "ff": "FF", "dsp": "DSP", "bram": "BRAM",
                     "logic_cells": "cells", "fmax_mhz": "Fmax MHz"}


def _baseline_cell(metric):
    """``"1203 (+4.1%) WORSE"``: the measured figure, its change, and the verdict if any."""
    if metric is None:
        return None
    change = "" if metric["change"] is None else f" ({metric['change']:+.1%})"
    flag = {"worse": " WORSE", "better": " better"}.get(metric["verdict"], "")
    return f"{metric['measured']:g}{change if metric['change'] else ''}{flag}"


def _progress_line(done, total, row):
    config = " ".join(f"{k}={v}" for k, v in row.items()
                      if k not in COLUMNS and k not in ("engine", "device"))
    result = f"{row['fmax_mhz']:g} MHz" if row["status"] == "ok" else row["status"]
    return f"[{done}/{total}] {row['engine']} {config} on {row['device']}: {result}"


def _sweep(args):
    from .sweep import pareto_front, parse_grid, sweep, write_sweep
    grid = parse_grid(args.engine, args.param)
    devices = [d.strip() for d in args.device.split(",") if d.strip()]
    build_root = args.build_dir or default_build_root()
    with err_console.status(f"sweeping {args.engine}...") as status:
        rows = sweep(args.engine, grid, devices, clock_mhz=args.clock_mhz,
                     workers=args.workers, scheduler=args.scheduler, build_root=build_root,
                     progress=lambda *a: status.update(_progress_line(*a)))
    paths = write_sweep(rows, grid, args.output or Path(build_root) / "sweep" / args.engine)
    if args.json:
        print_json({"rows": rows, "files": paths})
        return 0
    front = {id(row) for row in pareto_front(rows)}
    table = [{**row, "pareto": "*" if id(row) in front else "",
              "throughput": f"{row['throughput_per_s'] / 1e9:.3g} G{row['rate_unit']}/s"
              if row["status"] == "ok" else None} for row in rows]
    print_rows(f"codnn sweep {args.engine}", table,
               [(name, name) for name in grid] + [
                   ("device", "device"), ("lut", "LUT"), ("ff", "FF"), ("dsp", "DSP"),
                   ("bram", "BRAM"), ("fmax_mhz", "Fmax MHz"), ("throughput", "throughput"),
                   ("pareto", "Pareto"), ("status", "status")])
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def _demo(args):
    from .demo import run_demo
    return run_demo(quick=args.quick, build_root=args.build_dir)


_COMMANDS = {"doctor": _doctor, "generate": _generate, "simulate": _simulate,
             "synth": _synth, "pack": _pack, "quantize": _quantize, "compress": _compress,
             "decompress": _decompress, "pcap": _pcap, "run": _run, "stream": _stream,
             "bitstream": _bitstream, "sweep": _sweep, "demo": _demo}


def main(argv=None):
    """Run the command line; return the exit code."""
    try:
        args = _build_parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except (UsageError, ParameterError, WeightFileError, BaselineError) as error:
        message = str(error)
        if not message.startswith("codnn"):
            message = f"codnn: error: {message}"
        print(message.splitlines()[0], file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of our output went away (``codnn ... --json | head -1``): say nothing
        # more, and let the interpreter's final flush write nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        if error.filename is None:
            raise
        print(f"codnn: error: {error.filename}: {error.strerror}", file=sys.stderr)
        return 2
    except SimulationFailure as error:
        print(f"codnn: simulation FAILED against golden:\n{error}", file=sys.stderr)
        return 1
    except (SynthesisError, SimulatorMissing, ToolMissing, SweepError) as error:
        print(f"codnn: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("codnn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
