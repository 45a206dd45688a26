"""Helpers for unit tests on Amaranth's built-in simulator: random-stall stream drivers.

``run_stream_test`` feeds beats into a component's input stream ``i`` with random idle cycles
and takes beats from its output stream ``o`` with random backpressure; ``run_frames`` does
the same with whole frames for a NIC engine, changing its settings right after each
frame's first beat; ``run_frame_path`` with Ethernet frames for the frame path. Both sides
obey the stream rules: valid is held with its payload until accepted.
"""

from amaranth.sim import Simulator

__all__ = ["run_stream_test", "frame_beats", "run_frames", "run_frame_path"]


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


def frame_beats(frame, width, rng=None):
    """The beats of one AXI4-Stream frame of ``width`` bytes per beat: full beats, the last
    keeping what is left (an empty frame is one beat keeping nothing). With ``rng``, the
    ``keep`` of every beat but the last is random: the engines take those beats whole."""
    beats = []
    for start in range(0, max(1, len(frame)), width):
        chunk = frame[start:start + width]
        last = start + width >= len(frame)
        keep = (1 << len(chunk)) - 1
        if rng is not None and not last:
            keep = rng.randrange(1 << width)
        beats.append({"data": int.from_bytes(chunk, "little"), "keep": keep, "last": last})
    return beats


def run_frames(dut, frames, *, settings, expected_frames, rng, idle=0.0, backpressure=0.0,
               keep_holes=False, max_cycles=200_000):
    """Stream ``frames`` (bytes) into a NIC engine's ``i`` and collect ``expected_frames``
    output frames from ``o``.

    ``settings`` holds one dict per frame of the engine's setting ports (e.g.
    ``{"bound_bits": 9}``): frame ``k``'s are driven before its first beat, and frame
    ``k + 1``'s from the cycle right after the edge that takes that beat, so an engine
    that samples them later than that edge uses the wrong ones.

    Returns
    -------
    (list of bytes, dict)
        The output frames (the kept bytes of their beats) and, 20 cycles after the last,
        the engine's ``error_count`` (and ``nonfinite`` where it has one).

    Raises
    ------
    AssertionError
        If the frames do not arrive within ``max_cycles``, or more arrive.
    """
    width = len(dut.i.payload.keep)
    out, counters = [], {}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    def apply(ctx, values):
        for name, value in values.items():
            ctx.set(getattr(dut, name), value)

    async def source(ctx):
        if settings:
            apply(ctx, settings[0])
        for k, frame in enumerate(frames):
            for j, beat in enumerate(frame_beats(frame, width, rng if keep_holes else None)):
                while rng.random() < idle:
                    await ctx.tick()
                ctx.set(dut.i.payload, beat)
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
                if j == 0 and k + 1 < len(settings):
                    apply(ctx, settings[k + 1])
                ctx.set(dut.i.valid, 0)

    async def sink(ctx):
        current, cycles, quiet_until = b"", 0, None
        while quiet_until is None or cycles < quiet_until:
            if len(out) == expected_frames and quiet_until is None:
                quiet_until = cycles + 20           # then no more frames may come
            if cycles >= max_cycles:
                raise AssertionError(f"no output after {max_cycles} cycles: {len(out)} of "
                                     f"{expected_frames} frames")
            ready = rng.random() >= backpressure
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycles += 1
            if ready and valid:
                kept = bin(int(payload.keep)).count("1")
                current += int(payload.data).to_bytes(width, "little")[:kept]
                if payload.last:
                    out.append(current)
                    current = b""
                    assert len(out) <= expected_frames, \
                        f"more than the {expected_frames} frames expected"
        for name in ("error_count", "nonfinite"):
            if hasattr(dut, name):
                counters[name] = ctx.get(getattr(dut, name))

    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return out, counters


def run_frame_path(dut, frames, *, bounds, expected_frames, rng, idle=0.0, backpressure=0.0,
                   hold=0, max_cycles=200_000):
    """Stream Ethernet frames (``(bytes, bad)`` each) through a ``codnn.hw.nic.FramePath``.

    ``expected_frames`` None: collect for ``max_cycles`` cycles, however many come.
    Frame ``k`` is sent with ``bound_bits`` = ``bounds[k]`` until its first beat is taken,
    then a random other value (out of range included) from the next cycle; ``bad`` sets
    ``user`` on its last beat. With ``hold``, the sink refuses every beat for that
    many cycles first.

    Returns
    -------
    dict
        ``frames``: the ``(bytes, user)`` out; ``counters``: ``passed``, ``changed``,
        ``dropped``, ``flagged`` 20 cycles after the last; ``waited``: whether the input
        ever waited; ``ends``: the cycle of each frame's last beat out.

    Raises
    ------
    AssertionError
        If the frames do not arrive within ``max_cycles``, or more arrive.
    """
    width = dut.width
    result = {"frames": [], "counters": {}, "waited": False, "ends": []}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def source(ctx):
        for (frame, bad), bound in zip(frames, bounds):
            beats = frame_beats(frame, width)
            for j, beat in enumerate(beats):
                while rng.random() < idle:
                    await ctx.tick()
                if j == 0:
                    ctx.set(dut.bound_bits, bound)
                ctx.set(dut.i.payload, {**beat, "user": bad and beat["last"]})
                ctx.set(dut.i.valid, 1)
                while True:                 # ready as it was at the edge
                    _, _, ready = await ctx.tick().sample(dut.i.ready)
                    if ready:
                        break
                    result["waited"] = True
                ctx.set(dut.i.valid, 0)
                ctx.set(dut.bound_bits, rng.choice([0, 6, 7, 12, 15]))

    async def sink(ctx):
        current, cycles, quiet_until = b"", 0, None
        out = result["frames"]
        while quiet_until is None or cycles < quiet_until:
            if len(out) == expected_frames and quiet_until is None:
                quiet_until = cycles + 20           # then no more frames may come
            if cycles >= max_cycles:
                if expected_frames is None:
                    break
                raise AssertionError(f"no output after {max_cycles} cycles: {len(out)} of "
                                     f"{expected_frames} frames")
            ready = cycles >= hold and rng.random() >= backpressure
            ctx.set(dut.o.ready, ready)
            _, _, valid, beat = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycles += 1
            if ready and valid:
                count = bin(beat.keep).count("1") if beat.last else width
                current += beat.data.to_bytes(width, "little")[:count]
                if beat.last:
                    out.append((current, bool(beat.user)))
                    result["ends"].append(cycles)
                    current = b""
                    assert expected_frames is None or len(out) <= expected_frames, \
                        f"more than the {expected_frames} frames expected"
        for name in ("passed", "changed", "dropped", "flagged"):
            result["counters"][name] = ctx.get(getattr(dut, name))

    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return result
