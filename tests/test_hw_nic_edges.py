# amaranth: UnusedElaboratable=no
"""The NIC engines at the edges an outside testbench found, on Amaranth's simulator against
the golden codecs: TernGrad seeds that wrap, settings changed on the cycle right after a
message's first beat, ``keep`` holes in beats other than the last, bad TernGrad scalers on
both sides, errors counted once per message whatever the lane count, and counts above the
largest message."""

import random

import numpy as np
import pytest

from codnn.golden import inceptionn, rice, terngrad
from codnn.golden.inceptionn import CorruptMessage
from codnn.golden.value_frames import special_values, value_frame
from codnn.hw.nic import NIC_ENGINES, InceptionnCompressor, TernGradDecoder, TernGradEncoder
from codnn.sim.pysim import run_frames

SEED = 20261125


def _bits(x):
    return int(np.float32(x).view(np.uint32))


def _values(rng, count, bound_bits=10, special=True):
    """Gaussian gradients of a random scale, a fifth of them class-edge values (finite
    ones only without ``special``)."""
    x = (rng.standard_normal(count) * rng.choice([1e-3, 1e-1, 1.0])).astype(np.float32)
    edges = special_values(bound_bits)
    if not special:
        edges = edges[np.isfinite(edges)]
    pick = rng.random(count) < 0.2
    x[pick] = rng.choice(edges, int(pick.sum()))
    return x


def _case(engine, lanes, x, setting):
    """(input frame, expected output frame) of values ``x`` under one message's settings."""
    b = setting.get("bound_bits", 10)
    if engine == "decompressor":
        frame = inceptionn.compress(x, b)
        out = value_frame(inceptionn.decompress(frame, b), lanes)
    elif engine == "rice_decompressor":
        frame = rice.compress(x, b)
        out = value_frame(rice.decompress(frame), lanes)
    elif engine == "terngrad_decoder":
        frame = terngrad.compress(x, int(setting.get("seed", 7)), scaler=np.abs(x).max(initial=0))
        out = value_frame(terngrad.decompress(frame), lanes)
    else:
        frame = value_frame(x, lanes)
        if engine == "compressor":
            out = inceptionn.compress(x, b)
        elif engine == "rice_compressor":
            out = rice.compress(x, b, rice.ROUNDINGS[setting.get("rounding", 0)],
                                setting.get("seed", 0))
        elif engine == "loopback":
            out = value_frame(inceptionn.decompress(inceptionn.compress(x, b), b), lanes)
        elif engine == "rice_loopback":
            out = value_frame(rice.decompress(rice.compress(
                x, b, rice.ROUNDINGS[setting.get("rounding", 0)], setting.get("seed", 0))),
                lanes)
        else:
            scaler = np.uint32(setting["scaler"]).view(np.float32)
            out = terngrad.compress(x, setting["seed"], scaler=scaler)
    return frame, (frame if setting.get("bypass") else out)


def _random_setting(engine, rng, x):
    if engine in ("compressor", "decompressor", "loopback"):
        return {"bound_bits": int(rng.integers(7, 16)), "bypass": int(rng.random() < 0.3)}
    if engine in ("rice_compressor", "rice_loopback"):
        seed = int(rng.choice([rng.integers(0, 1 << 32), (1 << 32) - int(rng.integers(1, 9))]))
        return {"bound_bits": int(rng.integers(7, 16)), "rounding": int(rng.integers(0, 2)),
                "seed": seed}
    if engine == "terngrad":
        scaler = np.float32(np.abs(x).max(initial=0) * rng.choice([0.5, 1.0, 2.0]))
        return {"scaler": _bits(scaler), "seed": int(rng.integers(0, 1 << 32)),
                "bypass": int(rng.random() < 0.3)}
    return {"bypass": int(rng.random() < 0.3)}


@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16])
def test_terngrad_counter_wraps_mod_2_32(lanes):
    """Seeds at and just below 2**32 - k for every k up to two beats: the counter
    ``seed + i`` wraps at each lane position and in the message's first, middle and last
    beats; every code equals golden's."""
    rng = np.random.default_rng(SEED + lanes)
    print(f"seed {SEED + lanes}")
    frames, want, settings = [], [], []
    for k in [0, *range(1, 2 * lanes + 2)]:
        x = _values(rng, 3 * lanes + 1, special=False)
        seed = (1 << 32) - k if k else 0
        setting = {"scaler": _bits(np.abs(x).max()), "seed": seed & 0xFFFF_FFFF, "bypass": 0}
        frame, out = _case("terngrad", lanes, x, setting)
        frames.append(frame)
        want.append(out)
        settings.append(setting)
    got, counters = run_frames(TernGradEncoder(lanes=lanes), frames, settings=settings,
                               expected_frames=len(frames), rng=random.Random(lanes))
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"message {k} (seed {settings[k]['seed']:#x}): {g.hex()} != {w.hex()}"
    assert counters == {"error_count": 0, "nonfinite": 0}


