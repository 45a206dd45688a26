"""Design-space sweeps: one synthesis per configuration, run in parallel.

``run_points`` runs ``(engine, parameters, device)`` points through ``run_synthesis`` on a
process pool of this machine's cores, or on a Dask distributed cluster when given a
scheduler address (workers need codnn installed and the build folder at the same path:
one machine, or a shared file system; dask-jobqueue starts such clusters on SLURM/PBS).
Each synthesis is cached, so a repeated sweep only runs what changed. ``sweep`` expands a
parameter grid; ``write_sweep`` writes the rows as CSV and JSON and a Pareto plot (PNG)
of throughput (Fmax x work per cycle) against LUTs.
"""

import csv
import itertools
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import active_children, get_context
from pathlib import Path

from codnn.sim.runner import default_build_root
from codnn.synth.devices import get_device
from codnn.synth.tools import SynthesisError, terminate_raises, tool_versions

from .engines import get_engine
from .flows import ParameterError, build_component, run_synthesis

__all__ = ["SweepError", "parse_grid", "run_points", "sweep", "pareto_front", "write_sweep"]


class SweepError(RuntimeError):
    """The Dask cluster cannot be used (unreachable, or dask.distributed missing)."""

#: Columns of a sweep's CSV (parameters come first, one column each).
COLUMNS = ("engine", "device", "lut", "ff", "dsp", "bram", "logic_cells",
           "logic_cells_available", "fmax_mhz", "clock_mhz", "seed", "rate_per_cycle",
           "rate_unit", "throughput_per_s", "critical_from", "critical_to", "status")


def parse_grid(engine_name, specs):
    """``["rows=4,8", "mac=parallel"]`` -> ``{"rows": [4, 8], "mac": ["parallel"]}``, values
    converted to the parameters' types.

    Raises
    ------
    ParameterError
        For an unknown engine or parameter, or a value of the wrong type.
    """
    try:
        engine = get_engine(engine_name)
    except ValueError as error:
        raise ParameterError(str(error)) from None
    params = {p.name: p for p in engine.params}
    grid = {}
    for spec in specs:
        name, equals, values = spec.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not values.strip():
            raise ParameterError(f"--param takes NAME=V1,V2,..., not {spec!r}")
        if name not in params:
            raise ParameterError(f"Engine {engine.name} has no parameter {name!r}; it takes "
                                 f"{', '.join(params)}")
        grid[name] = [_convert(params[name], value.strip()) for value in values.split(",")]
    return grid


def _convert(param, text):
    if param.type is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ParameterError(f"{param.name} takes true or false, not {text!r}")
        return text.lower() in ("true", "1", "yes")
    try:
        value = param.type(text)
    except ValueError:
        raise ParameterError(f"{param.name} takes {param.type.__name__} values, "
                             f"not {text!r}") from None
    if param.choices and value not in param.choices:
        raise ParameterError(f"{param.name} must be one of {', '.join(param.choices)}, "
                             f"not {text!r}")
    return value


def synthesize_point(engine_name, params, device, clock_mhz, build_root, seed=1):
    """One sweep point: the synthesis report as a row (``status`` "ok" or why it failed)."""
    row = {"engine": engine_name, "device": device, **params}
    try:
        report = run_synthesis(engine_name, params, device=device, clock_mhz=clock_mhz,
                               build_root=build_root, seed=seed)
    except SynthesisError as error:
        # Why, and what the design needs after synthesis, without the log's path.
        return {**row, **(error.synthesized or {}),
                "status": re.sub(r" \(log: [^)]*\)", "", str(error))}
    return {**row, **report["parameters"], **{key: report[key] for key in COLUMNS
                                              if key in report}, "status": "ok"}


