"""The clock-crossing FIFO on Amaranth's simulator: values written at one clock come out at
another, in order, none lost or repeated, with random valid and ready on both sides, the
read clock faster and slower than the write clock; a full FIFO refuses, an empty one
offers nothing."""

import random

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from codnn.hw.common.async_fifo import RegisteredAsyncFIFO

SEED = 20261126


def _run(write_ns, read_ns, *, count=300, hold_reads=0, seed=SEED):
    fifo = RegisteredAsyncFIFO(16, depth=8, w_domain="write", r_domain="read")
    m = Module()
    m.domains += [ClockDomain("write"), ClockDomain("read")]
    m.submodules.fifo = fifo
    sim = Simulator(m)
    sim.add_clock(write_ns * 1e-9, domain="write")
    sim.add_clock(read_ns * 1e-9, domain="read")
    rng = random.Random(seed)
    values = [rng.randrange(1 << 16) for _ in range(count)]
    got, refused = [], [0]

    async def writer(ctx):
        for value in values:
            while rng.random() < 0.3:
                await ctx.tick("write")
            ctx.set(fifo.i.payload, value)
            ctx.set(fifo.i.valid, 1)
            while True:                     # ready as it was at the edge
                _, _, ready = await ctx.tick("write").sample(fifo.i.ready)
                if ready:
                    break
                refused[0] += 1
            ctx.set(fifo.i.valid, 0)

    async def reader(ctx):
        for _ in range(hold_reads):
            await ctx.tick("read")
        while len(got) < count:
            ready = rng.random() < 0.7
            ctx.set(fifo.o.ready, ready)
            _, _, valid, payload = await ctx.tick("read").sample(fifo.o.valid, fifo.o.payload)
            if ready and valid:
                got.append(payload)
        ctx.set(fifo.o.ready, 0)
        for _ in range(40):             # nothing more comes out
            _, _, valid = await ctx.tick("read").sample(fifo.o.valid)
            assert not valid

    sim.add_testbench(writer, background=True)
    sim.add_testbench(reader)
    sim.run()
    return values, got, refused[0]


@pytest.mark.parametrize("write_ns, read_ns", [(7, 11), (11, 3), (8, 8)])
def test_values_cross_in_order(write_ns, read_ns):
    values, got, _ = _run(write_ns, read_ns)
    assert got == values


def test_full_fifo_refuses_the_writer():
    values, got, refused = _run(3, 5, count=60, hold_reads=200)
    assert got == values and refused > 100
