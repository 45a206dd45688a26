# amaranth: UnusedElaboratable=no
"""The training step's units reset while work is in flight (Amaranth's simulator): beats
stream in, a one-cycle reset lands while the pipeline holds some of them, then new beats
stream in; what comes out after the reset is exactly the new beats' golden results, in
order, and nothing of the old ones (BlockRound, BlockAccumulate, SgdUpdate)."""

import pytest
from amaranth.hdl import ResetInserter, Signal
from amaranth.sim import Simulator

from codnn.hw.bfp import BlockAccumulate, BlockRound, SgdUpdate
from codnn.sim import tb_block_accumulate, tb_block_round, tb_sgd_update

SEED = 20261207


def _units():
    return {
        "block_round": (BlockRound(g=16, m=8),
                        lambda seed, n: tb_block_round.stimulus(seed, n, 16, 8),
                        lambda beat: tb_block_round.expected(beat, 16),
                        lambda got: (int(got.e), [int(v) for v in got.mantissas],
                                     int(got.nonfinite))),
        "block_accumulate": (BlockAccumulate(g=16, m=8),
                             lambda seed, n: tb_block_accumulate.stimulus(seed, 16, 8, n),
                             tb_block_accumulate.sum_bits, int),
        "sgd_update": (SgdUpdate(), tb_sgd_update.stimulus, tb_sgd_update.expected,
                       lambda got: (int(got.w), int(got.v))),
    }


@pytest.mark.parametrize("name", ["block_round", "block_accumulate", "sgd_update"])
def test_a_reset_in_flight_drops_the_old_beats(name):
    print(f"seed={SEED}")
    unit, stimulus, expected, view = _units()[name]
    old, new = stimulus(SEED, 40)[:40], stimulus(SEED + 1, 60)[:60]
    reset = Signal()
    dut = ResetInserter({"sync": reset})(unit)
    after, sent = [], []

    async def source(ctx):
        ctx.set(unit.o.ready, 1)
        for beats, flag in ((old, "old"), (new, "new")):
            for beat in beats:
                ctx.set(unit.i.payload, beat)
                ctx.set(unit.i.valid, 1)
                await ctx.tick().until(unit.i.ready)
                sent.append(flag)
                if flag == "old" and len(sent) == unit.latency // 2 + 10:
                    break                                # some in flight, some out
            ctx.set(unit.i.valid, 0)
            if flag == "old":
                ctx.set(reset, 1)
                await ctx.tick()
                ctx.set(reset, 0)
        await ctx.tick().repeat(unit.latency + 10)

    async def sink(ctx):
        in_reset_seen = False
        async for clk_edge, _, valid, payload, in_reset in ctx.tick().sample(
                unit.o.valid, unit.o.payload, reset):
            if in_reset:
                in_reset_seen = True
            elif in_reset_seen and valid:
                after.append(view(payload))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_process(sink)
    sim.run()
    assert after == [expected(beat) for beat in new]
