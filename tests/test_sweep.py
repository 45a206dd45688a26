"""codnn sweep: a parameter grid synthesized in parallel on a process pool or a Dask
cluster (a local one on loopback), CSV/JSON/PNG output and the Pareto front."""

import csv
import json

import pytest

from codnn.cli import main
from codnn.flows import ParameterError
from codnn.sweep import pareto_front, parse_grid, sweep


def test_parse_grid_converts_and_checks_values():
    grid = parse_grid("systolic", ["rows=2,4", "data-signed=true,0", "mac=bitserial"])
    assert grid == {"rows": [2, 4], "data_signed": [True, False], "mac": ["bitserial"]}
    for specs, message in [(["lanes=1"], "Engine systolic has no parameter 'lanes'"),
                           (["rows=2,x"], "rows takes int values, not 'x'"),
                           (["rows"], "--param takes NAME=V1,V2"),
                           (["mac=fast"], "mac must be one of parallel, bitserial"),
                           (["data_signed=maybe"], "data_signed takes true or false")]:
        with pytest.raises(ParameterError, match=message):
            parse_grid("systolic", specs)
    with pytest.raises(ParameterError, match="Engine must be one of"):
        parse_grid("nosuch", [])


def test_pareto_front_keeps_the_undominated_rows():
    rows = [{"lut": lut, "throughput_per_s": t, "status": status}
            for lut, t, status in [(100, 5.0, "ok"), (200, 4.0, "ok"), (300, 9.0, "ok"),
                                   (50, 1.0, "ok"), (40, 99.0, "does not fit"),
                                   (300, 8.0, "ok")]]
    assert [(r["lut"], r["throughput_per_s"]) for r in pareto_front(rows)] == \
        [(50, 1.0), (100, 5.0), (300, 9.0)]


@pytest.mark.long
def test_sweep_on_the_process_pool_writes_csv_json_and_plot(build_root, tmp_path, capsys):
    out = tmp_path / "fmix"
    assert main(["sweep", "fmix32", "--param", "lanes=1,2", "--device", "ice40-up5k",
                 "--workers", "2", "--build-dir", str(build_root), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    print(printed)
    with open(f"{out}.csv") as f:
        rows = list(csv.DictReader(f))
    assert [row["lanes"] for row in rows] == ["1", "2"]
    assert all(row["status"] == "ok" and row["device"] == "ice40-up5k" for row in rows)
    one, two = rows
    assert int(two["lut"]) > int(one["lut"]) > 0
    for row, lanes in ((one, 1), (two, 2)):
        assert float(row["throughput_per_s"]) == pytest.approx(
            lanes * float(row["fmax_mhz"]) * 1e6)
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["parameters"] == ["lanes"] and len(data["rows"]) == 2
    assert data["pareto"] and set(data["pareto"]) <= {0, 1}
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG\r\n")
    assert "Ghash/s" in printed and f"png: {out}.png" in printed


@pytest.mark.long
def test_sweep_on_a_local_dask_cluster_equals_the_process_pool(build_root):
    distributed = pytest.importorskip("distributed")  # a dev dependency: always present
    grid = {"lanes": [1, 2]}
    local = sweep("fmix32", grid, ["ice40-up5k", "ecp5-25k"], build_root=build_root,
                  workers=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        seen = []
        remote = sweep("fmix32", grid, ["ice40-up5k", "ecp5-25k"], build_root=build_root,
                       scheduler=cluster.scheduler_address,
                       progress=lambda done, total, row: seen.append((done, total)))
    assert remote == local and len(remote) == 4
    assert sorted(seen) == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_unreachable_scheduler_is_a_one_line_error(capsys):
    assert main(["sweep", "fmix32", "--device", "ice40-up5k",
                 "--scheduler", "tcp://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err
    assert main(["sweep", "fmix32", "--device", "ice40-up5k", "--scheduler", "nonsense"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing port number in address 'nonsense'" in err, err


@pytest.mark.parametrize("argv, message", [
    (["fmix32", "--device", "ice40-up5k", "--param", "rows=2"],
     "Engine fmix32 has no parameter 'rows'"),
    (["fmix32", "--device", "virtex7"], "Device must be one of"),
    (["fmix32", "--device", "ice40-up5k", "--param", "lanes=0"], "Lane count must be a positive"),
    (["fmix32", "--device", "ice40-up5k", "--workers", "0"], "expected a positive integer"),
])
def test_bad_sweeps_exit_2_before_running_anything(argv, message, capsys):
    assert main(["sweep", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
