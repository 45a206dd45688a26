"""What the papers' reproduction scripts share: their command line (``--out``,
``--networks``), the printed table, the CSV (``write_csv``) and the PNG."""

import argparse
import csv
from pathlib import Path

from codnn.render import print_rows

__all__ = ["reproduce", "write_csv"]


def write_csv(path, rows, fields=None):
    """Rows (dicts with the same keys) as a CSV file with a header; with ``fields``, those
    columns only (other keys left out)."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields or list(rows[0]),
                                extrasaction="ignore" if fields else "raise")
        writer.writeheader()
        writer.writerows(rows)


def reproduce(doc, networks, name, title, rows_of, plot):
    """Parse the command line, run ``rows_of(network, out)`` for each network asked, print
    the rows as a table titled ``title``, write ``OUT/name.csv`` and the figure
    ``plot(pyplot, rows)`` returns as ``OUT/name.png``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/benchmarks") / name)
    parser.add_argument("--networks", default=",".join(networks),
                        help=f"comma-separated, of {', '.join(networks)}")
    args = parser.parse_args()
    chosen = args.networks.split(",")
    unknown = set(chosen) - set(networks)
    if unknown:
        parser.error(f"unknown networks {', '.join(sorted(unknown))}")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [row for network in chosen for row in rows_of(network, args.out)]
    print_rows(title, rows, [(k, k.replace("_", " ")) for k in rows[0]])
    write_csv(args.out / f"{name}.csv", rows)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plot(plt, rows).savefig(args.out / f"{name}.png", dpi=120)
    print(f"wrote {args.out / f'{name}.csv'} and {args.out / f'{name}.png'}")
