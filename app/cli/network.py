"""Whole networks: ``infer`` (a model file through the arrays), ``compile`` (a model file to
the network engine's program and weight image) and ``demo`` (LeNet-5 on MNIST, the main
flow; ``--engines`` runs every engine's own flow instead). Amaranth and the simulators load
only for an RTL run."""

import shutil
from dataclasses import replace
from pathlib import Path

from codnn.golden.network_program import (WEIGHT_PORTS, EngineConfig, external_weight_bytes,
                                          image_word, word_stride)
from codnn.golden.systolic import MAC_KINDS
from codnn.golden.term_quant import ENCODINGS

from ..model.batch_schedule import SCHEDULES
from ..model.compile import BUFFERS, CompileError, largest_buffers
from ..model.infer import InputError
from ..model.onnx_import import ModelError
from ..model.quantize import CALIBRATIONS, REQUANTS
from .options import (
    Failure,
    build_dir_option,
    json_option,
    non_negative_int,
    non_negative_float,
    positive_float,
    positive_int,
)

__all__ = ["COMMANDS", "USAGE_ERRORS", "FAILURES"]

USAGE_ERRORS = (ModelError, InputError, CompileError)
FAILURES = ()

#: The models the demo runs, trained by benchmarks/train_lenet5.py.
MODELS = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "models"


def _packing_options(sub, *, mac_default):
    """The array's size, how layers are packed for it and quantized (infer, compile)."""
    sub.add_argument("--rows", type=positive_int, default=16, help="array rows (default 16)")
    sub.add_argument("--cols", type=positive_int, default=16,
                     help="array columns (default 16)")
    sub.add_argument("--alpha", type=positive_int, default=8,
                     help="data streams per column; 1 = dense array (default 8)")
    sub.add_argument("--gamma", type=non_negative_float, default=0.5,
                     help="allowed conflicts per row when a layer is packed (default 0.5)")
    sub.add_argument("--mac", choices=MAC_KINDS, default=mac_default,
                     help=f"MAC kind (default {mac_default})")
    sub.add_argument("--calibration", type=positive_int, default=500,
                     help="inputs that choose the activation scales (default 500)")
    sub.add_argument("--per-channel", action="store_true",
                     help="a weight scale (an output-stage shift) per output channel of "
                          "every layer with an activation, not one per layer")
    sub.add_argument("--requant", choices=REQUANTS, default="shift",
                     help="the output stage's requantization: a shift alone, or a "
                          "fixed-point multiplier and a shift (a 32 x 16-bit product per "
                          "row in the arrays' and the network engine's output stages) "
                          "(default shift)")
    sub.add_argument("--calibrate", choices=CALIBRATIONS, default="max",
                     help="each activation's scale from its calibration values: their "
                          "largest, their 99.99th percentile, or the clip of least squared "
                          "error (default max)")
    sub.add_argument("--asymmetric", action="store_true",
                     help="signed activations that only layers read (a layer without a "
                          "ReLU before another) take codes over their own range and a "
                          "zero point of their own, not offset binary's 128")


def _simulator_option(sub):
    sub.add_argument("--simulator", choices=("auto", "verilator", "icarus"), default="auto",
                     help="for --rtl: auto takes Icarus when installed (no C++ build: a "
                          "16x16 array's Verilator model takes minutes to compile the "
                          "first time), else Verilator")


def _simulator(choice):
    """The simulator ``--simulator`` names: ``auto`` is Icarus when installed."""
    if choice != "auto":
        return choice
    return "icarus" if shutil.which("iverilog") and shutil.which("vvp") else "verilator"


def _array_options(sub, *, rtl_default):
    _packing_options(sub, mac_default="parallel")
    sub.add_argument("--fmax-mhz", type=positive_float, default=None,
                     help="clock for images per second (e.g. what codnn synth reports)")
    sub.add_argument("--rtl", type=non_negative_int, default=rtl_default, metavar="N",
                     help=f"run N inputs through the RTL, every result checked against "
                          f"golden (default {rtl_default})")
    _simulator_option(sub)
    sub.add_argument("--port", metavar="PORT", default=None,
                     help="also run --device-images inputs on the board at PORT (a systolic "
                          "design of this array, codnn bitstream --design systolic)")
    sub.add_argument("--baud", type=positive_int, default=115200)
    sub.add_argument("--board-sim", type=positive_int, default=None, metavar="DEPTH",
                     help="instead of --port: the systolic board top in simulation, with "
                          "DEPTH vectors of data memory")
    sub.add_argument("--device-images", type=positive_int, default=1, metavar="N",
                     help="inputs run on the board (default 1)")
    sub.add_argument("-o", "--output", metavar="DIR", default=None,
                     help="folder for report.json and the plots (default "
                          "BUILD_DIR/infer/MODEL; the demo writes a folder per model in it)")
    build_dir_option(sub)
    json_option(sub)


