"""cocotb testbench: a NIC engine (AXI4-Stream top, driven by cocotbext-axi) against its
golden codec. What the engine takes and gives, its settings and counters come from its
descriptor (``codnn.hw.nic.NIC_ENGINES``); the golden model is
``codnn.golden.value_frames.NicCodec``.

Configuration (``CODNN_TB_CONFIG``): ``engine`` (its name), ``lanes``, ``bound_bits``
(INCEPTIONN, Rice), ``rounding`` (Rice: 0 nearest, 1 stochastic; the seed is the run's)
or ``scaler``/``codec_seed`` (TernGrad: the scaler's float value, default ``2.5 * std`` of
the finite values; the random stream's seed, default the run's seed); the messages:
``counts`` (values per message) with values drawn by ``codnn.sim.stimulus.message_values``, or
``gradients`` (a .npy file, sent as messages of ``message_values`` values); ``corrupt``
adds the bad messages of ``bad_cases`` between the good ones and the good message of
``keep_holes_case`` (beats but the last keep random bytes: the engines take them whole),
and with ``cuts`` (decoders) that many messages cut at random bytes and as many of random
bytes after a good header (``cut_and_garbage_cases``), each expected as the codec's
``received_values`` defines;
``bypass`` sends every message with the engine's bypass on (out as in);
``idle``/``backpressure`` (probability per cycle).

Every output frame must equal golden byte for byte, ``error_count`` must equal the number
of bad messages (and ``nonfinite``, where the engine has it, the NaN/Inf values it took),
and without backpressure (engines that take values) or stalls (engines that give values) a
message whose every group compresses to at most its raw size must not stall the input
(beyond the cycles the previous message's tail takes to leave) or leave a gap in its
output.
"""

import random
from typing import NamedTuple

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from codnn.golden import rice, terngrad
from codnn.golden.inceptionn import BLOCK, DEFAULT_BOUND_BITS, classify, compress
from codnn.golden.value_frames import NicCodec, value_frame
from codnn.hw.nic import NIC_ENGINES
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.sim.stimulus import message_values, pauses
from codnn.sim.testbench import load_config, start_clock_and_reset, write_report

