"""Commands that build or run gateware: ``doctor``, ``generate``, ``simulate``, ``synth``
(and its baseline check), ``sweep``, ``bitstream``, ``demo``."""

import dataclasses
import sys
from pathlib import Path

from codnn.sim.runner import SimulationFailure, default_build_root
from codnn.sim.simulators import SIMULATORS, SimulatorMissing
from codnn.synth.baseline import BaselineError
from codnn.synth.bitstream import BOARDS
from codnn.synth.devices import DEVICES
from codnn.synth.flow import SynthesisError
from codnn.synth.tools import ToolMissing

from ..engines import BOARD_DESIGNS, ENGINES
from ..flows import (
    ParameterError,
    generate,
    run_bitstream,
    run_program_bitstream,
    run_simulation,
    run_synthesis,
)
from ..packfile import WeightFileError
from ..render import err_console, print_json, print_record, print_rows
from ..sweep import COLUMNS, SweepError
from .options import (
    Parser,
    UsageError,
    add_param,
    build_dir_option,
    json_option,
    non_negative_int,
    output_folder,
    params,
    positive_float,
    positive_int,
    probability,
    show,
)

__all__ = ["COMMANDS", "USAGE_ERRORS", "FAILURES"]

USAGE_ERRORS = (ParameterError, WeightFileError, BaselineError)
FAILURES = (SynthesisError, SimulatorMissing, ToolMissing, SweepError)


def _engines(sub, add_options, with_sim_params=False, required=True):
    """``ENGINE [engine options]`` below command parser ``sub``."""
    engines = sub.add_subparsers(dest="engine", metavar="ENGINE", required=required,
                                 parser_class=Parser)
    for engine in ENGINES.values():
        parser = engines.add_parser(
            engine.name, help=engine.summary,
            description=f"{sub.description.rstrip('.')}: {engine.summary}.")
        for param in engine.params:
            add_param(parser, param, "param_")
        if with_sim_params:
            for param in engine.sim_params:
                add_param(parser, param, "sim_")
        add_options(parser)
        json_option(parser)


def _dsp_option(sub):
    sub.add_argument("--dsp-blocks", type=non_negative_int, default=None, metavar="N",
                     help="use at most N of the device's DSP blocks, the other multipliers in "
                          "LUTs (default: all of them)")


def _target_option(sub, what):
    sub.add_argument("--device", choices=list(DEVICES), default=None,
                     help=f"{what} as elaborated for this FPGA, with its primitives where the "
                          "engine has a faster form (ECP5: MULT18X18D multipliers with their "
                          "registers); default: portable")
    _dsp_option(sub)


def _parallel_options(sub):
    sub.add_argument("--workers", type=positive_int, default=None,
                     help="parallel synthesis processes (default: one per core)")
    sub.add_argument("--scheduler", metavar="ADDRESS", default=None,
                     help="run on the Dask cluster at ADDRESS (tcp://host:port) instead")


def add_doctor(sub):
    sub.description = ("Report which parts of the toolchain are installed, their versions "
                       "and how to get what is missing.")
    json_option(sub)


def run_doctor(args):
    from ..doctor import check_toolchain
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
        if any(row.get("note") for row in rows):
            columns.append(("note", "note"))
        print_rows("codnn toolchain", rows, columns)
    return 0 if all(row["found"] for row in rows if row["required"]) else 1


def add_generate(sub):
    def options(parser):
        parser.add_argument("-o", "--output", required=True, metavar="DIR",
                            type=output_folder,
                            help="folder for the Verilog and manifest.json (created if "
                                 "missing)")
        parser.add_argument("--top-name", metavar="NAME", default=None,
                            help="the Verilog module's name (default the engine's)")
        _target_option(parser, "the Verilog")
    _engines(sub, options)


def run_generate(args):
    manifest = generate(args.engine, params(args), args.output, device=args.device,
                        dsp_blocks=args.dsp_blocks, top_name=args.top_name)
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