def add_infer(sub):
    sub.description = ("Import an ONNX model, quantize it to the array's integers, pack "
                       "each layer (column combining) and schedule it on the array; report "
                       "float and integer accuracy, per-layer tiles, cycles and utilization "
                       "against a dense array, and with --rtl run inputs through the "
                       "generated RTL, every result checked against golden.")
    sub.add_argument("model", metavar="MODEL.onnx", nargs="?")
    sub.add_argument("--list-ops", action="store_true",
                     help="list the ONNX operators the importer takes, and what each "
                          "becomes, and exit")
    sub.add_argument("--data", default="mnist", metavar="NAME|FILE.npz",
                     help="mnist, digits, or an .npz with inputs x (and labels y) "
                          "(default mnist)")
    sub.add_argument("--engine", choices=("systolic", "tq", "cc-tq"), default="systolic",
                     help="the column-combined array, the term-quantization array, or "
                          "the column-combined array with term-quantized cells (--alpha, "
                          "--gamma and the tq options; golden and its schedule only) "
                          "(default systolic)")
    sub.add_argument("--group", type=positive_int, default=8,
                     help="tq: input channels per weight group (default 8)")
    sub.add_argument("--budget", type=positive_int, default=12,
                     help="tq: weight terms kept per group (default 12)")
    sub.add_argument("--beta", type=positive_int, default=3,
                     help="tq: terms kept per data value (default 3)")
    sub.add_argument("--encoding", choices=ENCODINGS, default="naf",
                     help="tq: term encoding (default naf)")
    _array_options(sub, rtl_default=0)


def _device(args):
    """The board runner for ``infer`` (``--port`` or ``--board-sim``), or None."""
    if args.port is None and args.board_sim is None:
        return None
    if args.port is not None and args.board_sim is not None:
        raise InputError("give --port or --board-sim, not both")
    from ..board import DeviceError, LinkError
    from ..board_flows import run_network_on_device
    from ..flows import ParameterError

    def run(network, q, progress):
        try:
            return run_network_on_device(network, q, rows=args.rows, cols=args.cols,
                                         alpha=args.alpha, port=args.port, baud=args.baud,
                                         sim_depth=args.board_sim, progress=progress)
        except ParameterError as error:
            raise InputError(str(error)) from None
        except (LinkError, DeviceError, OSError) as error:
            raise Failure(str(error)) from None
    return run


