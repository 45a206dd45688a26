# amaranth: UnusedElaboratable=no
"""SgdUpdate against section 11's golden update (``codnn.golden.bfp_training.sgd_update``),
bit for bit, with the cocotb testbench's stimulus (``codnn.sim.tb_sgd_update``: every
float32 class, the settings changed from one beat to the next), on Amaranth's simulator
under idle cycles and backpressure (one weight a cycle without)."""

import random

import pytest

from codnn.hw.bfp.sgd_update import SgdUpdate
from codnn.sim.pysim import run_stream_test
from codnn.sim.tb_sgd_update import expected, stimulus

SEED = 20261207


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.4)])
def test_updates_equal_golden(idle, backpressure):
    print(f"seed={SEED}")
    beats = stimulus(SEED, 2000)
    out, cycles = run_stream_test(SgdUpdate(), beats, expected_count=len(beats),
                                  rng=random.Random(SEED + 1), idle=idle,
                                  backpressure=backpressure)
    wrong = [(beat, hex(int(got.w)), hex(int(got.v)), [hex(x) for x in expected(beat)])
             for beat, got in zip(beats, out)
             if (int(got.w), int(got.v)) != expected(beat)]
    assert not wrong, f"{len(wrong)} wrong updates, first: {wrong[:3]}"
    finite = sum(expected(beat)[0] & 0x7F800000 != 0x7F800000 for beat in beats)
    assert finite > 1000
    if not idle and not backpressure:
        assert cycles == len(beats) + SgdUpdate.latency