def group_fits(x, bound_bits, lanes):
    """True when every group of ``8 * max(1, lanes/8)`` values compresses to at most its
    raw size (then the engines keep their full rate)."""
    tags, _ = classify(x, bound_bits)
    group = BLOCK * max(1, lanes // BLOCK)
    sizes = np.array([0, 1, 2, 4])[tags]
    sizes = np.concatenate([sizes, np.zeros(-len(sizes) % group, int)]).reshape(-1, group)
    return bool(np.all(sizes.sum(axis=1) + 2 * (group // BLOCK) <= 4 * group))


class Case(NamedTuple):
    """A message sent to an engine and what it must give back."""

    frame: object           # the input frame: bytes, or an AxiStreamFrame with its keep
    expected: object        # the output frame (bytes), or None: no output
    taken: np.ndarray       # the values the engine takes (its NaN/Inf count)
    bad: bool               # counted in error_count
    full_rate: bool = False  # the input must not stall, nor the output gap


def bad_cases(rng, codec, lanes, max_values):
    """A ``Case`` of each kind of bad message; a decoder's expected output is its codec's
    ``received``."""
    x = message_values(rng, 3 * max(BLOCK, lanes) + 5, codec.b)
    if codec.takes == "values":
        head = len(x).to_bytes(4, "little") + bytes(4 * lanes - 4)
        short = x[:3 * lanes]
        padded = np.concatenate([short, np.zeros(len(x) - len(short), np.float32)])
        cases = [
            (head + short.tobytes(), padded, short),               # fewer values: padded
            (head + x.tobytes() + x[:2 * lanes].tobytes(), x, x),  # more beats: dropped
            (bytes(4 * lanes) + x[:lanes].tobytes(), x[:0], x[:0]),  # count 0, values after
        ]
        if codec.gives == "values":
            cases = [(frame, value_frame(codec.decode(codec.encode(y)), lanes), taken)
                     for frame, y, taken in cases]
        else:
            cases = [(frame, codec.encode(y), taken) for frame, y, taken in cases]
        # A count above the largest message: no output (nor any value taken).
        huge = (1 << 32) - 1
        return [Case(*case, True) for case in cases] + [
            Case(huge.to_bytes(4, "little") + head[4:] + x[:2 * lanes].tobytes(), None,
                 x[:0], True)]
    message = codec.encode(x)
    if codec.inceptionn:
        group = max(BLOCK, lanes)
        # Two whole groups, then part of the third (whole too when its block fits in
        # those 3 bytes).
        frames = [message[:len(compress(x[:2 * group], codec.b)) + 3]]
        # A count of 7 whose block gives the eighth value a tag (1.0: raw).
        eight = np.concatenate([x[:7], np.ones(1, np.float32)])
        frames.append((7).to_bytes(4, "little") + compress(eight, codec.b)[4:])
        short_header = 3
    elif codec.codec == "rice":
        frames = [message[:len(message) // 2]]                # cut inside the codes
        # A count of 7 whose block codes an eighth value; a block with the parameter 15
        # after a good one; a reserved settings bit; a wrong CRC.
        eight = rice.compress(np.ones(8, np.float32), codec.b)[:-4]
        frames.append(rice.seal((7).to_bytes(4, "little") + eight[4:]))
        one = rice.compress(x[:BLOCK], codec.b)[:-4]
        frames.append(rice.seal((2 * BLOCK).to_bytes(4, "little") + one[4:] + b"\x1f"))
        frames.append(message[:4] + bytes([message[4] | 0x40]) + message[5:])
        frames.append(message[:-1] + bytes([message[-1] ^ 0x80]))
        short_header = 4
    else:
        group = max(4, lanes)
        frames = [message[:8 + 2 * group // 4 + 1]]         # two beats' codes, then part
        # A count of 7 whose last byte gives an eighth value code +1.
        eight = terngrad.compress(np.ones(8, np.float32), 1, scaler=1.0)
        frames.append(eight[:4] + (7).to_bytes(4, "little") + eight[8:])
        short_header = 7
        # Code 10 on element 1 and on element 2 * lanes + 1 (another beat): one bad
        # message, both decoded as +0.0.
        ten = bytearray(message)
        for element in (1, 2 * lanes + 1):
            byte, shift = 8 + element // 4, 2 * (element % 4)
            ten[byte] = (ten[byte] & ~(3 << shift)) | 2 << shift
        frames.append(bytes(ten))
        # Scalers with the sign bit set or not finite: every value +0.0.
        frames += [np.float32(s).tobytes() + message[4:] for s in (-0.0, -1.5, np.nan)]
    at = 4 if codec.codec == "terngrad" else 0              # the count's offset
    frames += [
        message + b"\x01\x02",                              # bytes past the end
        message[:short_header],                             # no whole header: no output
        # A count above the largest message: no output.
        message[:at] + ((1 << 32) - 1).to_bytes(4, "little") + message[at + 4:at + 20],
    ]
    return [_decoder_case(codec, frame, lanes, max_values) for frame in frames]


def _decoder_case(codec, frame, lanes, max_values):
    """The ``Case`` of any byte string sent to a decoder."""
    expected, bad = codec.received(frame, lanes, max_values)
    return Case(frame, expected, np.zeros(0, np.float32), bad)


def cut_and_garbage_cases(rng, codec, lanes, count, max_values):
    """``count`` messages cut at a random byte (the header's included) and ``count``
    messages of random bytes after a good header, each a ``Case``: a decoder's expected
    output is its codec's ``received``."""
    frames = []
    for k in range(count):
        x = message_values(rng, int(rng.integers(1, 6 * max(BLOCK, lanes))), codec.b)
        message = codec.encode(x)
        # One byte short, then cuts anywhere (an empty message never reaches the engine).
        cut = len(message) - 1 if k == 0 else int(rng.integers(1, len(message)))
        header = {"inceptionn": 4, "rice": rice.HEADER_BYTES}.get(codec.codec, 8)
        length = int(rng.integers(0, 2 * (len(message) - header) + 3))
        frames += [message[:cut], message[:header] + rng.bytes(length)]
    return [_decoder_case(codec, frame, lanes, max_values) for frame in frames]


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


def keep_holes_case(rng, codec, lanes):
    """The ``Case`` of a good message whose beats other than the last keep only some of
    their bytes: every engine reads those beats whole, so the output is the message's
    own."""
    x = message_values(rng, 5 * max(BLOCK, lanes) + 3, codec.b)
    frame, expected, taken = codec.frames(lanes, x)
    width = 4 * lanes
    kept = rng.integers(0, width, -(-len(frame) // width))
    tkeep = [int(k % width < kept[k // width]) for k in range(len(frame))]
    last_beat = len(frame) % width or width
    tkeep[-last_beat:] = [1] * last_beat
    return Case(AxiStreamFrame(frame, tkeep=tkeep), expected, taken, False)


def _cases(config, rng, engine, lanes, b):
    """The run's messages (the config's gradients, or random ones of its counts), their
    codec, and the frames to send: each message's, passed as they are with ``bypass``;
    with ``corrupt``, bad, cut and garbage frames and one with holes in its keep
    between them."""
    if config.get("gradients"):
        flat = np.load(config["gradients"]).astype(np.float32).reshape(-1)
        size = config["message_values"]
        messages = [flat[k:k + size] for k in range(0, len(flat), size)]
    else:
        messages = [message_values(rng, n, b) for n in config["counts"]]
    codec = NicCodec(engine.codec, takes=engine.takes, gives=engine.gives, bound_bits=b,
                     seed=config.get("codec_seed", config["seed"]),
                     scaler=config.get("scaler"), messages=messages,
                     rounding=("nearest", "stochastic")[config.get("rounding", 0)])
    cases = []
    for x in messages:
        # The Rice compressor takes a value a cycle: no full beat rate to hold it to.
        full_rate = (group_fits(x, codec.b, lanes) if codec.inceptionn
                     else codec.codec != "rice")
        cases.append(Case(*codec.frames(lanes, x), False, full_rate))
    if config.get("bypass"):            # the on/off switch: every message passes as it is
        cases = [Case(case.frame, case.frame, np.zeros(0, np.float32), False)
                 for case in cases]
    elif config.get("corrupt"):
        bad = bad_cases(rng, codec, lanes, DEFAULT_MAX_VALUES)
        if config.get("cuts"):
            bad += cut_and_garbage_cases(rng, codec, lanes, config["cuts"],
                                         DEFAULT_MAX_VALUES)
        for k, case in enumerate(bad):
            cases.insert(1 + k * 2, case)
        cases.insert(2, keep_holes_case(rng, codec, lanes))
    return messages, codec, cases


@cocotb.test()
async def nic_engine_matches_golden(dut):
    config = load_config()
    seed, lanes = config["seed"], config["lanes"]
    engine = NIC_ENGINES[config["engine"]]
    b = config.get("bound_bits", DEFAULT_BOUND_BITS)
    rng = np.random.default_rng(seed)
    messages, codec, cases = _cases(config, rng, engine, lanes, b)

    settings = {"bound_bits": b, "scaler": int(np.float32(codec.scaler).view(np.uint32)),
                "seed": codec.seed, "bypass": int(bool(config.get("bypass"))),
                "rounding": config.get("rounding", 0)}
    for name, _, _ in engine.settings:
        getattr(dut, name).value = settings[name]
    dut.m_axis_tready.value = 0
    dut.s_axis_tvalid.value = 0
    await start_clock_and_reset(dut)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
    pace = random.Random(seed)
    if config["idle"]:
        source.set_pause_generator(pauses(pace, config["idle"]))
    if config["backpressure"]:
        sink.set_pause_generator(pauses(pace, config["backpressure"]))
    monitor = _Monitor(dut)
    monitored = not (config["idle"] and config["backpressure"])  # its checks need a 0
    if monitored:
        cocotb.start_soon(monitor.run())
    for case in cases:
        await source.send(AxiStreamFrame(case.frame))
    expected = [(k, case.expected) for k, case in enumerate(cases)
                if case.expected is not None]
    total_bytes = sum(len(case.frame) + len(case.expected or b"") for case in cases)
    budget = (total_bytes // (4 * lanes) + 100 * len(cases)) * 20 * 10
    for n, (k, want) in enumerate(expected):
        frame = await with_timeout(sink.recv(), budget, "ns")
        got = bytes(frame.tdata)
        where = f"message {k} ({'bad' if cases[k].bad else 'good'}, seed {seed})"
        assert len(got) == len(want), f"{where}: {len(got)} bytes, golden {len(want)}"
        if got != want:
            first = next(i for i in range(len(want)) if got[i] != want[i])
            if codec.gives == "values" and first >= 4 * lanes:
                where += f", value {(first - 4 * lanes) // 4}"
            raise AssertionError(f"{where}: byte {first} is {got[first]:#04x}, golden "
                                 f"{want[first]:#04x}; got {got[first:first + 16].hex()} "
                                 f"golden {want[first:first + 16].hex()}")
    for _ in range(20):
        await RisingEdge(dut.clk)
    assert sink.empty(), f"extra output frames after the last expected one (seed {seed})"
    bad = sum(1 for case in cases if case.bad)
    assert int(dut.error_count.value) == bad, (
        f"error_count {int(dut.error_count.value)}, {bad} bad messages (seed {seed})")
    if engine.has("nonfinite"):
        taken = np.concatenate([case.taken for case in cases])
        nonfinite = int((~np.isfinite(taken)).sum())
        assert int(dut.nonfinite.value) == nonfinite, (
            f"nonfinite {int(dut.nonfinite.value)}, {nonfinite} NaN/Inf values sent "
            f"(seed {seed})")
        assert int(dut.error.value) == (bad > 0 or nonfinite > 0)
    else:
        assert int(dut.error.value) == (bad > 0)
    full_rate = [k for k, case in enumerate(cases) if case.full_rate]
    # The previous message's compressed tail may still be leaving the packer.
    tail = -(-(34 * max(1, lanes // BLOCK) + 4 * lanes) // (4 * lanes)) + 1
    if codec.takes == "values" and not config["backpressure"]:
        for k in full_rate:
            assert monitor.stalls[k] <= tail, (
                f"message {k}: input refused {monitor.stalls[k]} times mid-message, more than "
                f"the {tail} the previous message's tail may take (seed {seed})")
    good_outputs = [n for n, (k, _) in enumerate(expected) if cases[k].full_rate]
    if codec.gives == "values" and not config["idle"] and not config["backpressure"]:
        for n in good_outputs:
            assert monitor.gaps[n] == 0, (f"output message {n}: {monitor.gaps[n]} gap cycles "
                                          f"mid-message (seed {seed})")
    values = sum(len(x) for x in messages)
    packed = sum(len(codec.encode(x)) for x in messages)
    write_report(config, {"messages": len(cases), "values": values, "bad_messages": bad,
                          "ratio": 4 * values / packed if packed else 0.0,
                          "stalls": sum(monitor.stalls) if monitored else None,
                          "gaps": sum(monitor.gaps) if monitored else None})
