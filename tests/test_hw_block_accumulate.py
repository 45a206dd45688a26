# amaranth: UnusedElaboratable=no
"""BlockAccumulate against section 11's golden
(``codnn.golden.bfp_training.block_term``, then NumPy's float32 addition), bit for bit,
with the cocotb testbench's stimulus (``codnn.sim.tb_block_accumulate``), on Amaranth's
simulator under idle cycles and backpressure (one pair a cycle without)."""

import random

import pytest

from codnn.hw.bfp.block_accumulate import BlockAccumulate
from codnn.sim.pysim import run_stream_test
from codnn.sim.tb_block_accumulate import stimulus, sum_bits, term_bits

SEED = 20261207
G = 16


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.4)])
def test_block_terms_equal_golden(idle, backpressure):
    """With ``psum = -0.0`` the sum is the term itself."""
    print(f"seed={SEED}")
    beats = [dict(beat, psum=0x80000000) for beat in stimulus(SEED, G, 8, 1200)]
    out, cycles = run_stream_test(BlockAccumulate(), beats, expected_count=len(beats),
                                  rng=random.Random(SEED + 1), idle=idle,
                                  backpressure=backpressure)
    wrong = [(b, hex(int(got)), hex(term_bits(b))) for b, got in zip(beats, out)
             if int(got) != term_bits(b)]
    assert not wrong, f"{len(wrong)} wrong terms, first: {wrong[:3]}"
    terms = [term_bits(b) & 0x7FFFFFFF for b in beats]
    subnormal = sum(0 < t < 1 << 23 for t in terms)
    assert subnormal > 20 and (0x7F800000 in terms) and len({t >> 23 for t in terms}) > 100
    if not idle and not backpressure:
        assert cycles == len(beats) + BlockAccumulate().latency


def test_block_accumulate_equals_golden():
    print(f"seed={SEED + 2}")
    beats = stimulus(SEED + 2, G, 8, 600)
    out, _ = run_stream_test(BlockAccumulate(), beats, expected_count=len(beats),
                             rng=random.Random(SEED + 3), idle=0.2, backpressure=0.2)
    for beat, got in zip(beats, out):
        assert int(got) == sum_bits(beat), (beat, hex(int(got)), hex(sum_bits(beat)))


def test_bad_parameters():
    with pytest.raises(ValueError, match="2..8"):
        BlockAccumulate(m=9)
    with pytest.raises(TypeError):
        BlockAccumulate(g=0)

