"""Resource and Fmax baselines: the committed figures of reference configurations, and
the comparison that flags a regression.

The baseline file (``baselines.json`` beside this module) holds the tolerances, the tool
versions that measured it and one entry per reference configuration: engine, full
parameters, device, ``quick`` (small enough for the test suite), ``clock_mhz`` (optional:
the clock constraint, where the device's default one does not route; ``seed``, optional
too: nextpnr's placement seed, where seed 1 does not route) and the figures of
``METRICS`` (an entry without them is new: ``--update-baseline`` measures it). A
resource that grows by more than ``tolerance["resources"]`` (relative), or an Fmax that
drops by more than ``tolerance["fmax"]``, is worse; the opposite is better (time to
update the file with ``codnn synth --update-baseline``).
"""

import json
from pathlib import Path

__all__ = ["BASELINE_FILE", "METRICS", "BaselineError", "largest_entry", "load_baseline",
           "save_baseline",
           "compare", "entry_label"]

BASELINE_FILE = Path(__file__).resolve().with_name("baselines.json")

#: Figures compared: name -> True where more is worse (resources), False where less is
#: worse (Fmax).
METRICS = {"lut": True, "ff": True, "dsp": True, "bram": True, "logic_cells": True,
           "fmax_mhz": False}


class BaselineError(ValueError):
    """The baseline file is missing or malformed; the message says where."""


def load_baseline(path=BASELINE_FILE):
    """Read and check a baseline file; return its dict.

    Raises
    ------
    BaselineError
        If the file cannot be read, is not JSON, or lacks a field.
    """
    try:
        data = json.loads(Path(path).read_text())
    except OSError as error:
        raise BaselineError(f"cannot read the baseline file {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise BaselineError(f"{path} is not JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise BaselineError(f"{path}: expected an object with a list of entries")
    tolerance = data.get("tolerance")
    if (not isinstance(tolerance, dict)
            or not all(isinstance(tolerance.get(k), (int, float)) and tolerance[k] >= 0
                       for k in ("resources", "fmax"))):
        raise BaselineError(f"{path}: tolerance must give non-negative 'resources' and "
                            f"'fmax' fractions")
    for number, entry in enumerate(data["entries"]):
        missing = [key for key in ("engine", "parameters", "device") if key not in entry]
        if missing:
            raise BaselineError(f"{path}: entry {number} has no {', '.join(missing)}")
    return data


def largest_entry(engine, device=None, path=BASELINE_FILE):
    """The baseline entry of ``engine`` (on ``device``, if given) with the largest array
    (``rows * cols``), or None: the figures a report quotes for an engine it cannot
    synthesize itself."""
    entries = [e for e in load_baseline(path)["entries"] if e["engine"] == engine
               and device in (None, e["device"])]
    return max(entries, key=lambda e: e["parameters"]["rows"] * e["parameters"]["cols"],
               default=None)


def save_baseline(data, path=BASELINE_FILE):
    """Write a baseline dict, one entry per line block, stable order."""
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def entry_label(entry):
    """``"systolic rows=2 cols=2 ... on ice40-up5k"``."""
    params = " ".join(f"{k}={v}" for k, v in entry["parameters"].items() if v is not None)
    return f"{entry['engine']} {params} on {entry['device']}"


def compare(entry, measured, tolerance):
    """Compare ``measured`` figures with a baseline ``entry``.

    Returns a dict per metric: ``baseline``, ``measured``, ``change`` (relative; None from
    a zero baseline) and ``verdict`` ("worse", "better", "same", or "new" for a metric the
    entry has no figure for).
    """
    result = {}
    for metric, more_is_worse in METRICS.items():
        base, now = entry.get(metric), measured[metric]
        if base is None:
            result[metric] = {"baseline": None, "measured": now, "change": None,
                              "verdict": "new"}
            continue
        allowed = tolerance["fmax" if metric == "fmax_mhz" else "resources"]
        change = (now - base) / base if base else None
        grew = now > base * (1 + allowed) if base else now > 0
        shrank = now < base * (1 - allowed)
        worse, better = (grew, shrank) if more_is_worse else (shrank, grew)
        result[metric] = {"baseline": base, "measured": now, "change": change,
                          "verdict": "worse" if worse else "better" if better else "same"}
    return result