@pytest.mark.parametrize("engine", ["compressor", "decompressor", "loopback", "terngrad",
                                    "terngrad_decoder", "rice_compressor", "rice_loopback"])
@pytest.mark.parametrize("lanes", [2, 8])
def test_settings_are_sampled_at_the_first_beat(engine, lanes):
    """Each message has its own settings (bound, bypass, scaler, seed), and the next
    message's are driven from the cycle right after the edge that takes this one's first
    beat; messages of one beat among them; beats other than the last keep random bytes
    (taken whole). Every output frame equals golden under its message's settings."""
    seed = SEED + 7 * lanes + len(engine)
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    frames, want, settings = [], [], []
    for count in (0, 1, 9, 3 * lanes + 5, 1, 0, 2, 40, 1):
        x = _values(rng, count, special=engine not in ("terngrad", "terngrad_decoder"))
        setting = _random_setting(engine, rng, x)
        frame, out = _case(engine, lanes, x, setting)
        frames.append(frame)
        want.append(out)
        settings.append(setting)
    got, counters = run_frames(NIC_ENGINES[engine].component(lanes=lanes), frames,
                               settings=settings, expected_frames=len(frames),
                               rng=random.Random(seed), idle=0.2, backpressure=0.2,
                               keep_holes=True)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"message {k} ({settings[k]}): {g.hex()} != golden {w.hex()}"
    assert counters["error_count"] == 0


def test_golden_terngrad_rejects_a_scaler_with_its_sign_bit_set():
    x = np.array([0.5, -0.25, 0.0], np.float32)
    for bad in (-0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="sign bit clear"):
            terngrad.compress(x, 1, scaler=bad)
        message = np.float32(bad).tobytes() + terngrad.compress(x, 1, scaler=1.0)[4:]
        with pytest.raises(CorruptMessage, match="sign bit clear"):
            terngrad.decompress(message)
    assert terngrad.decompress(terngrad.compress(x, 1, scaler=0.0)).tolist() == [0, 0, 0]


def _with_code(message, element, code):
    data = bytearray(message)
    byte, shift = 8 + element // 4, 2 * (element % 4)
    data[byte] = (data[byte] & ~(3 << shift)) | code << shift
    return bytes(data)


@pytest.mark.parametrize("lanes", [2, 8])
def test_terngrad_decoder_bad_scalers_and_one_count_per_message(lanes):
    """A message whose scaler has its sign bit set (-0.0, -1), is Inf or NaN decodes to
    +0.0 values and counts once; so does one with code 10 in two beats and a stray code
    past its count; golden refuses each. Good messages between them decode as golden."""
    rng = np.random.default_rng(SEED + lanes)
    print(f"seed {SEED + lanes}")
    x = _values(rng, 4 * lanes + 3, special=False)
    good = terngrad.compress(x, 5, scaler=np.abs(x).max())
    n = len(x)
    frames, want = [good], [value_frame(terngrad.decompress(good), lanes)]
    for scaler in (-0.0, -1.0, np.inf, np.nan):
        bad = np.float32(scaler).tobytes() + good[4:]
        with pytest.raises(CorruptMessage):
            terngrad.decompress(bad)
        frames += [bad, good]
        want += [value_frame(np.zeros(n, np.float32), lanes),
                 value_frame(terngrad.decompress(good), lanes)]
    # Code 10 on elements 0 and 3 lanes on (different beats), and a code past the count.
    tens = _with_code(_with_code(good, 0, 2), 3 * lanes, 2)
    stray = _with_code(tens, n, 1)
    fixed = _with_code(_with_code(good, 0, 0), 3 * lanes, 0)
    for bad in (tens, stray):
        with pytest.raises(CorruptMessage):
            terngrad.decompress(bad)
        frames.append(bad)
        want.append(value_frame(terngrad.decompress(fixed), lanes))
    got, counters = run_frames(TernGradDecoder(lanes=lanes), frames, settings=[],
                               expected_frames=len(frames), rng=random.Random(lanes),
                               idle=0.2, backpressure=0.2)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"message {k}: {g.hex()} != {w.hex()}"
    assert counters["error_count"] == 6


