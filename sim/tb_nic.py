"""cocotb testbench: an INCEPTIONN-style compressor, decompressor or the two in a loop
(AXI4-Stream top, driven by cocotbext-axi) against ``golden.inceptionn``.

Configuration (``CODNN_TB_CONFIG``): ``engine`` (``compressor``, ``decompressor`` or
``loopback``),
``lanes``, ``bound_bits``; the messages: ``counts`` (values per message) with values drawn
by ``sim.tb_nic.message_values``, or ``gradients`` (a .npy file, sent as messages of
``message_values`` values); ``corrupt`` adds the bad messages of ``bad_cases`` between the
good ones; ``idle``/``backpressure`` (probability per cycle) and ``seed``.

Every output frame must equal golden byte for byte, ``error_count`` must equal the number of
bad messages, and without backpressure (compressor) or stalls (decompressor) a message
whose every group compresses to at most its raw size must not stall the input (compressor;
beyond the cycles the previous message's tail takes to leave) or leave a gap in its output
(decompressor).
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from golden.inceptionn import BLOCK, classify, compress, decompress
from golden.value_frames import special_values, value_frame
from sim.testbench import load_config, start_clock_and_reset, write_report

#: Standard deviations of the random gradients: every class gets its share.
SIGMAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def message_values(rng, count, bound_bits):
    """``count`` float32 values: mostly Gaussian gradients of random scale, a fifth special
    values (class edges, zeros, denormals, Inf, NaN with payloads)."""
    values = rng.normal(0, rng.choice(SIGMAS), count).astype(np.float32)
    special = rng.random(count) < 0.2
    values[special] = rng.choice(special_values(bound_bits), int(special.sum()))
    return values


def group_fits(x, bound_bits, lanes):
    """True when every group of ``8 * max(1, lanes/8)`` values compresses to at most its
    raw size (then the engines keep their full rate)."""
    tags, _ = classify(x, bound_bits)
    group = BLOCK * max(1, lanes // BLOCK)
    sizes = np.array([0, 1, 2, 4])[tags]
    sizes = np.concatenate([sizes, np.zeros(-len(sizes) % group, int)]).reshape(-1, group)
    return bool(np.all(sizes.sum(axis=1) + 2 * (group // BLOCK) <= 4 * group))


def bad_cases(rng, engine, lanes, b):
    """(input frame, expected output frame or None) of each kind of bad message."""
    x = message_values(rng, 3 * max(BLOCK, lanes) + 5, b)
    if engine != "decompressor":
        head = len(x).to_bytes(4, "little") + bytes(4 * lanes - 4)
        short = x[:3 * lanes]
        padded = np.concatenate([short, np.zeros(len(x) - len(short), np.float32)])
        cases = [
            (head + short.tobytes(), padded),                      # fewer values: padded
            (head + x.tobytes() + x[:2 * lanes].tobytes(), x),     # more beats: dropped
            (bytes(4 * lanes) + x[:lanes].tobytes(), x[:0]),       # count 0, values after
        ]
        if engine == "loopback":
            return [(frame, value_frame(decompress(compress(y, b), b), lanes))
                    for frame, y in cases]
        return [(frame, compress(y, b)) for frame, y in cases]
    message = compress(x, b)
    group = max(BLOCK, lanes)
    decoded = decompress(message, b)
    cut = len(compress(x[:2 * group], b)) + 3            # two whole groups, then part
    whole = np.concatenate([decoded[:2 * group], np.zeros(len(x) - 2 * group, np.float32)])
    # A count of 7 whose block gives the eighth value a tag (1.0: raw).
    eight = np.concatenate([x[:7], np.ones(1, np.float32)])
    stray = (7).to_bytes(4, "little") + compress(eight, b)[4:]
    return [
        (message[:cut], value_frame(whole, lanes)),
        (message + b"\x01\x02", value_frame(decoded, lanes)),
        (stray, value_frame(decompress(compress(eight, b), b)[:7], lanes)),
        (message[:3], None),
    ]


class _Monitor:
    """Per message: input beats refused mid-message, and output gap cycles after the
    message's second beat (the first value beat of a decompressed message)."""

    def __init__(self, dut):
        self.stalls, self.gaps = [], []
        self._dut = dut

    async def run(self):
        dut = self._dut
        inside_in = False
        beats = stalls = gaps = 0                # output beats of the message so far
        while True:
            await RisingEdge(dut.clk)
            valid, ready = int(dut.s_axis_tvalid.value), int(dut.s_axis_tready.value)
            if inside_in and valid and not ready:
                stalls += 1
            if valid and ready:
                inside_in = True
                if int(dut.s_axis_tlast.value):
                    self.stalls.append(stalls)
                    inside_in, stalls = False, 0
            out_valid, out_ready = int(dut.m_axis_tvalid.value), int(dut.m_axis_tready.value)
            if beats >= 2 and not out_valid:     # after the descriptor and a value beat
                gaps += 1
            if out_valid and out_ready:
                beats += 1
                if int(dut.m_axis_tlast.value):
                    self.gaps.append(gaps)
                    beats, gaps = 0, 0


