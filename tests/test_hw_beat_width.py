"""Beat width converters on Amaranth's simulator: frames of every length packed into wide
beats and taken apart again, with idle cycles and backpressure, keep and user intact."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from codnn.hw.nic.beat_width import Narrower, Widener
from codnn.sim.pysim import frame_beats, run_stream_test

SEED = 20261126


class _RoundTrip(wiring.Component):
    """``Widener(narrow, wide)`` into ``Narrower(wide, narrow)``."""

    def __init__(self, narrow, wide):
        self._narrow, self._wide = narrow, wide
        self.widener, self.narrower = Widener(narrow, wide), Narrower(wide, narrow)
        super().__init__({"i": wiring.In(self.widener.i.signature.flip()),
                          "o": wiring.Out(self.narrower.o.signature)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.widener, m.submodules.narrower = self.widener, self.narrower
        wiring.connect(m, wiring.flipped(self.i), self.widener.i)
        wiring.connect(m, self.widener.o, self.narrower.i)
        wiring.connect(m, self.narrower.o, wiring.flipped(self.o))
        return m


def _frames(rng, narrow):
    return [bytes(rng.randrange(256) for _ in range(narrow * rng.randrange(1, 12)
                                                   - rng.randrange(narrow)))
            for _ in range(30)]


def _collect(payloads, width):
    frames, current = [], b""
    for beat in payloads:
        kept = bin(int(beat.keep)).count("1") if beat.last else width
        current += int(beat.data).to_bytes(width, "little")[:kept]
        if beat.last:
            frames.append((current, int(beat.user)))
            current = b""
    return frames


@pytest.mark.parametrize("narrow, wide", [(1, 4), (2, 8), (4, 4)])
def test_widen_then_narrow_gives_the_frames_back(narrow, wide):
    rng = random.Random(SEED + wide)
    frames = _frames(rng, narrow)
    beats = []
    for number, frame in enumerate(frames):
        for beat in frame_beats(frame, narrow):
            beats.append({**beat, "user": number % 3 == 0})
    count = sum(-(-len(frame) // narrow) for frame in frames)
    out, _ = run_stream_test(_RoundTrip(narrow, wide), beats, expected_count=count, rng=rng,
                             idle=0.3, backpressure=0.3)
    assert _collect(out, narrow) == [(frame, int(k % 3 == 0)) for k, frame in enumerate(frames)]


def test_widener_packs_full_beats_and_a_partial_last():
    rng = random.Random(SEED)
    frame = bytes(range(10))
    beats = [{**beat, "user": 0} for beat in frame_beats(frame, 1)]
    out, _ = run_stream_test(Widener(1, 4), beats, expected_count=3, rng=rng)
    assert [(int(b.keep), int(b.last)) for b in out] == [(0xF, 0), (0xF, 0), (0x3, 1)]
    assert _collect(out, 4) == [(frame, 0)]
