"""The performance model (codnn.distributed.perf_model) against its formulas restated by
hand, calibration recovering known parameters from runs it generated, the what-ifs, and
``codnn predict``'s output and errors."""

import json

import pytest

from codnn.cli import main
from codnn.distributed.perf_model import (Calibration, Cluster, Workload, calibrate,
                                          predict, raw_traffic, scenarios)

FIXED = Calibration(efficiency=0.9, overhead_s=1e-4,
                    codec_rates=(("inceptionn", 2e8), ("none", 1e9), ("terngrad", 5e7)))
M = 4e6                                          # 1 M float32 gradients


def test_ring_by_hand():
    p = predict(Cluster(4, 1e9, 2e-4, "ring"), Workload(0.05, M, "inceptionn", 4.0), FIXED)
    assert p.bandwidth_s == pytest.approx(6 * 8 * (M / 4) / 4 / 0.9e9)
    assert p.latency_s == pytest.approx(6 * (1e-4 + 1e-4))       # half the round trip each
    assert p.codec_s == pytest.approx(11 * 250_000 / 2e8)         # (3N-1) n/N values
    assert p.iteration_s == pytest.approx(0.05 + p.communication_s)


def test_aggregator_by_hand():
    p = predict(Cluster(5, 1e9, 0.0, "aggregator"), Workload(0.0, M), FIXED)
    assert p.bandwidth_s == pytest.approx(5 * 8 * M / 0.9e9)      # 4 sends, the last upload
    assert p.latency_s == pytest.approx(8 * 1e-4)
    assert p.codec_s == pytest.approx(7 * 1e6 / 1e9) and p.bottleneck == "bandwidth"
    assert raw_traffic("aggregator", 5, M) == raw_traffic("ring", 5, M) == 1.6 * M


def test_nic_streams_and_overlap():
    ring = Cluster(4, 10e9, 0.0, "ring")
    fast = predict(ring, Workload(0.1, M, "inceptionn", 4.0, nic_rate=1e10), FIXED)
    assert fast.codec_s == 0.0                     # the engine keeps up with the wire
    slow = predict(ring, Workload(0.1, M, "inceptionn", 4.0, nic_rate=1e6), FIXED)
    assert slow.bottleneck == "codec"
    assert slow.codec_s + slow.bandwidth_s == pytest.approx(6 * 250_000 / 1e6)
    overlapped = predict(ring, Workload(0.3, M, overlap=True), FIXED)
    assert overlapped.iteration_s == pytest.approx(0.1 + max(0.2, overlapped.communication_s))


def _report(cluster, work, calibration):
    """A run as the launcher reports it, timed by the model itself."""
    p = predict(cluster, work, calibration)
    return {"job": {"nodes": cluster.nodes, "exchange": cluster.topology,
                    "codec": work.codec}, "rate_bits": cluster.rate_bits,
            "latency_s": cluster.latency_s, "compute_s": work.compute_s,
            "gradient_bytes": work.gradient_bytes, "ratio": work.ratio,
            "codec_s": p.codec_s, "wire_s": p.bandwidth_s + p.latency_s,
            "iteration_s": p.iteration_s}


def test_calibration_recovers_parameters():
    reports = [_report(Cluster(n, rate, 0.0, topology), Workload(0.02, M, codec, ratio), FIXED)
               for n in (2, 4) for rate in (1e8, 1e9) for topology in ("ring", "aggregator")
               for codec, ratio in (("none", 1.0), ("inceptionn", 3.0))]
    fitted = calibrate(reports)
    assert fitted.efficiency == pytest.approx(0.9) and fitted.overhead_s == pytest.approx(1e-4)
    assert dict(fitted.codec_rates)["inceptionn"] == pytest.approx(2e8)
    with pytest.raises(ValueError, match="two measured runs"):
        calibrate(reports[:1])


def test_scenarios():
    rows = {name: p for name, _, _, p in scenarios(
        Cluster(4, 1e9), Workload(0.05, M, "inceptionn", 3.0, nic_rate=5e8), FIXED)}
    assert rows["10x faster link"].bandwidth_s == pytest.approx(rows["as given"].bandwidth_s / 10)
    assert rows["codec on the CPU"].codec_s > rows["as given"].codec_s == 0
    assert rows["no compression"].bandwidth_s == pytest.approx(3 * rows["as given"].bandwidth_s)
    assert set(rows) >= {"one more node", "aggregator exchange", "overlap with backward"}


def test_predict_command(tmp_path, capsys):
    folder = tmp_path / "runs"
    for i, rate in enumerate((1e8, 1e9)):
        (folder / str(i)).mkdir(parents=True)
        (folder / str(i) / "report.json").write_text(json.dumps(
            _report(Cluster(2, rate), Workload(0.02, M, "inceptionn", 3.0), FIXED)))
    assert main(["predict", "--calibration", str(folder), "--network", "resnet50",
                 "--nic-rate", "5e8", "--json", "--plot", str(tmp_path / "p.png")]) == 0
    out = json.loads(capsys.readouterr().out.split("wrote")[0])
    assert out["calibration"]["efficiency"] == pytest.approx(0.9)
    assert out["scenarios"][0]["scenario"] == "as given" and (tmp_path / "p.png").exists()


@pytest.mark.parametrize("argv,message", [
    (["--network", "googlenet"], "predict needs a network"),
    (["--link", "fast"], "unknown link 'fast'"),
    (["--calibration", "/nonexistent"], "no such calibration"),
    (["--ratio", "0.5"], "ratio >= 1"),
])
def test_predict_errors(capsys, argv, message):
    assert main(["predict", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
