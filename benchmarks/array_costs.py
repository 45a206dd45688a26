"""Cost per cell of the arrays against their size: LUT, FF, BRAM, DSP, Fmax and throughput.

Usage: python benchmarks/array_costs.py [--device ecp5-85k] [--sizes 2,4,8,16]
       [--arrays parallel,bitserial,tq] [--workers N] [-o PREFIX]

Synthesizes square arrays of each size (through ``codnn.sweep.run_points``: cached, so a
second run only builds what changed) and prints, per array and size, the resources per
cell, Fmax, MACs per second per LUT and, for the TQ array, term pairs per second per LUT.
Arrays: the column-combined array with parallel or bit-serial MACs (8-bit weights and data,
alpha 8, 32-bit accumulators, DSP blocks where the device has them) and the TQ array (g 8,
alpha 12, beta 3, NAF). A size that does not fit says so in its row. Writes PREFIX.csv,
PREFIX.json and PREFIX.png (per-cell LUT and FF, and Fmax, against cells), plus the sweep's
Pareto plot of throughput against LUTs with the synthesis rows (PREFIX-pareto.{png,csv,json}).
"""

import argparse
import json
from pathlib import Path

from codnn.render import print_rows
from codnn.sim.runner import default_build_root
from codnn.sweep import run_points, write_sweep
from reproduction import write_csv

ARRAYS = {
    "parallel": ("systolic", {"alpha": 8, "mac": "parallel"}),
    "bitserial": ("systolic", {"alpha": 8, "mac": "bitserial"}),
    "tq": ("tq", {"g": 8, "budget": 12, "beta": 3}),
}


def term_pairs_per_cycle(array, size):
    """A TQ cell pairs one weight term with one data term a cycle."""
    return size * size if array == "tq" else None


def cost_row(array, size, row):
    cells = size * size
    out = {"array": array, "size": f"{size}x{size}", "status": row["status"]}
    if row["status"] != "ok":
        return out
    lut = row["lut"]
    throughput = row["throughput_per_s"]
    pairs = term_pairs_per_cycle(array, size)
    out.update({
        "lut_per_cell": lut / cells, "ff_per_cell": row["ff"] / cells,
        "bram": row["bram"], "dsp": row["dsp"], "fmax_mhz": row["fmax_mhz"],
        "mac_per_s_per_lut": throughput / lut,
        "pairs_per_s_per_lut": (pairs * row["fmax_mhz"] * 1e6 / lut) if pairs else None,
    })
    return out


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (costs, speed) = pyplot.subplots(1, 2, figsize=(11, 4.5))
    for index, array in enumerate(dict.fromkeys(r["array"] for r in rows)):
        mine = [r for r in rows if r["array"] == array and r["status"] == "ok"]
        cells = [int(r["size"].split("x")[0]) ** 2 for r in mine]
        color = f"C{index}"
        costs.plot(cells, [r["lut_per_cell"] for r in mine], "o-", color=color,
                   label=f"{array} LUT")
        costs.plot(cells, [r["ff_per_cell"] for r in mine], "s--", color=color,
                   label=f"{array} FF")
        speed.plot(cells, [r["fmax_mhz"] for r in mine], "o-", color=color, label=array)
    for axes, label in ((costs, "per cell"), (speed, "Fmax (MHz)")):
        axes.set_xscale("log", base=2)
        axes.set_xlabel("cells")
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    costs.set_yscale("log")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="ecp5-85k")
    parser.add_argument("--sizes", default="2,4,8,16")
    parser.add_argument("--arrays", default=",".join(ARRAYS))
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("-o", "--output", default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    arrays = args.arrays.split(",")
    unknown = [a for a in arrays if a not in ARRAYS]
    if unknown:
        parser.error(f"unknown array {unknown[0]!r}: one of {', '.join(ARRAYS)}")
    out = Path(args.output or Path(default_build_root()) / "benchmarks" / "array_costs")
    points = [(ARRAYS[a][0], {"rows": n, "cols": n, **ARRAYS[a][1]}, args.device)
              for a in arrays for n in sizes]
    keys = [(a, n) for a in arrays for n in sizes]

    def progress(done, total, row):
        print(f"[{done}/{total}] {row['engine']} {row['rows']}x{row['cols']} "
              f"{row.get('mac', '')}: {row['status']}", flush=True)

    rows = run_points(points, workers=args.workers, progress=progress)
    table = [cost_row(a, n, row) for (a, n), row in zip(keys, rows)]
    print_rows(f"Arrays on {args.device} (per cell; throughput at Fmax)", table, [
        ("array", "array"), ("size", "size"), ("lut_per_cell", "LUT/cell"),
        ("ff_per_cell", "FF/cell"), ("bram", "BRAM"), ("dsp", "DSP"), ("fmax_mhz", "Fmax MHz"),
        ("mac_per_s_per_lut", "MAC/s per LUT"), ("pairs_per_s_per_lut", "pairs/s per LUT"),
        ("status", "status")])
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(out.with_suffix(".csv"), table, list(dict.fromkeys(k for r in table for k in r)))
    out.with_suffix(".json").write_text(json.dumps({"device": args.device, "rows": table},
                                                   indent=1) + "\n")
    if not any(r["status"] == "ok" for r in table):
        print(f"wrote {out}.csv and {out}.json; nothing placed, so no plots")
        return
    plot(table, out.with_suffix(".png"))
    pareto = write_sweep(rows, {"rows": sizes}, out.with_name(out.name + "-pareto"))
    print(f"wrote {out}.csv, {out}.json, {out}.png and {pareto['png']}")


if __name__ == "__main__":
    main()