def _pauses(rng, probability):
    while True:
        yield int(rng.random() < probability)


@cocotb.test()
async def nic_engine_matches_golden(dut):
    config = load_config()
    seed, engine, lanes, b = (config[k] for k in ("seed", "engine", "lanes", "bound_bits"))
    rng = np.random.default_rng(seed)
    if config.get("gradients"):
        flat = np.load(config["gradients"]).astype(np.float32).reshape(-1)
        size = config["message_values"]
        messages = [flat[k:k + size] for k in range(0, len(flat), size)]
    else:
        messages = [message_values(rng, n, b) for n in config["counts"]]
    cases = []                      # (input frame, expected output or None, bad, full rate)
    for x in messages:
        fits = group_fits(x, b, lanes)
        if engine == "compressor":
            cases.append((value_frame(x, lanes), compress(x, b), False, fits))
        elif engine == "loopback":
            cases.append((value_frame(x, lanes),
                          value_frame(decompress(compress(x, b), b), lanes), False, fits))
        else:
            message = compress(x, b)
            cases.append((message, value_frame(decompress(message, b), lanes), False, fits))
    if config.get("corrupt"):
        bad = bad_cases(rng, engine, lanes, b)
        for k, (frame, expected) in enumerate(bad):
            cases.insert(1 + k * 2, (frame, expected, True, False))

    dut.bound_bits.value = b
    dut.bypass.value = 0
    dut.m_axis_tready.value = 0
    dut.s_axis_tvalid.value = 0
    await start_clock_and_reset(dut)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
    pace = random.Random(seed)
    if config["idle"]:
        source.set_pause_generator(_pauses(pace, config["idle"]))
    if config["backpressure"]:
        sink.set_pause_generator(_pauses(pace, config["backpressure"]))
    monitor = _Monitor(dut)
    cocotb.start_soon(monitor.run())
    for frame, _, _, _ in cases:
        await source.send(AxiStreamFrame(frame))
    expected = [(k, out) for k, (_, out, _, _) in enumerate(cases) if out is not None]
    total_bytes = sum(len(frame) + len(out or b"") for frame, out, _, _ in cases)
    budget = (total_bytes // (4 * lanes) + 100 * len(cases)) * 20 * 10
    for n, (k, want) in enumerate(expected):
        frame = await with_timeout(sink.recv(), budget, "ns")
        got = bytes(frame.tdata)
        where = f"message {k} ({'bad' if cases[k][2] else 'good'}, seed {seed})"
        assert len(got) == len(want), f"{where}: {len(got)} bytes, golden {len(want)}"
        if got != want:
            first = next(i for i in range(len(want)) if got[i] != want[i])
            raise AssertionError(f"{where}: byte {first} is {got[first]:#04x}, golden "
                                 f"{want[first]:#04x}; got {got[first:first + 16].hex()} "
                                 f"golden {want[first:first + 16].hex()}")
    for _ in range(20):
        await RisingEdge(dut.clk)
    assert sink.empty(), f"extra output frames after the last expected one (seed {seed})"
    bad = sum(1 for case in cases if case[2])
    assert int(dut.error_count.value) == bad, (
        f"error_count {int(dut.error_count.value)}, {bad} bad messages (seed {seed})")
    assert int(dut.error.value) == (bad > 0)
    full_rate = [k for k, case in enumerate(cases) if case[3]]
    # The previous message's compressed tail may still be leaving the packer.
    tail = -(-(34 * max(1, lanes // BLOCK) + 4 * lanes) // (4 * lanes)) + 1
    if engine != "decompressor" and not config["backpressure"]:
        for k in full_rate:
            assert monitor.stalls[k] <= tail, (
                f"message {k}: input refused {monitor.stalls[k]} times mid-message, more than "
                f"the {tail} the previous message's tail may take (seed {seed})")
    good_outputs = [n for n, (k, _) in enumerate(expected) if cases[k][3]]
    if engine != "compressor" and not config["idle"] and not config["backpressure"]:
        for n in good_outputs:
            assert monitor.gaps[n] == 0, (f"output message {n}: {monitor.gaps[n]} gap cycles "
                                          f"mid-message (seed {seed})")
    values = sum(len(x) for x in messages)
    packed = sum(len(compress(x, b)) for x in messages)
    write_report(config, {"messages": len(cases), "values": values, "bad_messages": bad,
                          "ratio": 4 * values / packed if packed else 0.0,
                          "stalls": sum(monitor.stalls), "gaps": sum(monitor.gaps)})