@pytest.mark.parametrize("lanes", [2, 8])
def test_encoders_count_a_message_with_two_faults_once(lanes):
    """A bound out of range on a message cut short (compressor), a negative scaler on a
    message with beats past its count (TernGrad): one bad message each; NaN values raise
    ``error`` and count in ``nonfinite`` only."""
    rng = np.random.default_rng(SEED + 3 * lanes)
    print(f"seed {SEED + 3 * lanes}")
    x = _values(rng, 3 * lanes + 2, special=False)
    head = value_frame(x, lanes)[:4 * lanes]
    cut = head + x[:lanes].tobytes()
    padded = np.concatenate([x[:lanes], np.zeros(len(x) - lanes, np.float32)])
    got, counters = run_frames(
        InceptionnCompressor(lanes=lanes), [cut, value_frame(x, lanes)],
        settings=[{"bound_bits": 3}, {"bound_bits": 10}], expected_frames=2,
        rng=random.Random(lanes))
    assert got == [inceptionn.compress(padded, 7), inceptionn.compress(x, 10)]
    assert counters["error_count"] == 1

    long = value_frame(x, lanes) + x[:2 * lanes].tobytes()
    nan = x.copy()
    nan[[0, -1]] = np.nan
    settings = [{"scaler": _bits(-1.0), "seed": 3}, {"scaler": _bits(1.0), "seed": 3}]
    got, counters = run_frames(TernGradEncoder(lanes=lanes), [long, value_frame(nan, lanes)],
                               settings=settings, expected_frames=2,
                               rng=random.Random(lanes))
    zeros = np.float32(-1.0).tobytes() + terngrad.compress(np.zeros_like(x), 3, scaler=1.0)[4:]
    assert got == [zeros, terngrad.compress(np.nan_to_num(nan, nan=0.0), 3, scaler=1.0)]
    assert counters == {"error_count": 1, "nonfinite": 2}


@pytest.mark.parametrize("engine", sorted(NIC_ENGINES))
def test_count_above_the_largest_message_is_dropped(engine):
    """With ``max_values`` 40: a message of exactly 40 values is read; one declaring 41
    and one declaring 2**32 - 1 (a few bytes follow) give no output, count once each, and
    the stream goes on."""
    lanes = 2
    rng = np.random.default_rng(SEED)
    x = _values(rng, 40, special=False)
    setting = {"scaler": _bits(np.abs(x).max()), "seed": 1, "bypass": 0}
    frame, out = _case("terngrad" if engine == "maxabs" else engine, lanes, x, setting)
    if engine == "maxabs":
        out = np.abs(x).max().tobytes()
    if NIC_ENGINES[engine].takes == "codec":
        at = 4 if engine == "terngrad_decoder" else 0
        huge = [frame[:at] + count.to_bytes(4, "little") + frame[at + 4:at + 20]
                for count in (41, (1 << 32) - 1)]
    else:
        huge = [count.to_bytes(4, "little") + bytes(4 * lanes - 4) + x[:5].tobytes()
                for count in (41, (1 << 32) - 1)]
    frames = [frame, huge[0], frame, huge[1], frame]
    settings = [setting if engine == "terngrad" else {}] * len(frames)
    got, counters = run_frames(NIC_ENGINES[engine].component(lanes=lanes, max_values=40), frames,
                               settings=settings, expected_frames=3,
                               rng=random.Random(lanes), backpressure=0.2)
    assert got == [out] * 3
    assert counters["error_count"] == 2


@pytest.mark.parametrize("max_values", [0, 1 << 32, True, 2.0])
def test_max_values_out_of_range(max_values):
    with pytest.raises(ValueError, match="Largest message must be 1..2\\*\\*32-1 values"):
        TernGradDecoder(lanes=2, max_values=max_values)


def test_rice_compressor_clamps_a_bound_out_of_range():
    """``bound_bits`` 3 is clamped to 7: the message is coded with 7 and counts as bad."""
    rng = np.random.default_rng(SEED)
    x = _values(rng, 37)
    got, counters = run_frames(NIC_ENGINES["rice_compressor"].component(lanes=2),
                               [value_frame(x, 2)] * 2,
                               settings=[{"bound_bits": 3}, {"bound_bits": 7}],
                               expected_frames=2, rng=random.Random(SEED))
    assert got == [rice.compress(x, 7)] * 2
    assert counters["error_count"] == 1


