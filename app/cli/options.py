"""What every command module shares: the two exit-code exceptions, the argument parser
class, argument types (numbers, output paths) and options several commands take."""

import argparse
import os
from pathlib import Path

__all__ = ["UsageError", "Failure", "Parser", "positive_int", "non_negative_int",
           "positive_float", "non_negative_float", "probability", "output_file",
           "output_folder", "add_param", "bound_bits_option", "json_option",
           "build_dir_option", "show", "params"]


class UsageError(Exception):
    """Bad arguments or input files: reported in one line, exit code 2."""


class Failure(Exception):
    """The work ran and failed (a device error, a missing tool): one line, exit code 1."""


class Parser(argparse.ArgumentParser):
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


positive_int = _number(int, lambda v: v > 0, "a positive integer")
non_negative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: 0 < v < float("inf"), "a positive number")
non_negative_float = _number(float, lambda v: 0 <= v < float("inf"), "a finite number >= 0")
probability = _number(float, lambda v: 0 <= v < 1, "a probability in [0, 1)")


def output_file(suffix=None):
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


def output_folder(text):
    """An argparse type: the folder ``generate`` writes into (created if missing)."""
    if not text:
        raise argparse.ArgumentTypeError("the output folder is empty")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a folder")
    return path


def add_param(parser, param, prefix, default_text=None):
    """Add an engine parameter (``codnn.engines.Param``) as ``--name``."""
    option = f"--{param.name.replace('_', '-')}"
    if default_text is None:
        default_text = "none" if param.default is None else param.default
    common = {"dest": f"{prefix}{param.name}", "default": param.default,
              "help": f"{param.help} (default {default_text})"}
    if param.type is bool:
        parser.add_argument(option, action=argparse.BooleanOptionalAction, **common)
    elif param.type is int:
        parser.add_argument(option, type=non_negative_int, **common)
    else:
        parser.add_argument(option, type=param.type, choices=param.choices, **common)


def bound_bits_option(parser, *, type, what="", unset=False):
    """``--bound-bits``: ``b`` of the INCEPTIONN error bound ``2**-b`` (``what`` prefixes
    the help, e.g. the codec it applies to); with ``unset`` its value is None unless
    given (the command fills in the default where it applies)."""
    from codnn.golden.inceptionn import BOUND_BITS, DEFAULT_BOUND_BITS
    parser.add_argument("--bound-bits", type=type, default=None if unset else DEFAULT_BOUND_BITS,
                        help=f"{what}error bound 2**-b, b in {BOUND_BITS[0]}.."
                             f"{BOUND_BITS[-1]} (default {DEFAULT_BOUND_BITS})")


def json_option(parser, what="the report"):
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def build_dir_option(parser):
    parser.add_argument("--build-dir", metavar="DIR", default=None,
                        help="artifact folder (default $CODNN_BUILD_DIR or ./build)")


def show(args, title, report):
    """Print a command's report (a table, or JSON with ``--json``); return exit code 0."""
    from ..render import print_json, print_record
    if args.json:
        print_json(report)
    else:
        print_record(title, report)
    return 0


def params(args, prefix="param_"):
    """The options given with ``prefix`` (engine or workload parameters), by name."""
    return {key[len(prefix):]: value for key, value in vars(args).items()
            if key.startswith(prefix)}
