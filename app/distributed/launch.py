"""A data-parallel training job of N processes on this machine (``codnn train --nodes N``):
each rank (``codnn.distributed.worker``) in its own network namespace behind an emulated
link (``codnn.distributed.links``), or on loopback where namespaces cannot be made.

The launcher watches the ranks: when one exits with an error, the others are stopped and
the job fails with ``JobFailed`` naming that rank and its last message, so a dead rank
costs at most the time the others take to notice (at once for a closed connection, the
job's ``timeout`` for a silent link). At the end it checks that every rank holds the same
weights and writes ``report.json``: per-iteration compute and communication time, time in
the codec and on the wire, bytes each rank sent (codec messages) and put on its interface
(TCP/IP included), the compression ratio and the accuracy after every epoch.
"""

import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from codnn.golden.exchange import CODECS, EXCHANGES
from codnn.golden.inceptionn import BOUND_BITS
from codnn.train import TrainError

from . import JobFailed
from .hooks import SCALERS
from .links import LinkError, Links, parse_latency, parse_rate
from .perf_model import raw_traffic

__all__ = ["Job", "FAULTS", "launch"]

FAULTS = ("nan", "exit", "link")
#: Optimizers a job can train with (SGD with momentum and a cosine learning-rate schedule,
#: as the TernGrad paper trains; or Adam at a constant rate).
OPTIMIZERS = ("adam", "sgd")
#: How long stopped ranks get to exit before they are killed.
_GRACE = 5.0
_PORT = 29500


@dataclass(frozen=True)
class Job:
    """A distributed run: the model and schedule, the codec and exchange, the cluster."""

    model: str = "lenet5"
    data: str = "mnist"
    epochs: int = 3
    lr: float = 1e-3
    batch: int = 32
    seed: int = 20261126
    codec: str = "none"
    bound_bits: int = 10
    scaler: str = "max"
    exchange: str = "ring"
    nodes: int = 4
    link: str = "1gbit"
    latency: str = "0"
    timeout: float = 60.0
    fault: dict | None = None
    optimizer: str = "adam"
    momentum: float = 0.9

    def check(self):
        """Raise ``TrainError`` (one line) for settings no job can have."""
        from codnn.train.run import TrainSpec
        TrainSpec(self.model, self.data, self.epochs, self.lr, self.batch, self.seed).check()
        if self.codec not in CODECS:
            raise TrainError(f"unknown codec {self.codec!r}: one of {', '.join(CODECS)}")
        if self.exchange not in EXCHANGES:
            raise TrainError(f"unknown exchange {self.exchange!r}: one of "
                             f"{', '.join(EXCHANGES)}")
        if self.scaler not in SCALERS:
            raise TrainError(f"unknown scaler {self.scaler!r}: one of {', '.join(SCALERS)}")
        if self.optimizer not in OPTIMIZERS:
            raise TrainError(f"unknown optimizer {self.optimizer!r}: one of "
                             f"{', '.join(OPTIMIZERS)}")
        if not 0 <= self.momentum < 1:
            raise TrainError(f"momentum must lie in [0, 1), not {self.momentum}")
        if not 0 <= self.seed < 1 << 32:
            raise TrainError(f"seed must lie in 0..2**32-1, not {self.seed}")
        if self.bound_bits not in BOUND_BITS:
            raise TrainError(f"bound bits must lie in 7..15, not {self.bound_bits}")
        if not 2 <= self.nodes <= 16:
            raise TrainError(f"nodes must lie in 2..16, not {self.nodes}")
        if not 1 <= self.timeout <= 3600:
            raise TrainError(f"timeout must lie in 1..3600 s, not {self.timeout}")
        try:
            parse_rate(self.link), parse_latency(self.latency)
        except LinkError as error:
            raise TrainError(str(error)) from None
        fault = self.fault
        if fault and (fault.get("kind") not in FAULTS or not 0 <= fault.get("rank", -1)
                      < self.nodes or fault.get("step", -1) < 0):
            raise TrainError(f"a fault is RANK:STEP:KIND with KIND one of {', '.join(FAULTS)}"
                             f" and RANK below {self.nodes}, not {fault}")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_line(path):
    lines = [line for line in Path(path).read_text(errors="replace").splitlines()
             if line.strip()]
    return lines[-1] if lines else "no message"


