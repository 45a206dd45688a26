"""Emulated links between the ranks of a job on one machine: each rank in its own network
namespace, joined to a bridge (the switch, in a namespace of its own) by a veth pair whose
two ends are rate-limited by ``tc``'s token bucket (``tbf``), so a link of rate R carries at
most R each way; with a latency, ``netem`` delays each end's egress by half of it, so a
round trip takes the latency. Communication then crosses a real TCP/IP stack.

Needs root and iproute2. ``Links`` falls back to loopback (no rate limit, no delay) with a
message saying why when namespaces cannot be made; a latency on a kernel without ``netem``
is refused with ``LinkError`` instead, since the run would not be what was asked for.
"""

import os
import re
import shutil
import subprocess

__all__ = ["LinkError", "parse_rate", "parse_latency", "Links"]

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")
_LATENCY = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
#: Rates a veth pair with tbf holds here; beyond, the CPU is the link.
MAX_RATE = 10e9
SUBNET = "10.213.0"


class LinkError(ValueError):
    """A link that cannot be set up as asked (bad rate or latency, no netem)."""


def parse_rate(text):
    """Bits per second of a rate such as ``100mbit``, ``1gbit``, ``2.5gbit``."""
    match = _RATE.match(str(text).strip().lower())
    if not match or not 0 < float(match[1]) * _UNITS[match[2]] <= MAX_RATE:
        raise LinkError(f"unknown link {text!r}: a rate such as 10mbit, 100mbit or 1gbit, "
                        f"at most 10gbit")
    return float(match[1]) * _UNITS[match[2]]


def parse_latency(text):
    """Seconds of a round-trip latency such as ``0``, ``100us``, ``2ms``."""
    if str(text).strip() == "0":
        return 0.0
    match = _LATENCY.match(str(text).strip().lower())
    if not match or float(match[1]) * _UNITS[match[2]] > 1.0:
        raise LinkError(f"unknown latency {text!r}: 0 or a time such as 100us or 2ms, "
                        f"at most 1s")
    return float(match[1]) * _UNITS[match[2]]


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Links:
    """``with Links(nodes, rate, latency) as links``: ``links.address[r]`` is rank ``r``'s IP
    address, ``links.prefix(r)`` the command prefix that runs a program in its namespace,
    ``links.interface`` the name of each rank's interface, ``links.kind`` ``namespaces``
    or ``loopback`` and ``links.note`` why it fell back (or None)."""

    def __init__(self, nodes, rate, latency=0.0):
        self.nodes, self.rate, self.latency = nodes, rate, latency
        tag = f"codnn{os.getpid()}"
        self.names = [f"{tag}n{r}" for r in range(nodes)]
        self.switch = f"{tag}sw"
        self.made = []
        self.kind, self.note = "namespaces", None
        self.interface = "eth0"
        self.address = [f"{SUBNET}.{r + 1}" for r in range(nodes)]

    def prefix(self, rank):
        return ["ip", "netns", "exec", self.names[rank]] if self.kind == "namespaces" else []

    def __enter__(self):
        reason = self._unavailable()
        if reason is None:
            try:
                self._make()
            except subprocess.CalledProcessError as error:
                self._remove()
                if "qdisc kind is unknown" in (error.stderr or "") and "netem" in error.cmd:
                    raise LinkError("this kernel has no netem queueing discipline, so links "
                                    "cannot be delayed: run with --latency 0") from None
                reason = f"'{' '.join(error.cmd)}' failed: {(error.stderr or '').strip()}"
        if reason is not None:
            self.kind, self.interface = "loopback", "lo"
            self.address = ["127.0.0.1"] * self.nodes
            self.note = (f"network namespaces unavailable ({reason}); running on loopback "
                         f"without the link's rate or latency")
        return self

    def __exit__(self, *exc):
        self._remove()

    @staticmethod
    def _unavailable():
        if os.geteuid() != 0:
            return "not root"
        if not shutil.which("ip") or not shutil.which("tc"):
            return "iproute2's ip and tc are not installed"
        return None

    def _shape(self, namespace, device):
        """Rate (and half the latency) on the egress of one end of a link."""
        rate = int(self.rate)
        burst = max(int(self.rate / 8 * 0.001), 16_384)    # 1 ms at line rate
        tbf = ["tbf", "rate", f"{rate}bit", "burst", str(burst), "latency", "100ms"]
        if self.latency:
            delay = f"{self.latency / 2 * 1e6:.0f}us"
            _ip("netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "root",
                "handle", "1:", "netem", "delay", delay)
            _ip("netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "parent",
                "1:", "handle", "2:", *tbf)
        else:
            _ip("netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "root", *tbf)

    def _make(self):
        _ip("netns", "add", self.switch)
        self.made.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for rank, name in enumerate(self.names):
            _ip("netns", "add", name)
            self.made.append(name)
            port = f"p{rank}"
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name",
                self.interface, "netns", name)
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", name, "addr", "add", f"{self.address[rank]}/24", "dev", self.interface)
            _ip("-n", name, "link", "set", self.interface, "up")
            _ip("-n", name, "link", "set", "lo", "up")
            self._shape(name, self.interface)
            self._shape(self.switch, port)

    def _remove(self):
        while self.made:
            _ip("netns", "delete", self.made.pop(), check=False)
