"""Distributed jobs (codnn.distributed.launch) of real processes in network namespaces:
the ranks agree, the link's rate really limits the wire, the interface carries at least
the codec's bytes; a rank that exits, a link that goes down and a NaN under TernGrad fail
the job in bounded time, naming a rank; NaN under the INCEPTIONN-style codec crosses raw
and is reported; bad settings get one line and exit 2."""

import time

import pytest

from codnn.cli import main
from codnn.distributed import JobFailed
from codnn.distributed.launch import Job, launch
from codnn.distributed.links import LinkError, Links, parse_latency, parse_rate
from codnn.train import TrainError

SMALL = dict(model="lenet5", data="digits", epochs=1, batch=64, nodes=2)


@pytest.mark.long
def test_rate_limited_ring_passes_nan_raw(tmp_path):
    """INCEPTIONN-style LeNet-5 gradients through 10mbit links (momentum SGD), rank 1
    feeding NaN at step 3: each iteration's wire time is at least what the rate allows,
    the interface carries more than the codec's bytes (TCP/IP headers, acks), the NaN
    gradients cross raw and are reported, and the ranks end equal."""
    report = launch(Job(**SMALL, codec="inceptionn", link="10mbit", optimizer="sgd",
                        fault={"rank": 1, "step": 3, "kind": "nan"}), tmp_path, progress=print)
    assert report["links"] == "namespaces" and report["ranks_agree"]
    assert report["wire_s"] >= 0.9 * report["sent_bytes"] * 8 / 10e6
    assert report["tx_bytes"] > report["sent_bytes"] and report["ratio"] > 1
    assert report["nonfinite"][1] > 0 and report["nonfinite"][0] >= 0
    assert len(report["accuracy"]) == 1 and 0 <= report["accuracy"][0] <= 1


@pytest.mark.parametrize("settings,match", [
    pytest.param(dict(fault={"rank": 1, "step": 2, "kind": "exit"}), "rank 1 failed",
                 marks=pytest.mark.long),
    (dict(codec="terngrad", fault={"rank": 0, "step": 2, "kind": "nan"}), "rank 0 .*NaN"),
    pytest.param(dict(fault={"rank": 1, "step": 2, "kind": "link"}, timeout=3),
                 "rank [01] failed", marks=pytest.mark.long),
])
def test_failures_end_the_job_in_bounded_time(tmp_path, settings, match):
    began = time.monotonic()
    with pytest.raises(JobFailed, match=match):
        launch(Job(**{**SMALL, "link": "1gbit", **settings}), tmp_path)
    assert time.monotonic() - began < 60


def test_links_parse_and_refuse():
    assert parse_rate("2.5gbit") == 2.5e9 and parse_latency("100us") == pytest.approx(1e-4)
    with pytest.raises(LinkError, match="unknown link"):
        parse_rate("fast")
    with pytest.raises(LinkError, match="unknown latency"):
        parse_latency("soon")
    with pytest.raises(LinkError, match="no netem"):     # this kernel has no netem
        with Links(2, 1e9, 1e-4):
            pass


def test_fallback_to_loopback(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with Links(3, 1e9) as links:
        assert links.kind == "loopback" and "not root" in links.note
        assert links.address == ["127.0.0.1"] * 3 and links.prefix(0) == []


@pytest.mark.parametrize("argv,message", [
    (["--link", "3parsecs"], "unknown link '3parsecs'"),
    (["--nodes", "1"], "nodes must lie in 2..16"),
    (["--tq", "g=8"], "distributed training (--nodes) is dense training"),
    (["--fault", "1:2:melt"], "a fault is RANK:STEP:KIND"),
    (["--bound-bits", "4"], "bound bits must lie in 7..15"),
])
def test_bad_settings(capsys, argv, message):
    argv = ["train", "lenet5", "--nodes", "2", *argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_link_fault_refused_on_loopback(monkeypatch, tmp_path):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(TrainError, match="needs network namespaces"):
        launch(Job(**SMALL, fault={"rank": 0, "step": 1, "kind": "link"}), tmp_path,
               progress=lambda text: None)


def test_job_check():
    with pytest.raises(TrainError, match="unknown codec"):
        Job(codec="zip").check()
    with pytest.raises(TrainError, match="unknown scaler"):
        Job(scaler="mean").check()
    with pytest.raises(TrainError, match="seed must lie"):
        Job(seed=-1).check()
    with pytest.raises(TrainError, match="unknown optimizer"):
        Job(optimizer="rmsprop").check()
    with pytest.raises(TrainError, match=r"momentum must lie in \[0, 1\)"):
        Job(momentum=1.0).check()