def _stop(processes):
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + _GRACE
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _watch(processes, out):
    """Wait for every rank; on the first that fails, stop the rest and raise."""
    while True:
        codes = [p.poll() for p in processes]
        failed = [r for r, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            rank = failed[0]
            _stop(processes)
            raise JobFailed(f"rank {rank} failed (exit code {codes[rank]}): "
                             f"{_last_line(out / f'rank{rank}.log')}")
        if all(code == 0 for code in codes):
            return
        time.sleep(0.05)


def _summary(job, links, records, seconds):
    # The first iteration compiles the codec and warms the caches: it is left out.
    its = np.array([r["iterations"][1:] for r in records])     # rank x iteration x field
    if its.size == 0:
        raise TrainError("the job ran fewer than two iterations: give it more epochs or "
                         "a smaller batch")
    per_rank = its.mean(axis=1)                                   # rank x field
    steps = len(records[0]["iterations"])
    gradient_bytes = records[0]["raw_bytes"] // steps
    sent = float(per_rank[:, 4].mean())
    return {
        "job": asdict(job), "links": links.kind, "note": links.note,
        "rate_bits": parse_rate(job.link), "latency_s": parse_latency(job.latency),
        "iterations": steps, "seconds": round(seconds, 2),
        "iteration_s": float((per_rank[:, 0] + per_rank[:, 1]).mean()),
        "compute_s": float(per_rank[:, 0].mean()),
        "communication_s": float(per_rank[:, 1].mean()),
        "codec_s": float(per_rank[:, 2].mean()), "wire_s": float(per_rank[:, 3].mean()),
        "gradient_bytes": gradient_bytes, "sent_bytes": sent,
        "tx_bytes": float(np.mean([r["tx_bytes"] for r in records]) / steps)
        if links.kind == "namespaces" else None,
        "ratio": raw_traffic(job.exchange, job.nodes, gradient_bytes) / sent if sent else 0.0,
        "accuracy": records[0]["accuracy"],
        "nonfinite": [r["nonfinite"] for r in records],
        "ranks_agree": len({r["weights"] for r in records}) == 1,
    }


def launch(job, out, progress=print):
    """Run ``job`` with its outputs in folder ``out``; return the report (also written to
    ``out/report.json``). Raises ``TrainError`` for bad settings, ``JobFailed`` for a rank
    that failed."""
    job.check()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("rank*.json"):
        stale.unlink()
    with Links(job.nodes, parse_rate(job.link), parse_latency(job.latency)) as links:
        if links.note:
            progress(links.note)
            if job.fault and job.fault["kind"] == "link":
                raise TrainError("a link fault needs network namespaces: on loopback it "
                                 "would take down this machine's own loopback")
        settings = asdict(job) | {
            "master": links.address[0], "interface": links.interface, "out": str(out),
            "port": _PORT if links.kind == "namespaces" else _free_port()}
        (out / "job.json").write_text(json.dumps(settings, indent=1))
        progress(f"{job.nodes} ranks of {job.model} on {job.data}, {job.codec} codec over a "
                 f"{job.exchange} exchange, {job.link} links ({links.kind})")
        start = time.monotonic()
        processes = []
        try:
            for rank in range(job.nodes):
                with open(out / f"rank{rank}.log", "w") as log:
                    processes.append(subprocess.Popen(
                        links.prefix(rank) + [sys.executable, "-m", "codnn.distributed.worker",
                                              str(out / "job.json"), str(rank)],
                        stdout=subprocess.PIPE if rank == 0 else log, stderr=log, text=True))
            reader = threading.Thread(target=lambda: [progress(line.rstrip())
                                                      for line in processes[0].stdout],
                                      daemon=True)
            reader.start()
            _watch(processes, out)
            reader.join(timeout=_GRACE)
        finally:
            _stop(processes)
            if processes:
                processes[0].stdout.close()
        seconds = time.monotonic() - start
    records = [json.loads((out / f"rank{r}.json").read_text()) for r in range(job.nodes)]
    report = _summary(job, links, records, seconds)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    return report