def _infer(args, model, data, *, per_model=False):
    """Run ``infer`` for the command line; the report goes to ``-o DIR`` (a folder per
    model with ``per_model``) or ``BUILD_DIR/infer/MODEL``."""
    import json

    from codnn.golden.network import TermQuantization
    from codnn.sim import default_build_root

    from ..model.infer import infer, write_plots
    from ..model.on_board import BoardMismatch
    from ..model.rtl import RtlMismatch
    from ..render import err_console
    tq, alpha, engine = None, args.alpha, getattr(args, "engine", "systolic")
    if engine in ("tq", "cc-tq"):
        tq = TermQuantization(g=args.group, alpha=args.budget, beta=args.beta,
                              encoding=args.encoding)
        alpha = 1 if engine == "tq" else alpha
    stem = Path(model).stem
    if args.output is None:
        folder = Path(args.build_dir or default_build_root()) / "infer" / stem
    else:
        folder = Path(args.output) / stem if per_model else Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} exists and is not a folder")
    simulator = _simulator(args.simulator)
    try:
        report, layers = infer(
            model, data, rows=args.rows, cols=args.cols, alpha=alpha, gamma=args.gamma,
            mac=args.mac, calibration=args.calibration, fmax_mhz=args.fmax_mhz,
            rtl_images=args.rtl, simulator=simulator, build_root=args.build_dir,
            device_images=args.device_images, device=_device(args), tq=tq,
            per_channel=args.per_channel, requant=args.requant, clip=args.calibrate,
            asymmetric=args.asymmetric,
            progress=lambda message: err_console.print(message, highlight=False))
    except RtlMismatch as error:
        raise Failure(f"RTL run FAILED against golden: {error}") from None
    except BoardMismatch as error:
        raise Failure(f"device run FAILED against golden: {error}") from None
    title = (f"{Path(model).name} on a {args.rows}x{args.cols} array, alpha {args.alpha}, "
             f"{args.mac} MACs" if tq is None else
             f"{Path(model).name} on a {args.rows}x{args.cols} "
             + ("TQ array" if alpha == 1 else f"column-combined TQ array, alpha {alpha}")
             + f", g {tq.g}, budget {tq.alpha}, beta {tq.beta}, {tq.encoding}")
    report["plots"] = write_plots(layers, folder, title)
    (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    report["report"] = str(folder / "report.json")
    return report, title


def _print(report, title):
    from ..render import print_record, print_rows
    summary = {k: v for k, v in report.items() if k not in ("layers", "rtl", "device")}
    if report.get("device"):
        summary["device"] = (f"{report['device']['images']} inputs: every accumulator "
                             f"equals golden")
    if report["rtl"]:
        rtl = report["rtl"]
        summary["rtl"] = (f"{rtl['images']} inputs on {rtl['simulator']}: every result "
                          f"equals golden; cycles equal the model: "
                          f"{'yes' if rtl['cycles_equal_model'] else 'NO'}")
    print_record(title, summary)
    print_rows("per layer (cycles per image; dense: the same weights on an alpha-1 array)",
               report["layers"],
               [("layer", "layer"), ("kind", "kind"), ("shape", "N x C"), ("groups", "groups"),
                ("vectors", "vectors"), ("blocks", "blocks"), ("tiles", "tiles"),
                ("dense_tiles", "dense"), ("cycles", "cycles"), ("dense_cycles", "dense"),
                ("utilization", "util"), ("dense_utilization", "dense")])


def run_infer(args):
    from ..render import print_json, print_rows
    if args.list_ops:
        from ..model.onnx_import import OPERATORS
        rows = [{"op": op, "becomes": text} for op, text in OPERATORS.items()]
        if args.json:
            print_json(rows)
        else:
            print_rows("ONNX operators codnn imports (opset 13 and newer)", rows,
                       [("op", "operator"), ("becomes", "becomes")])
        return 0
    if args.model is None:
        raise InputError("give a model (MODEL.onnx), or --list-ops")
    report, title = _infer(args, args.model, args.data)
    if args.json:
        print_json(report)
    else:
        _print(report, title)
    if report["rtl"] and not report["rtl"]["cycles_equal_model"]:
        raise Failure("RTL cycles differ from the cycle model")
    return 0


def add_demo(sub):
    sub.description = ("The main flow on LeNet-5 and MNIST (the models in benchmarks/models): "
                       "import, quantize, pack, golden accuracy on the test split, a few "
                       "images through the RTL equal to golden, the report and the plots, "
                       "for the dense and the column-combined model. --engines instead "
                       "generates, simulates and synthesizes every engine.")
    sub.add_argument("--engines", action="store_true",
                     help="run every engine's own flow (generate, simulate, synthesize)")
    sub.add_argument("--quick", action="store_true",
                     help="with --engines: smaller runs on one simulator (Icarus when "
                          "installed), only the one-lane fmix32 synthesized")
    _array_options(sub, rtl_default=2)


def run_demo(args):
    from ..render import console, print_json, print_rows
    if args.engines:
        from codnn.sim.runner import SimulationFailure

        from ..demo import run_demo as engines_demo
        try:
            return engines_demo(quick=args.quick, build_root=args.build_dir)
        except SimulationFailure as error:
            raise Failure(f"simulation FAILED against golden: {error}") from None
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from codnn.synth.baseline import largest_entry

    from ..render import err_console
    rows, reports = [], []
    baseline = largest_entry("network")
    err_console.print(f"compiling lenet5_mnist_cc for the network engine (a {args.rows}x"
                      f"{args.cols} array, alpha {args.alpha}) beside the infer runs",
                      highlight=False)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        engine_run = pool.submit(_demo_engine, _demo_engine_argv(args, baseline["fmax_mhz"]))
        for name in ("lenet5_mnist", "lenet5_mnist_cc"):
            report, title = _infer(args, MODELS / f"{name}.onnx", "mnist", per_model=True)
            reports.append(report)
            if not args.json:
                _print(report, title)
            rows.append({"model": name, "float": report["float_accuracy"],
                         "integer": report["integer_accuracy"], "tiles": report["tiles"],
                         "tile_ratio": report["tile_ratio"],
                         "cycles": report["cycles_per_image"],
                         "cycle_ratio": report["cycle_ratio"],
                         "rtl": "pass" if report["rtl"] else "-"})
        engine = _engine_figures(engine_run.result(), reports[-1], baseline)
    if args.json:
        print_json({"infer": reports, "engine": engine})
        return 0
    print_rows("codnn demo: LeNet-5 on MNIST, dense model vs column-combined model "
               "(ratios: against a dense array running the same model)", rows,
               [("model", "model"), ("float", "float acc"), ("integer", "int acc"),
                ("tiles", "tiles"), ("tile_ratio", "vs dense"), ("cycles", "cycles/img"),
                ("cycle_ratio", "vs dense"), ("rtl", "RTL = golden")])
    _print_demo_engine(engine)
    console.print("plots and report.json: " + ", ".join(
        str(Path(r["report"]).parent) for r in reports), highlight=False)
    return 0


def _demo_engine_argv(args, fmax):
    """``codnn compile``'s arguments for the demo's engine step: the column-combined
    LeNet-5 on the demo's array, ten inputs through the program, ``args.rtl`` (at most
    one) through the engine's RTL."""
    from codnn.sim import default_build_root
    output = (Path(args.output) / "lenet5_mnist_cc-engine" if args.output else
              Path(args.build_dir or default_build_root()) / "compile" / "lenet5_mnist_cc")
    argv = [str(MODELS / "lenet5_mnist_cc.onnx"), "--rows", str(args.rows), "--cols",
            str(args.cols), "--alpha", str(args.alpha), "--gamma", str(args.gamma),
            "--mac", args.mac, "--calibration", str(args.calibration), "--check", "10",
            "--rtl", str(min(args.rtl, 1)), "--simulator", args.simulator, "--fmax-mhz",
            str(fmax), "-o", str(output)]
    if args.per_channel:
        argv.append("--per-channel")
    if args.build_dir:
        argv += ["--build-dir", args.build_dir]
    return argv


def _demo_engine(argv):
    """The demo's engine step (``compile_model`` on ``argv``); it runs in a process of its
    own beside the two infer runs (the machine's second core)."""
    import argparse
    parser = argparse.ArgumentParser()
    add_compile(parser)
    return compile_model(parser.parse_args(argv))


def _engine_figures(report, cc_report, baseline):
    """The engine step's report with its figures against the host-driven array
    (``cc_report``, infer's) and the clock it quotes images per second at."""
    p = baseline["parameters"]
    report["array_cycles_per_image"] = cc_report["cycles_per_image"]
    report["engine_over_array"] = round(report["cycles_per_image"]
                                        / cc_report["cycles_per_image"], 2)
    report["fmax_mhz"] = baseline["fmax_mhz"]
    report["fmax_source"] = (f"the network engine's baseline ({p['rows']}x{p['cols']}, alpha "
                             f"{p['alpha']}, {p['mac']}, {baseline['device']}: "
                             f"synth/baselines.json)")
    return report


def _print_demo_engine(report):
    from ..render import console, print_rows
    rtl = report.get("rtl")
    print_rows("the column-combined LeNet-5 on the network engine (the whole network on the "
               "device) against the array driven layer by layer (codnn infer)",
               [{"model": "lenet5_mnist_cc", "engine": report["cycles_per_image"],
                 "array": report["array_cycles_per_image"],
                 "ratio": report["engine_over_array"],
                 "ips": round(report["images_per_s"]),
                 "checked": report["checked_inputs"],
                 "rtl": "pass" if rtl else "-"}],       # a mismatch fails the step
               [("model", "model"), ("engine", "engine cycles/img"),
                ("array", "array alone"), ("ratio", "engine / array"),
                ("ips", f"images/s at {report['fmax_mhz']} MHz"),
                ("checked", "program = golden"), ("rtl", "RTL = golden, cycles = model")])
    console.print(f"images per second at the Fmax of {report['fmax_source']}; program, "
                  f"weights and report in {report['folder']}", highlight=False)


def add_compile(sub):
    sub.description = ("Compile an ONNX model for the network engine, which runs a whole "
                       "network without the host: import, quantize and pack it as infer "
                       "does, allocate its tensors in the engine's buffers, and write the "
                       "program (program.json), the weight image (weights.bin) and the "
                       "report (report.json): cycles per image from the engine's cycle "
                       "model and the bytes each memory moves. --check N runs N test inputs "
                       "through the program (the engine's reference interpreter), every "
                       "output checked against the golden integer network. --batch N "
                       "compiles a program over N images (layer by layer or in MBS "
                       "groups) and reports the bytes each schedule moves per image.")
    sub.add_argument("model", metavar="MODEL.onnx")
    sub.add_argument("--data", default="mnist", metavar="NAME|FILE.npz",
                     help="mnist, digits, or an .npz with inputs x (and labels y): "
                          "calibration and --check inputs (default mnist)")
    _packing_options(sub, mac_default="bitserial")
    for name, unit in (("act_words", "words of ROWS activations"),
                       ("acc_words", "words of ROWS accumulators"),
                       ("psum_words", "words of ROWS accumulators"), ("weight_bytes", "bytes")):
        sub.add_argument(f"--{name.replace('_', '-')}", type=positive_int, default=None,
                         metavar="N",
                         help=f"the most the engine's buffer may hold, in {unit} (default: "
                              f"the largest the engine can have); compile sizes it to what "
                              f"the program needs")
    sub.add_argument("--gather-ports", type=positive_int, default=2, metavar="P",
                     help="read ports of each of the activation buffer's lane banks: the "
                          "gather reads P stream slots a cycle, for P copies of the "
                          "buffer's block RAMs (default 2)")
    sub.add_argument("--weight-ports", choices=("auto", "1", "2"), default="auto",
                     help="read ports of the on-chip weight memory: 2 reads a tile's gather "
                          "table beside its cells (a dense layer's tiles load in about half "
                          "the cycles), for a second copy of the memory's block RAMs; 1 "
                          "reads them one after the other; auto (default) takes 2 where it "
                          "saves at least 5 %% of the program's cycles")
    sub.add_argument("--weight-port", choices=WEIGHT_PORTS, default="onchip",
                     help="where the weight image is: on-chip (--weight-bytes of it) or in "
                          "external memory on the engine's AXI4 read port (default onchip)")
    sub.add_argument("--spill-words", type=non_negative_int, default=0, metavar="N",
                     help="external activation memory (words of ROWS activations) on the "
                          "engine's second AXI4 port: tensors that do not fit the "
                          "activation buffer wait there (default 0: none)")
    sub.add_argument("--memory-latency", type=non_negative_int, default=20, metavar="CYCLES",
                     help="with --weight-port axi or --spill-words: cycles from a burst's "
                          "address to its first word, and from a write burst's last word "
                          "to its response, for the report's cycles (default 20)")
    sub.add_argument("--batch", type=positive_int, default=1, metavar="N",
                     help="compile a program that runs N images per start (1..256; needs "
                          "--spill-words: the batch's input waits in external memory), "
                          "split by --schedule (default 1)")
    sub.add_argument("--schedule", choices=SCHEDULES, default="mbs",
                     help="with --batch: every layer its own group (layer) or mini-batch "
                          "serialization's groups of layers (mbs; default)")
    sub.add_argument("--check", type=non_negative_int, default=10, metavar="N",
                     help="run N test inputs through the program against golden "
                          "(default 10)")
    sub.add_argument("--rtl", type=non_negative_int, default=0, metavar="N",
                     help="run the first N of the --check inputs through the engine's RTL "
                          "(cocotb), every output and cycle count checked")
    _simulator_option(sub)
    sub.add_argument("--port", metavar="PORT", default=None,
                     help="also run --device-images of the --check inputs on the board at "
                          "PORT (codnn bitstream --design network, this engine's sizes)")
    sub.add_argument("--baud", type=positive_int, default=115200)
    sub.add_argument("--board-sim", action="store_true",
                     help="instead of --port: the network board top in simulation, its "
                          "memories sized for the program (Verilator)")
    sub.add_argument("--device-images", type=positive_int, default=1, metavar="N",
                     help="inputs run on the board (default 1)")
    sub.add_argument("--fmax-mhz", type=positive_float, default=None,
                     help="clock for latency and images per second")
    sub.add_argument("-o", "--output", metavar="DIR", default=None,
                     help="folder for program.json, weights.bin and report.json (default "
                          "BUILD_DIR/compile/MODEL)")
    sub.add_argument("--board", metavar="BOARD", default=None,
                     help="then build the bitstream of the engine sized for the program "
                          "on BOARD (codnn bitstream --board BOARD --program DIR)")
    build_dir_option(sub)
    json_option(sub)


def _compiled_on_device(args, compiled, q):
    """``compile``'s board run (``--port`` or ``--board-sim``): its report, or Failure."""
    from ..board import DeviceError, LinkError
    from ..board_flows import run_compiled_on_device
    from ..flows import ParameterError
    from ..render import err_console
    where = "the simulated board top" if args.board_sim else args.port
    err_console.print(f"{len(q)} inputs on {where}", highlight=False)
    try:
        report = run_compiled_on_device(compiled, q, port=args.port, baud=args.baud,
                                        sim=args.board_sim)
    except ParameterError as error:
        raise InputError(str(error)) from None
    except (LinkError, DeviceError, OSError) as error:
        raise Failure(str(error)) from None
    for k, image in enumerate(report["images"]):
        wrong = [name for name in ("outputs_equal_golden", "class_equal_golden",
                                   "cycles_equal_model") if not image[name]]
        if wrong:
            raise Failure(f"input {k} on the device FAILED: not {', '.join(wrong)} "
                          f"(cycles {image['cycles']}, class {image['class']})")
    return report


#: The least share of a program's cycles the weight memory's second read port must save
#: for ``codnn compile --weight-ports auto`` to build it (it doubles the memory's block
#: RAMs on ECP5).
AUTO_WEIGHT_PORTS_GAIN = 0.05


def _weight_ports(args):
    """The weight memory's read ports ``codnn compile`` first compiles for: the flag's, or
    for ``auto`` two (``_weight_ports_that_pay`` then decides), one with the weights in
    external memory (there is no on-chip weight memory)."""
    if args.weight_ports != "auto":
        return int(args.weight_ports)
    return 1 if args.weight_port == "axi" else 2


def _weight_ports_that_pay(build, result, engine):
    """``--weight-ports auto``: ``(result, engine)`` as compiled with two read ports of the
    on-chip weight memory if they take at least ``AUTO_WEIGHT_PORTS_GAIN`` fewer cycles than
    one, else compiled again (``build``) with one."""
    single = replace(engine, weight_ports=1)
    alone = build(single)
    two, one = (getattr(r, "compiled", r).cycles for r in (result, alone))
    if two <= (1 - AUTO_WEIGHT_PORTS_GAIN) * one:
        return result, engine
    return alone, single


def _compile_target(args, folder):
    """The engine ``codnn compile`` sizes its buffers within (each at its flag, or the
    largest the engine can have), whether it runs on a device (``--port`` or
    ``--board-sim``) and whether its weights are external (``--weight-port axi``);
    ``InputError`` for settings that do not go together."""
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} exists and is not a folder")
    if args.rtl > args.check:
        raise InputError(f"--rtl {args.rtl} needs as many --check inputs, not {args.check}")
    on_device = args.port is not None or args.board_sim
    if args.port is not None and args.board_sim:
        raise InputError("give --port or --board-sim, not both")
    if on_device and args.device_images > args.check:
        raise InputError(f"--device-images {args.device_images} needs as many --check "
                         f"inputs, not {args.check}")
    engine = largest_buffers(EngineConfig(rows=args.rows, cols=args.cols, alpha=args.alpha,
                                          mac=args.mac, spill_words=args.spill_words,
                                          gather_ports=args.gather_ports,
                                          weight_ports=_weight_ports(args),
                                          requant=args.requant))
    engine = replace(engine, **{name: getattr(args, name) for name in BUFFERS
                                if getattr(args, name) is not None})
    if on_device and args.spill_words:
        raise InputError("the board top has no external activation memory: --spill-words "
                         "runs with --rtl only")
    if args.batch > 1 and not args.spill_words:
        raise InputError("--batch needs --spill-words: a batch's input waits in external "
                         "activation memory")
    external = args.weight_port == "axi"
    if external:
        if on_device:
            raise InputError("the board top holds its weights on chip: --weight-port axi "
                             "runs with --rtl only")
        engine = replace(engine, weight_bytes=external_weight_bytes(engine))
    return engine, on_device, external