def add_simulate(sub):
    def options(parser):
        parser.add_argument("--sim", choices=SIMULATORS, default="verilator",
                            help="simulator (default verilator)")
        parser.add_argument("--waves", action="store_true", help="record a waveform")
        parser.add_argument("--beats", type=positive_int, default=1000,
                            help="input beats of random stimulus (per tile for arrays; "
                                 "default 1000)")
        parser.add_argument("--idle", type=probability, default=0.2,
                            help="probability of an idle input cycle (default 0.2)")
        parser.add_argument("--backpressure", type=probability, default=0.2,
                            help="probability of output backpressure per cycle (default 0.2)")
        parser.add_argument("--seed", type=int, default=None,
                            help="random seed (default: random)")
        _target_option(parser, "the engine")
        build_dir_option(parser)
    _engines(sub, options, with_sim_params=True)


def run_simulate(args):
    try:
        with err_console.status(f"simulating {args.engine} on {args.sim}..."):
            report = run_simulation(args.engine, params(args), simulator=args.sim,
                                    beats=args.beats, idle=args.idle,
                                    backpressure=args.backpressure, seed=args.seed,
                                    waves=args.waves, build_root=args.build_dir,
                                    sim_params=params(args, "sim_"), device=args.device,
                                    dsp_blocks=args.dsp_blocks)
    except SimulationFailure as error:
        print(f"codnn: simulation FAILED against golden:\n{error}", file=sys.stderr)
        return 1
    if args.json:
        print_json(report)
    else:
        print_record(f"codnn simulate {args.engine}", report)
        if report["waves"]:
            err_console.print(f"waveform written to {report['waves']}")
    return 0


def add_synth(sub):
    def options(parser):
        parser.add_argument("--device", choices=list(DEVICES), required=True,
                            help="FPGA device")
        _dsp_option(parser)
        parser.add_argument("--clock-mhz", type=positive_float, default=None,
                            help="clock constraint in MHz (default: per device)")
        parser.add_argument("--seed", type=non_negative_int, default=1,
                            help="nextpnr's placement seed (default 1)")
        build_dir_option(parser)
    _engines(sub, options, required=False)
    baseline = sub.add_argument_group(
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
    _parallel_options(baseline)
    baseline.add_argument("--build-dir", metavar="DIR", default=None, dest="baseline_build_dir",
                          help="artifact folder (default $CODNN_BUILD_DIR or ./build)")
    baseline.add_argument("--json", action="store_true", dest="baseline_json",
                          help="print the report as JSON")


def run_synth(args):
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
        report = run_synthesis(args.engine, params(args), device=args.device,
                               clock_mhz=args.clock_mhz, dsp_blocks=args.dsp_blocks,
                               build_root=build_dir, seed=args.seed,
                               progress=lambda stage: status.update(stage + "..."))
    return show(args, f"codnn synth {args.engine} --device {args.device}", report)


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


def _check_baseline(args):
    from codnn.synth.baseline import BASELINE_FILE

    from ..baseline import check_baseline
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


def add_sweep(sub):
    sub.description = ("Synthesize every combination of the given parameter values on every "
                       "device, in parallel on this machine's cores or on a Dask cluster, and "
                       "write the figures as CSV and JSON with a Pareto plot (PNG) of "
                       "throughput (Fmax x work per cycle) against LUTs.")
    sub.add_argument("engine", metavar="ENGINE", choices=list(ENGINES),
                     help=f"one of {', '.join(ENGINES)}")
    sub.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                     help="values of one parameter (repeat for more; others default)")
    sub.add_argument("--device", required=True, metavar="D1,D2",
                     help=f"devices, comma-separated: {', '.join(DEVICES)}")
    sub.add_argument("--clock-mhz", type=positive_float, default=None,
                     help="clock constraint in MHz (default: per device)")
    _parallel_options(sub)
    sub.add_argument("-o", "--output", metavar="PREFIX", default=None,
                     help="write PREFIX.csv, PREFIX.json, PREFIX.png (default "
                          "BUILD_DIR/sweep/ENGINE)")
    build_dir_option(sub)
    json_option(sub, "the rows")


