"""The iteration time of data-parallel training with compressed gradients (docs/distributed.md,
"The performance model"): compute time, plus time in the codec, plus time on the wire.

For M bytes of float32 gradients (n = M/4 values), N nodes, link rate R (bits/s),
goodput fraction ``efficiency`` of it, one-way latency L (half the round trip), a software
cost ``overhead`` per message, compression ratio r:

* ring: 2(N-1) hops of one chunk (M/N bytes, M/(N r) on the wire), each
  ``L + overhead + 8 M / (N r R efficiency)``; the codec compresses N and decompresses
  2N-1 chunks on the critical path: ``(3N-1) n/N`` values;
* aggregator: node 0 sends N-1 copies of the mean, one worker after another; each worker
  computes and sends its next gradient as soon as it has the mean, while node 0 is still
  sending to the rest (its link is full duplex), so only the last worker's upload adds to
  the broadcast: N messages' bytes ``8 M / (r R efficiency)`` on the critical path, but
  2(N-1) overheads and two latencies; codec ``(N+2) n``;
* allgather: N-1 forwarding steps of a rank's whole message; codec ``(N+1) n``.

The codec runs on the CPU at its calibrated rate (values/s), or in the NIC at ``nic_rate``
values/s, where it streams with the wire: each hop takes the longer of the two, and codec
time is only what the engine adds beyond the wire. Without overlap
an iteration is compute + codec + wire; with overlap the communication runs during the
backward pass (taken as 2/3 of compute): ``compute/3 + max(2 compute/3, codec + wire)``.
``calibrate`` fits ``efficiency``, ``overhead`` and each codec's rate to measured runs.
"""

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

__all__ = ["Cluster", "Workload", "Prediction", "Calibration", "predict", "raw_traffic",
           "calibrate", "from_report", "NETWORKS", "TOPOLOGIES"]

TOPOLOGIES = ("ring", "aggregator", "allgather")
#: Parameters of the networks of INCEPTIONN's evaluation (and LeNet-5 as codnn trains it).
NETWORKS = {"alexnet": 61_100_000, "vgg16": 138_400_000, "resnet50": 25_600_000,
            "lenet5": 61_706}


@dataclass(frozen=True)
class Cluster:
    nodes: int
    rate_bits: float
    latency_s: float = 0.0
    topology: str = "ring"


@dataclass(frozen=True)
class Calibration:
    """Goodput fraction of the link rate, software cost per message (s), and each codec's
    CPU throughput in values per second."""

    efficiency: float = 0.94
    overhead_s: float = 50e-6
    codec_rates: tuple = (("none", 2e9), ("inceptionn", 3e8), ("terngrad", 5e7),
                          ("rice", 1.5e8))

    def rate(self, codec):
        """Values per second of ``codec`` on the CPU (the default's when not fitted)."""
        return dict(self.codec_rates).get(codec) or dict(Calibration.codec_rates)[codec]


@dataclass(frozen=True)
class Workload:
    """One iteration's work: compute time, gradient bytes, codec and its ratio; the codec
    on the CPU, or in the NIC at ``nic_rate`` values/s."""

    compute_s: float
    gradient_bytes: float
    codec: str = "none"
    ratio: float = 1.0
    nic_rate: float | None = None
    overlap: bool = False


@dataclass(frozen=True)
class Prediction:
    compute_s: float
    codec_s: float
    bandwidth_s: float
    latency_s: float
    iteration_s: float

    @property
    def communication_s(self):
        return self.codec_s + self.bandwidth_s + self.latency_s

    @property
    def bottleneck(self):
        parts = {"compute": self.compute_s, "codec": self.codec_s,
                 "bandwidth": self.bandwidth_s, "latency": self.latency_s}
        return max(parts, key=parts.get)


def raw_traffic(topology, nodes, gradient_bytes):
    """Bytes a rank sends per iteration without compression, averaged over the ranks."""
    if topology == "allgather":
        return gradient_bytes
    return 2 * (nodes - 1) / nodes * gradient_bytes


class _Shape(NamedTuple):
    """An exchange's critical path: messages whose bytes count (``sent``) and whose
    overhead counts (``handled``), one-way latencies in series, bytes per message, values
    the codec handles on the CPU, values an engine streams per message."""

    sent: int
    handled: int
    latencies: int
    size: float
    codec_values: float
    streamed: float