def run_compile(args):
    from ..render import print_json
    if args.board is not None:
        from codnn.synth.bitstream import get_board
        try:
            get_board(args.board)
        except ValueError as error:
            raise InputError(str(error)) from None
        if args.weight_port == "axi" or args.spill_words:
            raise InputError("--board builds the board top, which holds its weights and "
                             "activations on chip: drop --weight-port axi and --spill-words")
    report = compile_model(args)
    if args.json and args.board is None:
        print_json(report)
    elif not args.json:
        _print_compile_report(args, report)
    if args.board is None:
        return 0
    from codnn.synth.tools import SynthesisError, ToolMissing

    from ..flows import ParameterError
    from .hardware import program_bitstream
    try:                                    # with --json, the bitstream's report alone
        return program_bitstream(args, report["folder"], args.board)
    except ParameterError as error:
        raise InputError(str(error)) from None
    except (SynthesisError, ToolMissing) as error:
        raise Failure(str(error)) from None


def compile_model(args):
    """``codnn compile`` without its printing: compile, check, write the folder and run
    the RTL or the device as ``args`` asks; return the report (``folder`` where it is).
    The demo runs it too."""
    import json
    from dataclasses import asdict

    import numpy as np

    from codnn.golden.network_program import encode_program, run_program
    from codnn.sim import default_build_root

    from ..model.batch_schedule import compile_batch
    from ..model.compile import compile_network, fit_buffers

    from ..model.infer import load_inputs
    from ..model.onnx_import import load_onnx
    from ..model.quantize import quantize_network
    from ..render import err_console
    folder = Path(args.output or Path(args.build_dir or default_build_root()) / "compile"
                  / Path(args.model).stem)
    limits, on_device, external = _compile_target(args, folder)
    network = load_onnx(args.model)
    x_cal, x, _, _ = load_inputs(args.data, network, args.calibration)
    try:
        integer = quantize_network(network, x_cal, alpha=args.alpha, gamma=args.gamma,
                                   per_channel=args.per_channel, requant=args.requant,
                                   clip=args.calibrate, asymmetric=args.asymmetric)
    except ValueError as error:
        raise ModelError(f"{args.model}: {error}") from None
    q = integer.quantize_input(x[:args.check])
    plan = None
    sized = [name for name in BUFFERS if name != "weight_bytes" or not external]
    # A program per size tried: seconds for LeNet-5, half a minute for ResNet-20.
    with err_console.status("compiling, the engine's buffers sized to the program..."):
        if args.batch > 1:
            def build(e):
                return compile_batch(integer, e, args.batch, args.schedule)
        else:
            def build(e):
                return compile_network(integer, e)
        result, engine = fit_buffers(build, limits, sized=sized)
        if args.weight_ports == "auto" and not external:
            result, engine = _weight_ports_that_pay(build, result, engine)
        compiled = getattr(result, "compiled", result)
        if args.batch > 1:
            plan = result
            # The batch is the check inputs, repeated as often as it takes.
            q = q[np.arange(args.batch) % len(q)][None] if len(q) else q
    golden = [integer.run(x) for x in q] if plan else (integer.run(q) if len(q) else q)
    for k, image in enumerate(q):
        got = run_program(compiled.program, compiled.image, image)
        if not np.array_equal(got, golden[k]):
            raise Failure(f"input {k}: the program's output differs from the golden "
                          f"integer network")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program.json").write_text(json.dumps(compiled.program.to_dict(), indent=1)
                                         + "\n")
    (folder / "program.bin").write_bytes(encode_program(compiled.program))
    (folder / "weights.bin").write_bytes(compiled.image)
    cycles = compiled.cycles
    traffic = compiled.traffic()
    if external or args.spill_words:
        latency = args.memory_latency
        cycles = compiled.external_cycles(latency if external else 0, latency, latency)
    if external:
        stride = word_stride(image_word(engine))
        traffic["external_weights"] = traffic.pop("weights") * stride // image_word(engine)
    report = {"model": str(args.model), "engine": asdict(engine),
              "buffers": _buffer_report(engine, limits, compiled, args.weight_port),
              "weight_port": args.weight_port, "steps": len(compiled.costs),
              "weight_image_bytes": len(compiled.image),
              "cycles_per_image": cycles if args.batch == 1 else round(cycles / args.batch, 1),
              "bytes_per_image": traffic if args.batch == 1 else {
                  k: round(v / args.batch, 1) for k, v in traffic.items()},
              "checked_inputs": len(q) * args.batch}
    if plan:
        report["batch"] = {"images": args.batch, "schedule": args.schedule,
                           "cycles_per_run": cycles, "bytes_per_run": traffic,
                           "groups": [{"steps": list(names), "sub_batch": g.sub_batch}
                                      for g, names in zip(plan.groups, plan.names)]}

    if external or args.spill_words:
        report["memory_latency"] = args.memory_latency
    if args.fmax_mhz:
        report["latency_us"] = cycles / args.fmax_mhz          # of a run: the batch's
        report["images_per_s"] = args.fmax_mhz * 1e6 * args.batch / cycles
    if args.rtl:
        report["rtl"] = _compiled_on_rtl(args, compiled, q[:args.rtl], external)
    if on_device:
        report["device"] = _compiled_on_device(args, compiled, q[:args.device_images])
    report["per_step"] = [{"name": cost.name, "op": cost.op, "cycles": cost.cycles,
                           **asdict(cost)} for cost in compiled.costs]
    (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    report["folder"] = str(folder)
    return report


def _buffer_report(engine, limits, compiled, weight_port):
    """The buffers ``compile`` chose (up to ``limits``), and the on-chip memory the engine
    built for the program takes (``codnn.hw.network.NetworkEngine.memories``, its ECP5
    block RAMs estimated)."""
    from codnn.hw.network import NetworkEngine
    from codnn.synth.devices import memory_blocks
    memories = NetworkEngine.program_memories(compiled.program, weight_port)
    bits = {name: width * depth * copies for name, (width, depth, copies) in memories.items()}
    return {"chosen": {name: getattr(engine, name) for name in BUFFERS},
            "limits": {name: getattr(limits, name) for name in BUFFERS},
            "memory_bits": bits, "memory_kbit": round(sum(bits.values()) / 1024, 1),
            "ecp5_bram_blocks": sum(memory_blocks("ecp5", memories).values())}


def _compiled_on_rtl(args, compiled, images, external):
    """Run ``images`` through the engine's RTL (``--rtl``), held against golden by its
    bench; the report's ``rtl`` entry."""
    from codnn.sim.runner import SimulationFailure

    from ..model.engine_rtl import run_on_engine
    from ..render import err_console
    simulator = _simulator(args.simulator)
    err_console.print(f"{args.rtl} inputs through the engine's RTL on {simulator}",
                      highlight=False)
    try:
        rtl = run_on_engine(compiled, images, simulator=simulator,
                            build_root=args.build_dir, weight_port=args.weight_port)
    except SimulationFailure as error:
        raise Failure(f"engine RTL FAILED against golden: {error}") from None
    entry = {"images": rtl["images"], "simulator": simulator,
             "cycles_equal_model": rtl["cycles"] == [rtl["model_cycles"]] * rtl["images"]}
    if external:
        entry["memory_latency"] = rtl["memory_latency"]
    if args.spill_words:
        entry["activation_latencies"] = rtl["act_latencies"]
    return entry


def _print_compile_report(args, report):
    """``codnn compile``'s report as a record and a table of its steps."""
    from ..render import print_record, print_rows
    print_record(f"{Path(args.model).name} on the network engine: a {args.rows}x{args.cols} "
                 f"array, alpha {args.alpha}, {args.mac} MACs, {args.gather_ports} read "
                 f"ports a lane bank",
                 {k: v for k, v in report.items() if k not in ("per_step", "engine",
                                                                "buffers")})
    buffers = report["buffers"]
    memory = {"act_words": "activations", "acc_words": "accumulators",
              "psum_words": "partial_sums", "weight_bytes": "weights"}
    print_rows(f"buffers, sized to the program (on-chip memory {buffers['memory_kbit']} "
               f"kbit, about {buffers['ecp5_bram_blocks']} ECP5 block RAMs)",
               [{"buffer": name, "chosen": buffers["chosen"][name],
                 "limit": buffers["limits"][name],
                 "kbit": round(buffers["memory_bits"].get(memory[name], 0) / 1024, 1)}
                for name in buffers["chosen"]],
               [("buffer", "buffer"), ("chosen", "chosen"), ("limit", "limit"),
                ("kbit", "on-chip kbit")])
    print_rows("per step (cycles and bytes per image)" if args.batch == 1 else
               f"per step (cycles and bytes, each step over its sub-batch of the "
               f"{args.batch} images)", report["per_step"],
               [("name", "step"), ("op", "op"), ("cycles", "cycles"),
                ("act_reads", "act words read"), ("act_writes", "written"),
                ("acc_writes", "acc words written"), ("acc_reads", "read"),
                ("psum_words", "psum words"), ("weight_bytes", "weight bytes"),
                ("external_reads", "ext words read"), ("external_writes", "written")])


COMMANDS = {"infer": (add_infer, run_infer), "compile": (add_compile, run_compile),
            "demo": (add_demo, run_demo)}