def run_sweep(args):
    from ..sweep import pareto_front, parse_grid, sweep, write_sweep
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


def add_bitstream(sub):
    sub.description = ("Build the bitstream of a board-ready design (an engine behind the "
                       "UART host link, hw/soc) for a board, through amaranth-boards and the "
                       "YoWASP tools, and report utilization, Fmax against the board clock "
                       "and where the bitstream is. Nothing is programmed.")
    sub.add_argument("--board", required=True, metavar="BOARD",
                     help=f"one of {', '.join(BOARDS)}")
    sub.add_argument("--design", choices=list(BOARD_DESIGNS), default=None,
                     help="design: " + "; ".join(f"{d.name}: {d.summary}"
                                                 for d in BOARD_DESIGNS.values())
                     + " (default: ethernet_bump on a board with two Ethernet ports, "
                       "systolic on the others)")
    defaults = {}                           # every design's parameters, each once
    for design in BOARD_DESIGNS.values():
        for param in design.params:
            defaults.setdefault(param.name, (param, []))[1].append(
                f"{design.name} {param.default}")
    for param, texts in defaults.values():     # unset: the chosen design's default
        add_param(sub, dataclasses.replace(param, default=None), "param_",
                  default_text=", ".join(texts))
    sub.add_argument("--program", metavar="DIR", default=None,
                     help="the network engine sized for the program codnn compile wrote "
                          "into DIR (its array and buffers, the weights on chip), instead "
                          "of parameters given by hand")
    sub.add_argument("--baud", type=positive_int, default=115200,
                     help="UART baud rate (default 115200)")
    sub.add_argument("--seed", type=non_negative_int, default=1,
                     help="nextpnr's placement seed (default 1; another places differently, "
                          "where router2 may converge when it diverges on one)")
    build_dir_option(sub)
    json_option(sub)


def run_bitstream_command(args):
    given = {k: v for k, v in params(args).items() if v is not None}
    if args.program is not None:
        if args.design not in (None, "network") or given:
            extra = [f"--design {args.design}"] if args.design not in (None, "network") else []
            extra += [f"--{name.replace('_', '-')}" for name in given]
            raise ParameterError(f"--program sets the network engine's parameters from the "
                                 f"program; drop {', '.join(extra)}")
        return program_bitstream(args, args.program, args.board)
    if args.design is None:                 # an unknown board is run_bitstream's error
        args.design = BOARDS[args.board].default_design if args.board in BOARDS \
            else "systolic"
    with err_console.status(f"building {args.design} for {args.board}...") as status:
        report = run_bitstream(args.design, given, board=args.board, baud=args.baud,
                               build_root=args.build_dir, seed=args.seed,
                               progress=lambda stage: status.update(stage + "..."))
    return show(args, f"codnn bitstream --board {args.board} --design {args.design}", report)


def program_bitstream(args, folder, board):
    """``codnn bitstream --program DIR`` (and ``codnn compile --board``): the network
    engine's board top for a compiled program, built and reported."""
    with err_console.status(f"building the network engine for {folder} on {board}...") \
            as status:
        report = run_program_bitstream(folder, board=board, baud=args.baud,
                                       build_root=args.build_dir,
                                       seed=getattr(args, "seed", 1),
                                       progress=lambda stage: status.update(stage + "..."))
    return show(args, f"codnn bitstream --board {board} --program {folder}", report)


COMMANDS = {"doctor": (add_doctor, run_doctor), "generate": (add_generate, run_generate),
            "simulate": (add_simulate, run_simulate), "synth": (add_synth, run_synth),
            "sweep": (add_sweep, run_sweep), "bitstream": (add_bitstream, run_bitstream_command)}