def run_points(points, *, clock_mhz=None, workers=None, scheduler=None, build_root=None,
               progress=None):
    """Synthesize every ``(engine, params, device)`` point (or ``(engine, params, device,
    clock_mhz[, seed])``: its own clock constraint instead of ``clock_mhz``, its own
    nextpnr seed instead of 1); return their rows in order.

    ``workers`` processes on this machine (default: one per core), or the Dask cluster at
    ``scheduler`` (``tcp://host:port``). ``progress(done, total, row)`` follows each one.

    Raises
    ------
    ParameterError
        For a bad point (checked before anything runs) or a bad worker count.
    SweepError
        If the Dask scheduler cannot be reached or dask.distributed is missing.
    """
    points = [tuple(point) + (None,) * (5 - len(point)) for point in points]
    for engine_name, params, device, _, _ in points:
        build_component(engine_name, params)
        try:
            get_device(device)
        except ValueError as error:
            raise ParameterError(str(error)) from None
    if workers is not None and workers < 1:
        raise ParameterError(f"Worker count must be at least 1, not {workers}")
    build_root = str(Path(build_root or default_build_root()).resolve())
    tasks = [(e, p, d, clock or clock_mhz, build_root, 1 if seed is None else seed)
             for e, p, d, clock, seed in points]
    rows = [None] * len(tasks)
    results = (_on_dask(scheduler, tasks) if scheduler else
               _on_processes(workers or os.cpu_count() or 1, tasks))
    for done, (index, row) in enumerate(results, 1):
        rows[index] = row
        if progress:
            progress(done, len(tasks), row)
    return rows


def _on_processes(workers, tasks):
    # spawn: the parent may hold threads (progress display) that fork would copy mid-state.
    # Interrupted or terminated, the sweep terminates its workers, and each ends its tools
    # (run_tool), instead of waiting for the points in flight.
    with terminate_raises(), ProcessPoolExecutor(
            max_workers=min(workers, len(tasks) or 1), mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(synthesize_point, *task): index
                   for index, task in enumerate(tasks)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BaseException:
            for worker in active_children():
                worker.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _on_dask(address, tasks):
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise SweepError("--scheduler needs dask.distributed: pip install "
                           "'codnn[cluster]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as error:   # ValueError: a malformed address
        raise SweepError(f"cannot reach the Dask scheduler at {address}: {error}") from None
    with client:
        futures = {client.submit(synthesize_point, *task, pure=False): index
                   for index, task in enumerate(tasks)}
        for future in dask_completed(futures):
            yield futures[future], future.result()


def sweep(engine_name, grid, devices, **options):
    """Synthesize every combination of ``grid`` on every device; return the rows.

    ``options`` go to ``run_points``.
    """
    if not devices:
        raise ParameterError("A sweep needs at least one device")
    points = [(engine_name, dict(zip(grid, values)), device)
              for device in devices for values in itertools.product(*grid.values())]
    return run_points(points, **options)


def pareto_front(rows):
    """The rows no other row beats on both LUTs (fewer) and throughput (more), by LUTs."""
    placed = sorted((r for r in rows if r["status"] == "ok"),
                    key=lambda r: (r["lut"], -r["throughput_per_s"]))
    front, best = [], -1.0
    for row in placed:
        if row["throughput_per_s"] > best:
            front.append(row)
            best = row["throughput_per_s"]
    return front


def write_sweep(rows, grid, out):
    """Write ``out``.csv, ``out``.json and ``out``.png; return their paths."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    columns = [*grid, *COLUMNS]
    paths = {kind: out.with_name(f"{out.name}.{kind}") for kind in ("csv", "json", "png")}
    with open(paths["csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    front = pareto_front(rows)
    paths["json"].write_text(json.dumps({
        "tools": tool_versions(),
        "parameters": list(grid), "rows": rows,
        "pareto": [rows.index(row) for row in front]}, indent=1, default=str) + "\n")
    _plot(rows, front, grid, paths["png"])
    return {kind: str(path) for kind, path in paths.items()}


def _plot(rows, front, grid, path):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 5.5))
    placed = [r for r in rows if r["status"] == "ok"]
    for device in dict.fromkeys(r["device"] for r in placed):
        mine = [r for r in placed if r["device"] == device]
        axes.scatter([r["lut"] for r in mine], [r["throughput_per_s"] for r in mine],
                     label=device, s=36)
    if front:
        axes.step([r["lut"] for r in front], [r["throughput_per_s"] for r in front],
                  where="post", color="black", linewidth=1, label="Pareto front")
    for row in placed:
        axes.annotate(" ".join(f"{k}={row[k]}" for k in grid), (row["lut"],
                      row["throughput_per_s"]), fontsize=7, xytext=(3, 3),
                      textcoords="offset points")
    unit = placed[0]["rate_unit"] if placed else "item"
    engine = rows[0]["engine"] if rows else ""
    axes.set_xlabel("LUTs (after synthesis)")
    axes.set_ylabel(f"throughput ({unit}/s: Fmax x {unit}s per cycle)")
    axes.set_title(f"codnn sweep {engine}")
    axes.grid(True, alpha=0.3)
    if placed:
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
