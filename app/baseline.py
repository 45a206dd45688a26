"""``codnn synth --check-baseline``: the reference configurations against their committed
figures (``synth/baselines.json``), run through the sweep's parallel runner."""

from codnn.synth.baseline import (
    BASELINE_FILE,
    METRICS,
    compare,
    entry_label,
    load_baseline,
    save_baseline,
)
from codnn.synth.tools import tool_versions

from .flows import ParameterError
from .sweep import run_points

__all__ = ["check_baseline"]

# An entry's verdict is its worst metric's, in this order.
_VERDICTS = ("failed", "worse", "new", "better", "same")


def check_baseline(path=BASELINE_FILE, *, quick=False, update=False, **options):
    """Synthesize the baseline's entries (``quick``: only those marked quick) and compare.

    With ``update``, write the measured figures and tool versions back into the file.
    ``options`` go to ``codnn.sweep.run_points``. Returns a report dict: per entry its
    label, verdict and metrics, and ``regressions``, the entries worse than the baseline
    or failing to synthesize.

    Raises
    ------
    codnn.synth.baseline.BaselineError
        If the file is missing or malformed.
    ParameterError
        If no entry is selected, or an entry names an unknown engine, parameter or device.
    """
    data = load_baseline(path)
    entries = [entry for entry in data["entries"] if entry.get("quick") or not quick]
    if not entries:
        raise ParameterError(f"{path} has no {'quick ' if quick else ''}entries")
    rows = run_points([(e["engine"], e["parameters"], e["device"], e.get("clock_mhz"),
                        e.get("seed")) for e in entries], **options)
    results = []
    for entry, row in zip(entries, rows):
        if row["status"] != "ok":
            results.append({"entry": entry_label(entry), "verdict": "failed",
                            "note": row["status"], "metrics": {}})
            continue
        metrics = compare(entry, row, data["tolerance"])
        verdicts = {m["verdict"] for m in metrics.values()}
        results.append({"entry": entry_label(entry),
                        "verdict": next(v for v in _VERDICTS if v in verdicts),
                        "metrics": metrics})
        if update:
            entry.update({metric: row[metric] for metric in METRICS})
    tools = tool_versions()
    report = {"file": str(path), "tolerance": data["tolerance"],
              "tools": {"baseline": data.get("tools", {}), "now": tools},
              "entries": results,
              "regressions": sum(r["verdict"] in ("failed", "worse") for r in results)}
    if update:
        data["tools"] = tools
        save_baseline(data, path)
    return report
