"""``codnn prove``: an engine's formal properties through SymbiYosys and z3
(docs/formal.md)."""

from pathlib import Path

from codnn.sim.formal import DECIDED, MODES, ProofError, run_proof
from codnn.sim.runner import default_build_root
from codnn.synth.tools import ToolMissing

from .options import UsageError, build_dir_option, json_option, positive_int

__all__ = ["COMMANDS", "USAGE_ERRORS", "FAILURES"]

USAGE_ERRORS = ()
FAILURES = (ProofError, ToolMissing)
#: Seconds a proof may take by default: the longest ones in docs/formal.md take minutes.
TIME_LIMIT = 1800


def _setting(text):
    name, sep, value = text.partition("=")
    if not sep or not value.lstrip("-").isdigit():
        raise UsageError(f"a setting is NAME=INTEGER, not {text!r}")
    return name, int(value)


def add_prove(sub):
    from codnn.hw.formal.proofs import PROOFS
    sub.description = ("Prove an engine's properties (stream rules, beats conserved and in "
                       "order, latency) with SymbiYosys and z3: each run is proved (every "
                       "reachable state), bounded (the first DEPTH cycles), failed (the "
                       "cycle and a counterexample VCD) or unknown. Proofs: "
                       + ", ".join(PROOFS) + ".")
    sub.add_argument("proof", choices=[*PROOFS, "all"], metavar="PROOF",
                     help=f"one of {', '.join(PROOFS)}, or all")
    sub.add_argument("--depth", type=positive_int, default=None,
                     help="cycles to check, or the induction's depth (default: the proof's)")
    sub.add_argument("--mode", choices=MODES, default=None,
                     help="bmc, prove (k-induction) or cover (default: the proof's)")
    sub.add_argument("--set", type=_setting, action="append", default=[], metavar="NAME=N",
                     help="a parameter of the design (e.g. width=16 for skid)")
    sub.add_argument("--timeout", type=positive_int, default=TIME_LIMIT, metavar="SECONDS",
                     help="stop a proof that runs longer and report it as not finished "
                          f"(default {TIME_LIMIT})")
    build_dir_option(sub)
    json_option(sub)


def run_prove(args):
    from codnn.hw.formal.proofs import PROOFS
    from ..render import err_console, print_json, print_rows
    names = list(PROOFS) if args.proof == "all" else [args.proof]
    folder = (Path(args.build_dir) if args.build_dir else default_build_root()) / "prove"
    rows = []
    for name in names:
        spec = PROOFS[name]
        settings = {**spec.params, **dict(args.set)}
        unknown = set(dict(args.set)) - set(spec.params)
        if unknown:
            raise UsageError(f"{name} has no parameter {', '.join(sorted(unknown))} (it has "
                             f"{', '.join(spec.params) or 'none'})")
        try:
            top = spec.build(**settings)
        except (TypeError, ValueError) as error:    # a design's own parameter checks
            raise UsageError(f"{name}: {error}") from None
        with err_console.status(f"proving {name} ..."):
            proof = run_proof(top, name, folder,
                              mode=args.mode or spec.mode, depth=args.depth or spec.depth,
                              timeout=args.timeout)
        rows.append({"proof": name, "mode": proof.mode, "depth": proof.depth,
                     "status": proof.status, "step": proof.step,
                     "failed": ", ".join(proof.failed) or None,
                     "vcd": str(proof.vcd) if proof.vcd else None,
                     "seconds": proof.seconds, "summary": proof.summary(),
                     "properties": list(spec.properties)})
    if args.json:
        print_json(rows)
    else:
        print_rows("codnn prove", rows, [("proof", "proof"), ("mode", "mode"),
                                         ("depth", "depth"), ("status", "status"),
                                         ("seconds", "s"), ("summary", "what it shows")])
    return 0 if all(row["status"] == DECIDED[row["mode"]] for row in rows) else 1


COMMANDS = {"prove": (add_prove, run_prove)}
