# amaranth: UnusedElaboratable=no
"""SkidOutput on Amaranth's simulator: every beat once and in order under backpressure,
one beat per cycle without it, also for a producer that registers its go-ahead from
``free_next``."""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.skid import SkidOutput
from codnn.sim.pysim import run_stream_test

SEED = 20261123


class _Passthrough(wiring.Component):
    """A producer that writes each input beat into a SkidOutput while it is free."""

    i: In(stream.Signature(8))
    o: Out(stream.Signature(8))

    def __init__(self, registered=False):
        self._registered = registered
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        skid = SkidOutput.driving(m, self.o)
        go = skid.free
        if self._registered:
            go = Signal(init=1)             # free at reset
            m.d.sync += go.eq(skid.free_next)
        m.d.comb += [self.i.ready.eq(go), skid.write.eq(self.i.valid & go),
                     skid.payload.eq(self.i.payload)]
        return m


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.5), (0.3, 0.3), (0.0, 0.9)])
def test_every_beat_once_in_order(idle, backpressure, registered):
    print(f"seed={SEED}")
    beats = [k % 256 for k in range(300)]
    out, _ = run_stream_test(_Passthrough(registered), beats, expected_count=len(beats),
                             rng=random.Random(SEED), idle=idle, backpressure=backpressure)
    assert [int(beat) for beat in out] == beats


@pytest.mark.parametrize("registered", [False, True])
def test_one_beat_per_cycle_without_backpressure(registered):
    beats = list(range(100))
    out, cycles = run_stream_test(_Passthrough(registered), beats, expected_count=len(beats),
                                  rng=random.Random(SEED))
    assert [int(beat) for beat in out] == beats
    assert cycles == len(beats) + 1          # one cycle in the output register