def _shape(cluster, gradient_bytes):
    n, N = gradient_bytes / 4, cluster.nodes
    if cluster.topology == "ring":
        hops = 2 * (N - 1)
        return _Shape(hops, hops, hops, gradient_bytes / N, (3 * N - 1) * n / N, n / N)
    if cluster.topology == "aggregator":
        return _Shape(N, 2 * (N - 1), 2, gradient_bytes, (N + 2) * n, n)
    return _Shape(N - 1, N - 1, N - 1, gradient_bytes, (N + 1) * n, n)


def predict(cluster, work, calibration=Calibration()):
    """The iteration time of ``work`` on ``cluster``, by parts."""
    if cluster.topology not in TOPOLOGIES:
        raise ValueError(f"unknown topology {cluster.topology!r}: one of {', '.join(TOPOLOGIES)}")
    shape = _shape(cluster, work.gradient_bytes)
    per_message = 8 * shape.size / work.ratio / (cluster.rate_bits * calibration.efficiency)
    if work.nic_rate and work.codec != "none":      # the engine streams with the wire
        codec_s = shape.sent * max(0.0, shape.streamed / work.nic_rate - per_message)
    else:
        codec_s = shape.codec_values / calibration.rate(work.codec)
    bandwidth_s = shape.sent * per_message
    latency_s = (shape.latencies * cluster.latency_s / 2
                 + shape.handled * calibration.overhead_s)
    communication = codec_s + bandwidth_s + latency_s
    if work.overlap:
        total = work.compute_s / 3 + max(2 * work.compute_s / 3, communication)
    else:
        total = work.compute_s + communication
    return Prediction(work.compute_s, codec_s, bandwidth_s, latency_s, total)


def from_report(report, nic_rate=None):
    """The cluster and workload of a measured run (``codnn.distributed.launch``'s report)."""
    job = report["job"]
    cluster = Cluster(job["nodes"], report["rate_bits"], report["latency_s"], job["exchange"])
    work = Workload(report["compute_s"], report["gradient_bytes"], job["codec"],
                    report["ratio"] or 1.0, nic_rate)
    return cluster, work


def calibrate(reports):
    """Fit efficiency and overhead (least squares on each run's measured wire time) and
    each codec's rate (its codec values over its measured codec time)."""
    rows, wire, rates = [], [], {}
    for report in reports:
        cluster, work = from_report(report)
        shape = _shape(cluster, work.gradient_bytes)
        rows.append([shape.sent * 8 * shape.size / work.ratio / cluster.rate_bits,
                     shape.handled])
        wire.append(report["wire_s"] - shape.latencies * cluster.latency_s / 2)
        values, seconds = rates.get(work.codec, (0.0, 0.0))
        rates[work.codec] = (values + shape.codec_values, seconds + report["codec_s"])
    if len(reports) < 2:
        raise ValueError("calibration needs at least two measured runs")
    (inverse, overhead), *_ = np.linalg.lstsq(np.array(rows), np.array(wire), rcond=None)
    return Calibration(efficiency=float(1 / max(inverse, 1.0)),
                       overhead_s=float(max(overhead, 0.0)),
                       codec_rates=tuple(sorted((codec, values / max(seconds, 1e-9))
                                                for codec, (values, seconds) in rates.items())))


def scenarios(cluster, work, calibration=Calibration()):
    """The what-ifs of one configuration: (name, cluster, workload, prediction) rows."""
    faster = replace(cluster, rate_bits=cluster.rate_bits * 10)
    rows = [("as given", cluster, work), ("one more node", replace(cluster,
                                                                   nodes=cluster.nodes + 1), work),
            ("10x faster link", faster, work),
            ("no compression", cluster, replace(work, codec="none", ratio=1.0, nic_rate=None))]
    if work.codec != "none":
        rows += [("codec on the CPU", cluster, replace(work, nic_rate=None))]
    other = "aggregator" if cluster.topology != "aggregator" else "ring"
    rows += [(f"{other} exchange", replace(cluster, topology=other), work),
             ("overlap with backward", cluster, replace(work, overlap=True))]
    seen, out = set(), []
    for name, c, w in rows:
        if (c, w) not in seen:
            seen.add((c, w))
            out.append((name, c, w, predict(c, w, calibration)))
    return out
