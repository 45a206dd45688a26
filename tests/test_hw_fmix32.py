# amaranth: UnusedElaboratable=no
"""The streaming fmix32 unit on Amaranth's simulator, against codnn.golden.fmix32."""

import random

import numpy as np
import pytest

from codnn.golden.fmix32 import fmix32
from codnn.hw.common.fmix32 import Fmix32Unit
from codnn.sim.pysim import run_stream_test

SEED = 20261121


def _run(lanes, beats, idle, backpressure, seed=SEED):
    print(f"seed={seed}")
    values = np.random.default_rng(seed).integers(0, 2**32, size=(beats, lanes))
    values[0, 0], values[-1, -1] = 0xFFFF_FFFF, 0
    dut = Fmix32Unit(lanes=lanes)
    out, cycles = run_stream_test(dut, [[int(v) for v in row] for row in values],
                                  expected_count=beats, rng=random.Random(seed), idle=idle,
                                  backpressure=backpressure)
    got = np.array([[int(beat[lane]) for lane in range(lanes)] for beat in out])
    return values, got, cycles


@pytest.mark.parametrize("lanes", [1, 3])
def test_equals_golden_under_idle_and_backpressure(lanes):
    values, got, _ = _run(lanes, beats=60, idle=0.3, backpressure=0.4)
    expected = fmix32(values)
    mismatches = np.argwhere(got != expected)
    assert mismatches.size == 0, (f"beat/lane {mismatches[0]}: expected "
                                  f"{expected[tuple(mismatches[0])]:#x}, got "
                                  f"{got[tuple(mismatches[0])]:#x} (seed {SEED})")


def test_full_throughput_and_latency_without_stalls():
    beats = 40
    values, got, cycles = _run(2, beats=beats, idle=0.0, backpressure=0.0)
    assert np.array_equal(got, fmix32(values))
    # The collector starts with the first input beat: the last output arrives latency
    # cycles after the last input beat.
    assert cycles == beats + Fmix32Unit(lanes=1).latency


def test_properties():
    dut = Fmix32Unit(lanes=4)
    assert dut.lanes == 4
    assert len(dut.i.payload.as_value()) == 128


@pytest.mark.parametrize("lanes", [0, -1, 1.5, True, "2", None])
def test_lanes_must_be_a_positive_integer(lanes):
    with pytest.raises(TypeError, match=r"^Lane count must be a positive integer, not "):
        Fmix32Unit(lanes=lanes)
