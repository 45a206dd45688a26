"""Helpers for unit tests on Amaranth's built-in simulator: random-stall stream drivers.

``run_stream_test`` feeds beats into a component's input stream ``i`` with random idle cycles
and takes beats from its output stream ``o`` with random backpressure. Both sides obey the
stream rules: valid is held with its payload until accepted.
"""

from amaranth.sim import Simulator

__all__ = ["run_stream_test"]


async def _drive(ctx, port, beats, rng, idle):
    for beat in beats:
        while rng.random() < idle:
            await ctx.tick()
        ctx.set(port.payload, beat)
        ctx.set(port.valid, 1)
        await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)


async def _collect(ctx, port, count, rng, backpressure, out, cycles, max_cycles):
    while len(out) < count:
        if cycles[0] >= max_cycles:
            raise AssertionError(f"no result after {max_cycles} cycles: got {len(out)} of "
                                 f"{count} beats")
        ready = rng.random() >= backpressure
        ctx.set(port.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(port.valid, port.payload)
        cycles[0] += 1
        if ready and valid:
            out.append(payload)
    ctx.set(port.ready, 0)


def run_stream_test(dut, beats, *, expected_count, rng, idle=0.0, backpressure=0.0,
                    max_cycles=100_000):
    """Stream ``beats`` into ``dut.i`` and collect ``expected_count`` beats from ``dut.o``.

    Returns
    -------
    (list, int)
        The collected payloads (Amaranth views/values as sampled) and the number of clock
        cycles the collector waited, from its first cycle to the last beat.

    Raises
    ------
    AssertionError
        If the output does not arrive within ``max_cycles``.
    """
    out, cycles = [], [0]
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def source(ctx):
        await _drive(ctx, dut.i, beats, rng, idle)

    async def sink(ctx):
        await _collect(ctx, dut.o, expected_count, rng, backpressure, out, cycles, max_cycles)

    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return out, cycles[0]
