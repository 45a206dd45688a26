"""Commands that talk to a board top over the host link (or to a simulated one): ``run``
and ``stream``. The work is in ``codnn.board_flows``."""

import sys

from ..board import DeviceError, LinkError
from ..flows import ParameterError
from ..packfile import WeightFileError
from ..render import err_console
from .options import (
    Failure,
    bound_bits_option,
    json_option,
    non_negative_int,
    positive_float,
    positive_int,
    show,
)

__all__ = ["COMMANDS", "USAGE_ERRORS", "FAILURES"]

USAGE_ERRORS = (ParameterError, WeightFileError)
FAILURES = ()


def _board_options(sub):
    where = sub.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="serial port of the board, e.g. /dev/ttyUSB0")
    where.add_argument("--sim", action="store_true",
                       help="run on the simulated board top (Verilator)")
    sub.add_argument("--baud", type=positive_int, default=115200,
                     help="baud rate (default 115200)")


def _device_errors(work):
    """``work()``, with a device's error, silence or a failed port as a ``Failure``."""
    try:
        return work()
    except (LinkError, DeviceError, OSError) as error:
        raise Failure(str(error)) from None


def add_run(sub):
    sub.description = ("Run one layer on a board top (hw/soc) through the UART host link, "
                       "tile by tile, and check the accumulators against golden: a packed "
                       "layer (codnn pack) on the systolic array, a term-quantized one (codnn "
                       "quantize) on the TQ array.")
    sub.add_argument("layers", metavar="LAYERS.npz", help="written by codnn pack or codnn "
                     "quantize")
    sub.add_argument("inputs", metavar="INPUTS.npy", help="integer inputs, channels x vectors")
    sub.add_argument("--layer", default=None, help="layer name (default: the first)")
    _board_options(sub)
    for name, default in (("rows", 4), ("cols", 4), ("depth", 16)):
        sub.add_argument(f"--{name}", type=positive_int, default=default,
                         help=f"--sim: array {name} (default {default})")
    sub.add_argument("--beta", type=positive_int, default=3,
                     help="--sim, TQ array: terms kept per data value (default 3)")
    json_option(sub)


def run_run(args):
    from ..board_flows import run_layer_file
    where = "the simulated board" if args.sim else args.port
    sim = ({"rows": args.rows, "cols": args.cols, "depth": args.depth, "beta": args.beta}
           if args.sim else None)
    logged = not sys.stderr.isatty()
    with err_console.status(f"running {args.layer or 'the layer'} on {where}...") as status:
        def progress(done, total, cycles):
            line = f"run {done}/{total} on {where}, {cycles} device cycles so far"
            status.update(line + "...")
            if logged:                      # a log file sees each step too
                print(f"codnn run: {line}", file=sys.stderr, flush=True)
        report = _device_errors(lambda: run_layer_file(
            args.layers, args.inputs, layer=args.layer, port=args.port, baud=args.baud,
            sim=sim, progress=progress))
    show(args, "codnn run", report)
    return 0 if report["result"] == "pass" else 1


def add_stream(sub):
    from codnn.hw.nic import NIC_ENGINES
    sub.description = ("Send gradients as messages through the NIC engine of a board top "
                       "(hw/soc NicSoc) over the UART host link and check every output byte "
                       "against golden; decoders get the messages golden encodes.")
    sub.add_argument("gradients", metavar="GRADS", help=".npy or .npz of gradients")
    _board_options(sub)
    sub.add_argument("--kind", choices=list(NIC_ENGINES), default="compressor",
                     help="--sim: the engine (default compressor; a board says its own)")
    sub.add_argument("--lanes", type=positive_int, default=2,
                     help="--sim: float32 values per beat (default 2)")
    sub.add_argument("--depth", type=positive_int, default=64,
                     help="--sim: beats held in and out (default 64)")
    sub.add_argument("--message-values", type=positive_int, default=64,
                     help="values per message (default 64)")
    bound_bits_option(sub, type=positive_int, what="INCEPTIONN ")
    sub.add_argument("--seed", type=non_negative_int, default=0,
                     help="TernGrad seed (default 0)")
    sub.add_argument("--scaler", type=positive_float, default=None,
                     help="TernGrad scaler (default 2.5 x the std of the gradients)")
    json_option(sub)


def run_stream(args):
    from ..board_flows import stream_gradient_file
    where = "the simulated board" if args.sim else args.port
    sim = ({"kind": args.kind, "lanes": args.lanes, "depth": args.depth}
           if args.sim else None)
    with err_console.status(f"streaming {args.gradients} through {where}..."):
        report = _device_errors(lambda: stream_gradient_file(
            args.gradients, message_values=args.message_values, bound_bits=args.bound_bits,
            seed=args.seed, scaler=args.scaler, port=args.port, baud=args.baud, sim=sim))
    show(args, f"codnn stream ({report['engine']})", report)
    return 0 if report["result"] == "pass" else 1


COMMANDS = {"run": (add_run, run_run), "stream": (add_stream, run_stream)}
