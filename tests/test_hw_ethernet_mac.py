"""The Ethernet MAC on Amaranth's simulator: the transmitter's bytes on GMII (preamble,
SFD, padding, FCS from zlib, the inter-frame gap, a poisoned FCS, an underrun), the
receiver's checks (FCS, rx_er, runts, a bad preamble, frames too short to have an FCS)
and the two back to back; the PLL's dividers."""

import random
import zlib

import pytest
from amaranth.sim import Simulator

from codnn.hw.soc.ethernet_board import pll_dividers
from codnn.hw.nic.ethernet_mac import IFG, PREAMBLE, SFD, MacRx, MacTx

SEED = 20261126


def _wire(frame, fcs=None):
    """GMII bytes of a frame as a transmitter sends it (padded, with its FCS)."""
    padded = frame.ljust(60, b"\0")
    fcs = zlib.crc32(padded).to_bytes(4, "little") if fcs is None else fcs
    return bytes([PREAMBLE] * 7 + [SFD]) + padded + fcs


def _transmit(frames, *, gap_at=None):
    """Send ``frames`` ((bytes, poison) each) through a MacTx; with ``gap_at`` the source
    misses a byte there (an underrun). Returns the (txd, tx_en, tx_er) of every cycle and
    the counters."""
    dut = MacTx()
    sim = Simulator(dut)
    sim.add_clock(8e-9)
    trace, counters = [], {}

    async def source(ctx):
        for frame, poison in frames:
            for k, byte in enumerate(frame):
                if gap_at == k:
                    await ctx.tick()
                ctx.set(dut.i.payload, {"data": byte, "keep": 1, "last": k == len(frame) - 1,
                                        "user": poison})
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
                ctx.set(dut.i.valid, 0)

    async def sink(ctx):
        for _ in range(200 * len(frames) + sum(len(f) for f, _ in frames)):
            _, _, data, enable, error = await ctx.tick().sample(dut.txd, dut.tx_en, dut.tx_er)
            trace.append((data, enable, error))
        counters.update(frames=ctx.get(dut.frames), underruns=ctx.get(dut.underruns))

    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return trace, counters


def _bursts(trace):
    """The bytes of each tx_en burst, with whether tx_er was seen, and the idle cycles
    before each burst."""
    bursts, current, idle = [], None, 0
    for data, enable, error in trace:
        if enable:
            if current is None:
                current = [bytearray(), False, idle]
            current[0].append(data)
            current[1] |= bool(error)
        else:
            if current is not None:
                bursts.append(tuple(current))
                current, idle = None, 0
            idle += 1
    return [(bytes(data), error, gap) for data, error, gap in bursts]


def test_transmitter_frames_pads_and_checksums():
    frames = [(bytes(range(100)), False), (b"\x01\x02\x03", False), (bytes(60), True)]
    trace, counters = _transmit(frames)
    bursts = _bursts(trace)
    assert [data for data, _, _ in bursts] == [
        _wire(frames[0][0]), _wire(frames[1][0]),
        _wire(bytes(60), (~zlib.crc32(bytes(60)) & 0xFFFFFFFF).to_bytes(4, "little"))]
    assert not any(error for _, error, _ in bursts)
    assert all(gap >= IFG for _, _, gap in bursts[1:]) and bursts[1][2] == IFG
    assert counters == {"frames": 3, "underruns": 0}


def test_transmitter_underrun_ends_the_frame_in_an_error():
    frames = [(bytes(range(80)), False), (bytes(range(70)), False)]
    trace, counters = _transmit(frames, gap_at=30)
    bursts = _bursts(trace)
    assert bursts[0][1] and len(bursts[0][0]) == 8 + 30 + 1       # cut, tx_er at its end
    assert counters["underruns"] == 2 and counters["frames"] == 0  # both frames missed one


def _receive(wire_bursts, errors=()):
    """GMII bursts (bytes each, idle between) into a MacRx; the frames (bytes, user) out.
    ``errors``: (burst, byte) positions with rx_er."""
    dut = MacRx()
    sim = Simulator(dut)
    sim.add_clock(8e-9)
    out = []

    async def source(ctx):
        for number, burst in enumerate(wire_bursts):
            for k, byte in enumerate(burst):
                ctx.set(dut.rxd, byte)
                ctx.set(dut.rx_dv, 1)
                ctx.set(dut.rx_er, (number, k) in errors)
                await ctx.tick()
            ctx.set(dut.rx_dv, 0)
            ctx.set(dut.rx_er, 0)
            await ctx.tick().repeat(12)

    async def sink(ctx):
        current = bytearray()
        for _ in range(sum(len(b) + 12 for b in wire_bursts) + 20):
            _, _, valid, beat = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                assert beat.keep == 1
                current.append(beat.data)
                if beat.last:
                    out.append((bytes(current), bool(beat.user)))
                    current = bytearray()

    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return out


def test_receiver_checks_fcs_errors_runts_and_preambles():
    rng = random.Random(SEED)
    good = bytes(rng.randrange(256) for _ in range(90))
    bad_fcs = bytearray(_wire(good))
    bad_fcs[-1] ^= 1
    runt = bytes([PREAMBLE] * 7 + [SFD]) + b"abcdefghij" + zlib.crc32(b"abcdefghij").to_bytes(
        4, "little")
    short_preamble = bytes([PREAMBLE, SFD]) + _wire(good)[8:]
    bad_preamble = bytes([PREAMBLE, 0x12, SFD]) + _wire(good)[8:]
    tiny = bytes([PREAMBLE] * 7 + [SFD]) + b"\1\2\3\4"
    bursts = [_wire(good), bytes(bad_fcs), runt, _wire(good), short_preamble, bad_preamble,
              tiny, _wire(good)]
    out = _receive(bursts, errors={(3, 40)})
    assert out == [(good, False), (good, True), (b"abcdefghij", True), (good, True),
                   (good, False), (good, False)]


def test_transmitter_into_receiver():
    rng = random.Random(SEED + 1)
    frames = [bytes(rng.randrange(256) for _ in range(n)) for n in (60, 61, 200, 1514)]
    trace, _ = _transmit([(frame, False) for frame in frames])
    out = _receive([data for data, _, _ in _bursts(trace)])
    assert out == [(frame, False) for frame in frames]


@pytest.mark.parametrize("clock_hz, dividers", [(25e6, (1, 5)), (100e6, (4, 5)),
                                                (50e6, (2, 5)), (30e6, (6, 25))])
def test_pll_dividers(clock_hz, dividers):
    assert pll_dividers(clock_hz) == dividers
    input_div, feedback_div = dividers
    assert clock_hz / input_div * feedback_div == 125e6


def test_pll_dividers_refuse_what_they_cannot_make():
    with pytest.raises(ValueError, match="outside the PLL's range"):
        pll_dividers(25e6, 250e6)
    with pytest.raises(ValueError, match="cannot make 125 MHz from 12 MHz exactly"):
        pll_dividers(12e6)              # 12 MHz / 12 * 125: a 1 MHz phase detector

