"""The ``codnn`` command line.

Every command has ``--help``, prints a table by default and JSON with ``--json``. Bad
arguments give one line on stderr saying what is wrong and exit code 2; a failed simulation
or synthesis exits with 1.

The commands live in six modules by what they need: ``files`` (NumPy only: ``pack``,
``quantize``, ``compress``, ``decompress``, ``pcap``), ``hardware`` (Amaranth, the
simulators and the synthesis tools: ``doctor``, ``generate``, ``simulate``, ``synth``,
``sweep``, ``bitstream``), ``board`` (the host link: ``run``, ``stream``), ``network``
(whole networks: ``infer``, ``compile``, ``demo``; Amaranth only for an RTL run), ``training``
(PyTorch: ``train``; NumPy only: ``predict``) and ``formal`` (Amaranth and SymbiYosys:
``prove``).
Only the module of the command given is imported, so a NumPy command starts without
loading Amaranth. A module holds, per command, a function adding its arguments and one
running it (``COMMANDS``), and the exceptions that mean bad input (exit 2) or a failure
(exit 1).
"""

import importlib
import os
import sys

from .. import __version__
from .options import Failure, Parser, UsageError

__all__ = ["main", "COMMANDS"]

#: Each command: the module that holds it, and its one-line help.
COMMANDS = {
    "doctor": ("hardware", "check the toolchain"),
    "generate": ("hardware", "generate Verilog and manifest.json"),
    "simulate": ("hardware", "simulate against the golden model"),
    "synth": ("hardware", "synthesize, place and time on an FPGA"),
    "pack": ("files", "pack sparse layers by column combining"),
    "quantize": ("files", "term-quantize layers (term revealing)"),
    "compress": ("files", "compress gradients (INCEPTIONN-style, TernGrad or Rice)"),
    "decompress": ("files", "decode a file written by codnn compress"),
    "pcap": ("files", "apply the NIC packet rule to a packet capture"),
    "run": ("board", "run a packed or term-quantized layer on a board (or a simulated one)"),
    "stream": ("board", "stream gradients through a NIC engine on a board (or a simulated "
                        "one)"),
    "bitstream": ("hardware", "build a board's bitstream of a host-link design"),
    "sweep": ("hardware", "synthesize a grid of configurations in parallel"),
    "infer": ("network", "run a whole network (ONNX) on the arrays: accuracy, cycles, RTL"),
    "compile": ("network", "compile a network (ONNX) for the network engine: program, "
                           "weight image, cycles and memory traffic"),
    "demo": ("network", "run the main flow end to end: LeNet-5 on MNIST"),
    "train": ("training", "train a model for the arrays (column combining or term "
                          "quantization), or data-parallel over emulated links"),
    "predict": ("training", "predict distributed training's iteration time and what-ifs"),
    "traffic": ("training", "DRAM traffic of a training iteration, layer by layer and with "
                            "mini-batch serialization"),
    "prove": ("formal", "prove an engine's properties with SymbiYosys and z3"),
}


def _parser(chosen):
    """The parser, with the arguments of command ``chosen`` (its module imported) and the
    one-line help of every other."""
    parser = Parser(prog="codnn", description="Hardware generator for algorithm/hardware "
                    "co-design of deep learning.")
    parser.add_argument("--version", action="version", version=f"codnn {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     parser_class=Parser)
    module = None
    for name, (module_name, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text[0].upper()
                                  + help_text[1:] + ".")
        if name == chosen:
            module = importlib.import_module(f".{module_name}", __name__)
            module.COMMANDS[name][0](sub)
    return parser, module


def main(argv=None):
    """Run the command line; return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    module = None
    try:
        parser, module = _parser(chosen if chosen in COMMANDS else None)
        args = parser.parse_args(argv)
        return module.COMMANDS[args.command][1](args)
    except Exception as error:
        usage = (UsageError, *(module.USAGE_ERRORS if module else ()))
        failures = (Failure, *(module.FAILURES if module else ()))
        if isinstance(error, usage):
            message = str(error)
            if not message.startswith("codnn"):
                message = f"codnn: error: {message}"
            print(message.splitlines()[0], file=sys.stderr)
            return 2
        if isinstance(error, failures):
            print(f"codnn: error: {error}", file=sys.stderr)
            return 1
        if isinstance(error, BrokenPipeError):
            # The reader of our output went away (``codnn ... --json | head -1``): say
            # nothing more, and let the interpreter's final flush write nowhere.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        if isinstance(error, OSError) and error.filename is not None:
            print(f"codnn: error: {error.filename}: {error.strerror}", file=sys.stderr)
            return 2
        raise
    except KeyboardInterrupt:
        print("codnn: interrupted", file=sys.stderr)
        return 130
