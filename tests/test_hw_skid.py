# amaranth: UnusedElaboratable=no
"""SkidOutput on Amaranth's simulator: every beat once and in order under backpressure,
one beat per cycle without it."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.skid import SkidOutput
from sim.pysim import run_stream_test

SEED = 20261123


class _Passthrough(wiring.Component):
    """A producer that writes each input beat into a SkidOutput while it is free."""

    i: In(stream.Signature(8))
    o: Out(stream.Signature(8))

    def elaborate(self, platform):
        m = Module()
        skid = SkidOutput(m, self.o)
        m.d.comb += [self.i.ready.eq(skid.free), skid.write.eq(self.i.valid & skid.free),
                     skid.payload.eq(self.i.payload)]
        return m


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.5), (0.3, 0.3), (0.0, 0.9)])
def test_every_beat_once_in_order(idle, backpressure):
    print(f"seed={SEED}")
    beats = [k % 256 for k in range(300)]
    out, _ = run_stream_test(_Passthrough(), beats, expected_count=len(beats),
                             rng=random.Random(SEED), idle=idle, backpressure=backpressure)
    assert [int(beat) for beat in out] == beats


def test_one_beat_per_cycle_without_backpressure():
    beats = list(range(100))
    out, cycles = run_stream_test(_Passthrough(), beats, expected_count=len(beats),
                                  rng=random.Random(SEED))
    assert [int(beat) for beat in out] == beats
    assert cycles == len(beats) + 1          # one cycle in the output register