@pytest.mark.parametrize("lanes", [1, 16])
def test_rice_compressor_codes_all_zero_blocks_in_one_bit(lanes):
    """Blocks whose values all quantize to 0 are one bit each; a block of zeros and one
    infinity is not (the escape costs every parameter 47 bits at k = 0)."""
    xs = [np.zeros(40, np.float32), np.full(33, 1e-5, np.float32),
          np.r_[np.zeros(16), np.inf, np.zeros(5)].astype(np.float32)]
    got, _ = run_frames(NIC_ENGINES["rice_compressor"].component(lanes=lanes),
                        [value_frame(x, lanes) for x in xs], settings=[{"bound_bits": 10}] * 3,
                        expected_frames=3, rng=random.Random(SEED))
    assert got == [rice.compress(x, 10) for x in xs]
    assert [len(g) for g in got] == [10, 10, 18]


def _frames_after_reset(engine, lanes, first, beats, second, before=None, after=None):
    """Send ``beats`` beats of frame ``first`` into ``engine`` (its settings ``before``),
    reset it for a cycle, then send frame ``second`` (settings ``after``) whole. Returns
    the output frames that left after the reset."""
    from amaranth.hdl import ResetInserter, Signal
    from amaranth.sim import Simulator

    from codnn.sim.pysim import frame_beats
    reset = Signal()
    dut = ResetInserter({"sync": reset})(engine)
    frames, current = [], bytearray()
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def send(ctx, frame, count):
        for beat in frame_beats(frame, 4 * lanes)[:count]:
            ctx.set(engine.i.payload, beat)
            ctx.set(engine.i.valid, 1)
            await ctx.tick().until(engine.i.ready)
        ctx.set(engine.i.valid, 0)

    async def sink(ctx):
        ctx.set(engine.o.ready, 1)
        while True:
            _, _, valid, payload, in_reset = await ctx.tick().sample(
                engine.o.valid, engine.o.payload, reset)
            if in_reset:
                current.clear()                 # what left before the reset is void
            elif valid:
                current.extend(int(payload.data).to_bytes(4 * lanes, "little")[
                    :bin(int(payload.keep)).count("1")])
                if payload.last:
                    frames.append(bytes(current))
                    current.clear()

    async def bench(ctx):
        for name, value in (before or {}).items():
            ctx.set(getattr(engine, name), value)
        await send(ctx, first, beats)
        ctx.set(reset, 1)
        await ctx.tick()
        ctx.set(reset, 0)
        for name, value in (after or {}).items():
            ctx.set(getattr(engine, name), value)
        await send(ctx, second, None)
        await ctx.tick().repeat(400)
        assert not current, "bytes after the last frame"

    sim.add_testbench(sink, background=True)
    sim.add_testbench(bench)
    sim.run()
    return frames


def test_rice_compressor_after_a_reset_in_flight():
    """A reset in the middle of a message (a block in the emitter, the next filling):
    the next message, with other settings, comes out as golden's and alone."""
    rng = np.random.default_rng(SEED + 3)
    first, second = _values(rng, 45), _values(rng, 21)
    frames = _frames_after_reset(NIC_ENGINES["rice_compressor"].component(lanes=1), 1,
                                 value_frame(first, 1), 25, value_frame(second, 1),
                                 before={"bound_bits": 9, "rounding": 1},
                                 after={"bound_bits": 12, "rounding": 0})
    assert frames == [rice.compress(second, 12)]


@pytest.mark.parametrize("lanes", [1, 4, 16])
def test_rice_loopback_at_every_lane_count(lanes):
    """The Rice round trip at the lane counts the settings test leaves out: messages of
    0, 1, a beat less one, a block, a block and a value and a hundred values (class-edge
    values, NaN and infinities among them), each at its own bound, rounding and seed, with
    stalls on both streams: every frame equals golden's round trip."""
    rng = np.random.default_rng(SEED + 11 * lanes)
    print(f"seed {SEED + 11 * lanes}")
    frames, want, settings = [], [], []
    for count in (0, 1, max(lanes - 1, 2), 16, 17, 100):
        x = _values(rng, count)
        setting = _random_setting("rice_loopback", rng, x)
        frame, out = _case("rice_loopback", lanes, x, setting)
        frames.append(frame)
        want.append(out)
        settings.append(setting)
    got, counters = run_frames(NIC_ENGINES["rice_loopback"].component(lanes=lanes), frames,
                               settings=settings, expected_frames=len(frames),
                               rng=random.Random(lanes), idle=0.2, backpressure=0.3)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"message {k} ({settings[k]}): {g.hex()} != {w.hex()}"
    assert counters["error_count"] == 0


