# amaranth: UnusedElaboratable=no
# (the parameter checks build frame paths that refuse their parameters)
"""The frame path on Amaranth's simulator: every width, both directions, each frame with
its own bound (changed the cycle after its first beat), an empty frame, full buffers,
and parameter checks. The fuzzed runs at 1 and 8 bytes are cocotb's
(tests/test_sim_nic.py)."""

import random

import numpy as np
import pytest

from codnn.golden.packets import compress_frame, frame_path
from codnn.hw.nic.frame_path import FramePath
from codnn.sim.frame_fuzz import gradient_frame
from codnn.sim.pysim import run_frame_path
from codnn.sim.stimulus import message_values

SEED = 20261126


def _run(dut, frames, bounds, *, idle=0.2, backpressure=0.2, hold=0):
    want, counts = _expected(frames, bounds, dut.direction, dut.max_frame)
    result = run_frame_path(dut, frames, bounds=bounds, expected_frames=len(want),
                            rng=random.Random(SEED), idle=idle, backpressure=backpressure,
                            hold=hold)
    assert result["frames"] == want and result["counters"] == counts
    return counts, result["waited"]


def _expected(frames, bounds, direction, max_frame):
    out, counts = [], {"passed": 0, "changed": 0, "dropped": 0, "flagged": 0}
    for frame, bound in zip(frames, bounds):
        sent, verdict = frame_path([frame], direction, bound, max_frame)
        out += sent
        for name in counts:
            counts[name] += verdict[name]
    return out, counts


def _frames(rng, direction):
    """Gradient frames (0 to 100 values, IPv4 options), a frame of another ToS, a flagged
    one, an empty one, and (decompressing) a corrupt message."""
    frames = []
    for count, words in ((0, 0), (1, 1), (9, 0), (37, 3), (100, 0)):
        frame = gradient_frame(rng, message_values(rng, count, 9), options_words=words)
        frames.append(compress_frame(frame, 9) if direction == "decompress" else frame)
    frames += [gradient_frame(rng, [1.0, 2.0], tos=0), b""]
    if direction == "decompress":
        frames.append(gradient_frame(rng, np.frombuffer(b"\x10\0\0\0\xff\0\0\0", "<f4")))
    return [(frame, False) for frame in frames] + [(frames[3], True)]


@pytest.mark.parametrize("direction", ["compress", "decompress"])
@pytest.mark.parametrize("width", [1, 2, 4])
def test_frames_equal_golden_at_every_width(direction, width):
    rng = np.random.default_rng(SEED + width)
    print(f"seed {SEED + width}")
    frames = _frames(rng, direction)
    bounds = [9] * len(frames)
    counts, _ = _run(FramePath(direction=direction, width=width), frames, bounds)
    assert counts["dropped"] == 1 + (direction == "decompress") and counts["changed"] >= 5


def test_each_frame_keeps_its_own_bound():
    """The bound is sampled with a frame's first beat: each frame its own, the port
    changed to another (out of range included) from the next cycle."""
    rng = np.random.default_rng(SEED)
    frames = [(gradient_frame(rng, message_values(rng, 30, 7)), False) for _ in range(6)]
    bounds = [7, 15, 10, 8, 12, 7]
    counts, _ = _run(FramePath(direction="compress", width=8), frames, bounds)
    assert counts == {"passed": 0, "changed": 6, "dropped": 0, "flagged": 0}


@pytest.mark.parametrize("direction", ["compress", "decompress"])
def test_full_buffers_hold_the_input_and_lose_nothing(direction):
    """The output refused for 1,500 cycles, then taken one cycle in three: the buffers
    fill, the input waits, the buffer pointers wrap many times, and every frame still
    comes out whole, in order (restored frames are longer than the frames in, so the
    receiver's buffer B fills first)."""
    rng = np.random.default_rng(SEED + 1)
    frames = []
    for n in rng.integers(5, 20, 40):
        frame = gradient_frame(rng, np.full(n, 1e-9, "<f4"))      # compress to 4 + 2 * n/8
        frames.append((compress_frame(frame) if direction == "decompress" else frame, False))
    dut = FramePath(direction=direction, width=8, max_frame=128)
    counts, waited = _run(dut, frames, [10] * len(frames), idle=0, backpressure=2 / 3,
                          hold=1500)
    assert waited and dut.buffer_bytes == 256 and counts["changed"] == 40


def test_drop_when_full_never_waits_and_counts_every_frame():
    """A receiver that cannot wait: the input is never refused; with the output refused
    for 1,500 cycles, frames that find no room are dropped whole and counted, and every
    frame that leaves is golden's, in order."""
    rng = np.random.default_rng(SEED + 2)
    frames = [(gradient_frame(rng, message_values(rng, int(n), 10)), False)
              for n in rng.integers(5, 20, 30)]
    want, _ = _expected(frames, [10] * len(frames), "compress", 128)
    dut = FramePath(direction="compress", width=8, max_frame=128, drop_when_full=True)
    result = run_frame_path(dut, frames, bounds=[10] * len(frames), expected_frames=None,
                            rng=random.Random(SEED), hold=1500, max_cycles=4000)
    got, counters = result["frames"], result["counters"]
    assert not result["waited"] and counters["dropped"] > 0
    assert counters["changed"] == len(got) and len(got) + counters["dropped"] == len(frames)
    sent = iter(want)
    assert all(frame in sent for frame in got)      # a subsequence of golden's, in order


@pytest.mark.parametrize("kwargs, message", [
    ({"direction": "up"}, "Direction must be one of compress, decompress, not 'up'"),
    ({"width": 16}, "Frame width must be one of 1, 2, 4, 8 bytes, not 16"),
    ({"width": True}, "Frame width must be one of"),
    ({"max_frame": 63}, "Largest frame must be 64..16384 bytes, not 63"),
    ({"max_frame": 20000}, "Largest frame must be 64..16384 bytes"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FramePath(**kwargs)
