"""cocotb testbench: the frame path (``codnn.hw.nic.FramePath``, driven by cocotbext-axi) against
``codnn.golden.packets.frame_path``, byte for byte, frame for frame, counter for counter.

Configuration (``CODNN_TB_CONFIG``): ``direction``, ``width``, ``max_frame``,
``bound_bits``; the frames: ``pcap`` (a capture's frames) or ``frames`` fuzzed ones
(``codnn.sim.frame_fuzz.fuzz_frames``, built with scapy); ``idle``/
``backpressure`` (probability per cycle); ``pcap_out``: write the frames the RTL sent
there. An empty frame has no AXI4-Stream beat to carry it, so none is sent (the Amaranth
simulator's test sends one as a beat with no kept byte).

Every frame out must equal golden's, with its ``tuser``; the counters must equal golden's
counts; rewritten frames are parsed back with scapy, whose IPv4 checksum and lengths must
agree. The report has the counts, the bytes in and out and the cycles taken.
"""

import logging
import random
from collections import Counter

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from codnn.golden.packets import GRADIENT_TOS, frame_path
from codnn.sim.frame_fuzz import fuzz_frames
from codnn.sim.pcapfile import read_frames, write_frames
from codnn.sim.stimulus import pauses
from codnn.sim.testbench import load_config, start_clock_and_reset, write_report

#: Rewritten frames parsed back with scapy per run (scapy is slow).
_SCAPY_CHECKS = 400


def _scapy_agrees(frame):
    """Scapy's reading of a rewritten frame: a valid IPv4 checksum, lengths that agree,
    no UDP checksum."""
    packet = Ether(frame)
    ip = packet[IP]
    rebuilt = ip.copy()
    del rebuilt.chksum
    return (ip.tos == GRADIENT_TOS and IP(bytes(rebuilt)).chksum == ip.chksum
            and ip[UDP].len == ip.len - 4 * ip.ihl and ip[UDP].chksum == 0
            and len(frame) >= 14 + ip.len)


def _flag(frame):
    user = frame.tuser
    return bool(user if isinstance(user, int) else user[-1])


@cocotb.test()
async def frame_path_matches_golden(dut):
    config = load_config()
    seed, width = config["seed"], config["width"]
    direction, b, max_frame = config["direction"], config["bound_bits"], config["max_frame"]
    rng = np.random.default_rng(seed)
    if config.get("pcap"):
        frames = [(frame, False) for frame in read_frames(config["pcap"])]
    else:
        frames = fuzz_frames(rng, config["frames"], direction, b, max_frame)
    frames = [(frame, bad) for frame, bad in frames if frame]
    expected, counts = [], Counter()          # (frame, flag, rewritten) of each frame out
    for frame in frames:
        out, verdict = frame_path([frame], direction, b, max_frame)
        counts.update(verdict)
        expected += [(*sent, verdict["changed"] == 1) for sent in out]

    await start_clock_and_reset(dut)
    dut.bound_bits.value = b
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
    for end in (source, sink):               # not a log line per frame
        end.log.setLevel(logging.WARNING)
    stalls = random.Random(seed)
    source.set_pause_generator(pauses(stalls, config["idle"]))
    sink.set_pause_generator(pauses(stalls, config["backpressure"]))
    cycles = [0]

    async def count_cycles():
        while True:
            await RisingEdge(dut.clk)
            cycles[0] += 1
    cocotb.start_soon(count_cycles())

    for frame, bad in frames:
        await source.send(AxiStreamFrame(frame, tuser=int(bad)))
    got, checked = [], 0
    # A frame may wait for every frame before it, each up to a few cycles a byte.
    budget = 10 * (sum(len(f) for f, _ in frames) // width + 40 * len(frames)) + 10_000
    for number, (want, flagged, rewritten) in enumerate(expected):
        frame = await with_timeout(sink.recv(), budget, "ns")
        data = bytes(frame.tdata)
        assert data == want, (f"frame {number} out of {len(expected)}: got {len(data)} bytes "
                              f"{data.hex()}, golden {len(want)} bytes {want.hex()}")
        assert _flag(frame) == flagged, f"frame {number}: tuser {_flag(frame)}, golden {flagged}"
        if rewritten and checked < _SCAPY_CHECKS:
            assert _scapy_agrees(data), f"frame {number}: scapy disagrees: {data.hex()}"
            checked += 1
        got.append(data)
    await ClockCycles(dut.clk, 50)
    assert sink.empty(), "a frame more than golden's came out"
    hardware = {name: int(getattr(dut, name).value) for name in counts}
    assert hardware == dict(counts), f"counters {hardware}, golden {dict(counts)}"
    if config.get("pcap_out"):
        write_frames(config["pcap_out"], got)
    write_report(config, {"frames_in": len(frames), "frames_out": len(got), **hardware,
                          "bytes_in": sum(len(f) for f, _ in frames),
                          "bytes_out": sum(map(len, got)), "scapy_checked": checked,
                          "cycles": cycles[0]})