def test_rice_loopback_after_a_reset_in_flight():
    """A reset while one message is in both engines (values out of the decompressor,
    codes in the compressor): the next message, at other settings, comes back as
    golden's round trip, alone."""
    rng = np.random.default_rng(SEED + 5)
    first, second = _values(rng, 70), _values(rng, 33)
    frames = _frames_after_reset(NIC_ENGINES["rice_loopback"].component(lanes=2), 2,
                                 value_frame(first, 2), 30, value_frame(second, 2),
                                 before={"bound_bits": 8, "rounding": 1, "seed": 5},
                                 after={"bound_bits": 13, "rounding": 0})
    assert frames == [value_frame(rice.decompress(rice.compress(second, 13)), 2)]


def _rice_messages(rng, lanes):
    """Byte strings a Rice decoder meets: good messages at random bounds and roundings
    (class-edge values, an all-zero block, a count of 0), cut at random bytes, random
    bytes after a good header, a parameter of 15, a value past the count, a reserved
    settings bit, a wrong CRC, bytes past the end, no whole header, a count too large;
    then a good message again."""
    good = []
    for count in (0, 1, 16, 37, 3 * max(16, lanes) + 5):
        x = _values(rng, count, 9)
        x[16:32] = 0
        good.append(rice.compress(x, int(rng.integers(7, 16)), rice.ROUNDINGS[count % 2],
                                  int(rng.integers(0, 1 << 32))))
    message = good[-1]
    one = rice.compress(_values(rng, 16), 10)[:-4]
    eight = rice.compress(np.ones(8, np.float32), 10)[:-4]
    bad = [message[:int(rng.integers(1, len(message)))] for _ in range(4)]
    bad += [message[:5] + rng.bytes(int(rng.integers(0, 40))) for _ in range(3)]
    bad += [rice.seal((32).to_bytes(4, "little") + one[4:] + b"\x1f"),
            rice.seal((7).to_bytes(4, "little") + eight[4:]),
            message[:4] + bytes([message[4] | 0x20]) + message[5:],
            message[:-2] + bytes([message[-2] ^ 1]) + message[-1:],
            message + b"\x00", message[:4], ((1 << 32) - 1).to_bytes(4, "little") + message[4:]]
    return good[:3] + bad[:6] + good[3:] + bad[6:] + good[2:3]     # a message to end on


@pytest.mark.parametrize("lanes", [1, 4, 8, 16])
def test_rice_decompressor_good_bad_and_cut_messages(lanes):
    """Every output frame and the error count are ``codnn.golden.rice.received_values``'s, with
    random idle input and backpressure, at every lane count."""
    rng = np.random.default_rng(SEED + lanes)
    print(f"seed={SEED + lanes}")
    messages = _rice_messages(rng, lanes)
    expected, bad = [], 0
    for message in messages:
        values, wrong = rice.received_values(message, max_values=1 << 24)
        bad += wrong
        if values is not None:
            expected.append(value_frame(values, lanes))
    got, counters = run_frames(NIC_ENGINES["rice_decompressor"].component(lanes=lanes), messages,
                               settings=[], expected_frames=len(expected),
                               rng=random.Random(SEED + lanes), idle=0.3, backpressure=0.3)
    assert got == expected
    assert counters["error_count"] == bad == 14


def test_rice_decompressor_takes_a_value_a_cycle():
    """Without stalls, 4,000 values of short codes take one cycle each, a cycle more per
    block for its header, and a few for the message's framing."""
    from codnn.sim.pysim import frame_beats, run_stream_test
    rng = np.random.default_rng(SEED)
    x = (rng.standard_normal(4000) * 2.0 ** -8).astype(np.float32)
    message = rice.compress(x, 10)
    dut = NIC_ENGINES["rice_decompressor"].component(lanes=1)
    out, cycles = run_stream_test(dut, frame_beats(message, 4), expected_count=4001,
                                  rng=random.Random(SEED))
    assert [int(beat.data) for beat in out] == [4000, *rice.decompress(message).view(np.uint32)]
    print(f"{cycles} cycles for 4,000 values in {len(message)} bytes")
    assert cycles <= 4000 + 250 + 20


def test_rice_decompressor_after_a_reset_in_flight():
    """A reset in the middle of a message's codes: the next message decodes alone."""
    rng = np.random.default_rng(SEED + 5)
    first = rice.compress(_values(rng, 300), 9, "stochastic", 5)
    second = rice.compress(_values(rng, 40), 14)
    frames = _frames_after_reset(NIC_ENGINES["rice_decompressor"].component(lanes=2), 2,
                                 first, 20, second)
    assert frames == [value_frame(rice.decompress(second), 2)]
