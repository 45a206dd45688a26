"""cocotb testbench: the bump in the wire (``codnn.hw.nic.EthernetBump``) between two RGMII PHY
models of cocotbext-eth at 1 Gb/s.

Frames built with scapy (gradient frames, other frames, a frame with a bad FCS, one with
``rx_er``) enter port 0's PHY and must leave port 1's as ``codnn.golden.packets.frame_path``
compresses them, with a good FCS (a damaged frame: unchanged, its FCS bad); the frames
port 1 sent enter port 1 again and must leave port 0 restored. Then a byte on the UART
asks for the counters, whose line must hold golden's counts. Configuration
(``CODNN_TB_CONFIG``): ``bound_bits``, ``divisor`` (the UART's, in core clock cycles),
``frames`` (gradient frames each way, of up to ``max_values`` values, default 300),
``restore`` (False: port 1's frames must leave port 0 as they are). The ports' clocks run
at 125 MHz, the core's at 50 MHz, as on the boards.
"""


import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer, with_timeout
from cocotbext.eth import GmiiFrame, RgmiiPhy

from codnn.golden.packets import MIN_FRAME, frame_path
from codnn.hw.soc.ethernet_bump import COUNTERS
from codnn.sim.frame_fuzz import gradient_frame
from codnn.sim.stimulus import message_values
from codnn.sim.testbench import load_config, write_report

_PERIOD_NS = 8                          # the ports' 125 MHz
_CORE_PERIOD_NS = 20                    # the core's 50 MHz


def _phy(dut, port):
    return RgmiiPhy(getattr(dut, f"rgmii{port}_txd"), getattr(dut, f"rgmii{port}_tx_ctl"),
                    getattr(dut, f"rgmii{port}_tx_clk"), getattr(dut, f"rgmii{port}_rxd"),
                    getattr(dut, f"rgmii{port}_rx_ctl"), getattr(dut, f"rgmii{port}_rx_clk"),
                    speed=1000e6)


def _on_wire(frame):
    """What a frame (no FCS) is after a MAC pads it."""
    return frame.ljust(MIN_FRAME, b"\0")


async def _exchange(sender, receiver, frames, expected):
    """Send ``frames`` ((bytes, damage) each; damage None, "fcs" or "rx_er") into one PHY
    and check that ``expected`` ((bytes, flagged) each) leave the other; returns the frames
    that left."""
    for frame, damage in frames:
        wire = GmiiFrame.from_payload(frame)
        if damage == "fcs":
            wire.data[-1] ^= 0xFF
        elif damage == "rx_er":
            wire.error = [0] * len(wire.data)
            wire.error[len(wire.data) // 2] = 1
        await sender.send(wire)
    got = []
    for number, (want, flagged) in enumerate(expected):
        wire = await with_timeout(receiver.recv(), 2_000_000, "ns")
        data = bytes(wire.get_payload())
        assert data == _on_wire(want), (f"frame {number}: got {data.hex()}, golden "
                                        f"{_on_wire(want).hex()}")
        assert wire.check_fcs() != flagged, f"frame {number}: FCS good {wire.check_fcs()}"
        assert not any(wire.error or []), f"frame {number} left with tx_er"
        got.append(data)
    return got


async def _uart_line(dut, divisor, count):
    """Send one byte on ``rx`` and read the line of ``count`` hex counters from ``tx`` (the
    UART runs on the core's clock)."""
    bit = divisor * _CORE_PERIOD_NS
    for level in [0, *[(0x3F >> k) & 1 for k in range(8)], 1]:
        dut.rx.value = level
        await Timer(bit, "ns")
    line = b""
    while not line.endswith(b"\r\n"):
        while int(dut.tx.value):
            await RisingEdge(dut.clk)
        await Timer(bit * 3 // 2, "ns")
        byte = 0
        for k in range(8):
            byte |= int(dut.tx.value) << k
            await Timer(bit, "ns")
        line += bytes([byte])
    return [int(word, 16) for word in line.split()]


@cocotb.test()
async def bump_matches_golden(dut):
    config = load_config()
    rng = np.random.default_rng(config["seed"])
    b = config["bound_bits"]
    cocotb.start_soon(Clock(dut.clk, _PERIOD_NS, unit="ns").start())
    cocotb.start_soon(Clock(dut.core_clk, _CORE_PERIOD_NS, unit="ns").start())
    await Timer(_PERIOD_NS // 4, "ns")
    cocotb.start_soon(Clock(dut.sync90_clk, _PERIOD_NS, unit="ns").start())
    resets = (dut.rst, dut.sync90_rst, dut.core_rst)
    dut.rx.value = 1
    for reset in resets:
        reset.value = 1
    await ClockCycles(dut.core_clk, 4)
    for reset in resets:
        reset.value = 0
    phys = [_phy(dut, 0), _phy(dut, 1)]
    await ClockCycles(dut.clk, 10)

    gradients = [gradient_frame(rng, message_values(rng, int(n), b))
                 for n in rng.integers(0, config.get("max_values", 300), config["frames"])]
    other = gradient_frame(rng, [1.0, 2.0], tos=0)
    frames = [(frame, None) for frame in gradients] + [(other, None), (gradients[0], "fcs"),
                                                       (gradients[1], "rx_er")]
    # The MAC pads a short frame to 60 bytes before the path sees it.
    sent, counts_out = frame_path([(_on_wire(f), d is not None) for f, d in frames],
                                  "compress", b)
    out = await _exchange(phys[0].rx, phys[1].tx, frames, sent)
    back = [(frame, None) for frame, flagged in zip(out, [f for _, f in sent]) if not flagged]
    if config.get("restore", True):
        restored, counts_back = frame_path([f for f, _ in back], "decompress", b)
    else:                                   # forwarded as they are
        restored = [(frame, False) for frame, _ in back]
        counts_back = {"passed": len(back), "changed": 0, "dropped": 0, "flagged": 0}
    await _exchange(phys[1].rx, phys[0].tx, back, restored)

    await ClockCycles(dut.clk, 100)
    line = await with_timeout(_uart_line(dut, config["divisor"], 2 * len(COUNTERS)),
                              50_000_000, "ns")
    want = []
    for frames_in, counts, sent_frames in ((frames, counts_out, sent),
                                           (back, counts_back, restored)):
        flagged = sum(d is not None for _, d in frames_in)
        want += [len(frames_in), flagged, counts["passed"], counts["changed"],
                 counts["dropped"], counts["flagged"], len(sent_frames), 0]
    assert line == want, f"counters {dict(zip(COUNTERS * 2, line))}, golden {want}"
    write_report(config, {"frames_each_way": len(frames), "counters": line})
