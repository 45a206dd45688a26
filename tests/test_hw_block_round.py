# amaranth: UnusedElaboratable=no
"""BlockRound against ``codnn.golden.block_float.to_block_float``, bit for bit, with the
cocotb testbench's stimulus (``codnn.sim.tb_block_round``: values over float32's whole
range, every width, the rounding mode changed per beat, wrapping counters, non-finite
blocks flagged), on Amaranth's simulator under idle cycles and backpressure (one block a
cycle without)."""

import random

import pytest

from codnn.hw.bfp.block_round import BlockRound
from codnn.sim.pysim import run_stream_test
from codnn.sim.tb_block_round import expected, stimulus

SEED = 20261207


@pytest.mark.parametrize("g,m,idle,backpressure", [(16, 8, 0.0, 0.0), (16, 8, 0.3, 0.4),
                                                   (3, 5, 0.0, 0.0)])
def test_blocks_equal_golden(g, m, idle, backpressure):
    print(f"seed={SEED}")
    unit = BlockRound(g=g, m=m)
    beats = stimulus(SEED, 600, g, m)
    out, cycles = run_stream_test(unit, beats, expected_count=len(beats),
                                  rng=random.Random(SEED + 1), idle=idle,
                                  backpressure=backpressure)
    wrong = []
    for beat, got in zip(beats, out):
        result = (int(got.e), [int(v) for v in got.mantissas], int(got.nonfinite))
        if result != expected(beat, g):
            wrong.append((beat, result, expected(beat, g)))
    assert not wrong, f"{len(wrong)} wrong blocks, first: {wrong[:2]}"
    assert sum(expected(b, g)[2] for b in beats) > 30
    if not idle and not backpressure:
        assert cycles == len(beats) + unit.latency


def test_bad_parameters():
    with pytest.raises(ValueError, match="2..8"):
        BlockRound(m=12)
    with pytest.raises(TypeError):
        BlockRound(g=0)

