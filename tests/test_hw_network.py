# amaranth: UnusedElaboratable=no
"""The network engine's units on Amaranth's simulator against codnn.golden.network_program; whole
engines too, the bit-serial ones (eight times the cycles) on Verilator through
sim/tb_network_engine.py."""

import dataclasses
import random

import numpy as np
import pytest
from amaranth.hdl import Module, unsigned
from amaranth.lib import memory, wiring
from amaranth.sim import Simulator

from codnn.golden.column_combining import output_shape, padding_sides
from codnn.golden.network import Add, pool, residual_add
from codnn.golden.network_program import (ADD_PRODUCT_STEPS, FETCH_CYCLES, GATHER_START,
                                          HEADER_CYCLES, NO_LANE, EngineConfig, LoadStep,
                                          ProgramError,
                                          Region, bias_bytes, bursts, decode_program,
                                          GatherTable, encode_program, gather_entries,
                                          gather_values,
                                          pool_unit_cycles,
                                          host_words, image_word, output_values,
                                          read_region, run_program, step_cycles,
                                          table_bytes,
                                          write_region)
from codnn.golden.program_format import HEADER_WORDS, STEP_WORDS
from codnn.hw.network import Gather, NetworkEngine, PostOp, PostProcess, ResultWriter
from codnn.hw.network.activations import AxiActivations
from codnn.hw.network.weights import AxiWeights
from codnn.golden.network_program import PREFETCH_BURST, PREFETCH_BURSTS
from codnn.model.compile import compile_network
from codnn.model.engine_rtl import run_on_engine
from codnn.golden.workloads import (bottleneck_network, concat_network, pooled_network,
                                    projection_network, residual_network)

SEED = 20261128


def _gather_run(dut, act, geometry, table, rng, backpressure, before=None):
    """Write ``act`` (words x lanes) through ``dut.write``, start a pass with ``geometry``
    and ``table`` (a ``GatherTable``), collect its beats as ``(T, cols, alpha)``; also the
    cycles from start to the first beat and to the last. ``before``: the geometry of a
    pass run first (its beats not kept)."""
    got, times = [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for addr, word in enumerate(act):
            ctx.set(dut.write, {"addr": addr, "en": 1, "data": sum(
                int(v) << (8 * k) for k, v in enumerate(word))})
            await ctx.tick()
        ctx.set(dut.write.en, 0)
        for run in ([before] if before else []) + [geometry]:
            got.clear()
            times.clear()
            await _gather_pass(ctx, dut, run, table, rng, backpressure, got, times)

    sim.add_testbench(bench)
    sim.run()
    return np.array(got), times


def _table_writes(dut, table):
    """A ``GatherTable``'s writes through ``dut.table_write``, a word each."""
    image = table_bytes(table, EngineConfig(rows=dut.lanes, cols=dut.cols, alpha=dut.alpha))
    size = 2 * dut.cols
    return [{"addr": addr, "en": 1, "data": int.from_bytes(
        image[addr * size:(addr + 1) * size], "little")} for addr in range(len(image) // size)]


async def _write_table(ctx, dut, table):
    """Write ``table`` through ``dut.table_write``, a word a cycle."""
    for write in _table_writes(dut, table):
        ctx.set(dut.table_write, write)
        await ctx.tick()
    ctx.set(dut.table_write.en, 0)


async def _gather_pass(ctx, dut, geometry, table, rng, backpressure, got, times):
    """One pass of ``geometry`` on a running simulation; its beats and times go to
    ``got`` and ``times``."""
    positions = geometry["out_height"] * geometry["out_width"] * geometry["images"]
    ctx.set(dut.geometry, geometry)
    await _write_table(ctx, dut, table)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)
    await ctx.tick()
    # Settings change once the documented edge has sampled them: the geometry, and the
    # next pass's table (the other half of the table memories) as this one runs.
    ctx.set(dut.geometry, {**geometry, "src": 0, "stride": 3})
    writes = _table_writes(dut, GatherTable(*(np.ones_like(v)
                                              for v in dataclasses.astuple(table))))
    cycle = 1
    while len(got) < positions:
        ctx.set(dut.table_write, writes.pop(0) if writes else {"en": 0})
        ready = rng.random() >= backpressure
        ctx.set(dut.o.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
        cycle += 1
        assert cycle < 100 * positions * dut.rounds + 100, "the gather stalled"
        if valid and ready:
            got.append([[int(payload[g][a]) for a in range(dut.alpha)]
                        for g in range(dut.cols)])
            times.append(cycle)
    ctx.set(dut.o.ready, 1)
    for _ in range(4):
        await ctx.tick()
        assert not ctx.get(dut.o.valid) and not ctx.get(dut.busy)


@pytest.mark.parametrize("cols,alpha,lanes,ports,kernel,stride,padding,channels", [
    (3, 4, 4, 2, 3, 1, 1, 6),         # a padded 3 x 3 convolution over two lane blocks
    (2, 3, 1, 2, 2, 2, 0, 2),         # one lane, alpha not a multiple of the ports
    (4, 1, 8, 1, 1, 1, 0, 5),         # 1 x 1, alpha 1, one port
    (2, 5, 4, 2, 5, 2, 2, 3),         # LeNet-like 5 x 5, stride 2, padding 2
    (3, 8, 4, 3, 4, 1, 2, 4),         # three ports a bank, alpha 8
    (3, 2, 4, 2, 0, 1, 0, 7),         # a dense layer over a flattened 7 x 3 x 2 map
    (2, 4, 6, 2, 3, 2, (2, 0, 1, 3), 9),    # each side its own padding, six lanes
])
def test_gather_equals_golden(cols, alpha, lanes, ports, kernel, stride, padding, channels):
    rng = np.random.default_rng(SEED + kernel)
    pace = random.Random(SEED)
    print(f"seed={SEED + kernel}")
    h, w = (7, 6) if kernel else (3, 2)
    blocks = -(-channels // lanes)
    images = 1 if kernel == 2 else 2         # a pass over one image, or over two
    depth = 8 + images * blocks * h * w + 5
    src = 8
    act = rng.integers(0, 256, (depth, lanes))
    # Each bank reads a random input's word in each slot; each column's stream takes a
    # random bank, or none.
    columns = channels * kernel * kernel if kernel else channels * h * w
    picks = rng.integers(0, columns, (alpha, lanes))
    offset, _, kyx = gather_entries(columns, (channels, h, w), kernel, lanes)[picks] \
        .transpose(2, 0, 1)
    lane = np.where(rng.random((alpha, cols)) < 0.2, NO_LANE,
                    rng.integers(0, lanes, (alpha, cols)))
    table = GatherTable(offset, kyx >> 4, kyx & 15, lane)
    out = output_shape(h, w, kernel, stride, padding) if kernel else (1, 1)
    (top, _), (left, _) = padding_sides(padding)
    rounds = -(-alpha // ports)
    geometry = {"src": src, "height": h, "width": w, "out_height": out[0],
                "out_width": out[1], "stride": stride if kernel else 1,
                "padding_top": top, "padding_left": left, "pad": 37 * kernel,
                "rounds": rounds, "images": images, "image_words": blocks * h * w}
    dut = Gather(cols=cols, alpha=alpha, lanes=lanes, depth=depth, ports=ports)

    def golden(slots):
        # Image after image, each ``blocks * h * w`` words past the one before; padding
        # carries 0 or not.
        return np.concatenate([
            gather_values(act, src + m * blocks * h * w, (channels, h, w), kernel, stride,
                          padding, table, 37 * kernel, slots) for m in range(images)])
    want = golden(alpha)
    got, times = _gather_run(dut, act, geometry, table, pace, 0.3)
    assert got.shape == want.shape and np.array_equal(got, want), (
        f"first difference at {np.argwhere(got != want)[0]} (seed {SEED + kernel})")
    steady = _gather_run(dut, act, geometry, table, pace, 0.0)[1]
    assert steady[0] == rounds + GATHER_START
    assert [b - a for a, b in zip(steady, steady[1:])] == [rounds] * (len(steady) - 1)
    if rounds > 1:
        # A layer given one round, after a pass of all: the streams past the ports are
        # not read and carry 0 (not the last pass's values), a beat a cycle.
        want = golden(ports)
        got, times = _gather_run(dut, act, {**geometry, "rounds": 1}, table, pace, 0.0,
                                 before=geometry)
        assert np.array_equal(got, want)
        assert [b - a for a, b in zip(times, times[1:])] == [1] * (len(times) - 1)


def _inside_reads(geometry, table, ports):
    """Per read cycle of a pass (image, position, round), the words its bank reads inside
    the map name, less the pass's ``src``."""
    g = geometry
    cycles = []
    for m in range(g["images"]):
        for oy in range(g["out_height"]):
            for ox in range(g["out_width"]):
                wy, wx = oy * g["stride"] - g["padding_top"], ox * g["stride"] - g["padding_left"]
                base = m * g["image_words"] + wy * g["width"] + wx
                for r in range(g["rounds"]):
                    slots = [min(r * ports + p, table.offset.shape[0] - 1) for p in range(ports)]
                    cycles.append([
                        base + int(table.offset[a, i]) for a in slots
                        for i in range(table.offset.shape[1])
                        if 0 <= wy + table.ky[a, i] < g["height"]
                        and 0 <= wx + table.kx[a, i] < g["width"]])
    return cycles


@pytest.mark.parametrize("trial", range(6))
def test_gather_faults_exactly_on_reads_outside_the_buffer(trial):
    # Tables whose ky, kx and offset disagree (a malformed program's), the buffer's start
    # and limit placed so that the pass's lowest read names word -1 (even trials) or its
    # highest the limit (odd trials): each read cycle with a read inside the map below
    # word 0, or at the limit or past it, is one cycle of ``fault``, and no other.
    rng = np.random.default_rng(SEED + trial)
    print(f"seed={SEED + trial}")
    lanes, alpha, ports, depth = 3, 4, 2, 256
    h, w = int(rng.integers(2, 9)), int(rng.integers(2, 9))
    kernel, stride = int(rng.integers(2, 5)), int(rng.integers(1, 3))
    padding = int(rng.integers(1, kernel))
    out = output_shape(h, w, kernel, stride, padding)
    table = GatherTable(rng.integers(0, 2 * h * w, (alpha, lanes)),
                        rng.integers(0, 16, (alpha, lanes)), rng.integers(0, 16, (alpha, lanes)),
                        rng.integers(0, lanes, (alpha, lanes)))
    # Entry (0, 0) reads the map's first word from the first window: named -padding *
    # (w + 1) + offset, below 0 with offset 0 (so every pass has reads inside the map).
    table.offset[0, 0], table.ky[0, 0], table.kx[0, 0] = 0, padding, padding
    geometry = {"src": 0, "height": h, "width": w, "out_height": out[0], "out_width": out[1],
                "stride": stride, "padding_top": padding, "padding_left": padding, "pad": 0,
                "rounds": 2, "images": 2, "image_words": h * w}
    cycles = _inside_reads(geometry, table, ports)
    named = [n for reads in cycles for n in reads]
    if trial % 2 == 0:                  # the lowest read names word -1
        src, limit = -1 - min(named), depth
    else:                               # the lowest word 0, the highest the limit
        src = -min(named)
        limit = src + max(named)
    geometry["src"] = src
    want = sum(any(not 0 <= src + n < limit for n in reads) for reads in cycles)
    dut = Gather(cols=lanes, alpha=alpha, lanes=lanes, depth=depth, ports=ports)
    faults = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(dut.limit, limit)
        await _gather_pass(ctx, dut, geometry, table, random.Random(SEED), 0.0, [], [])

    async def watch(ctx):
        async for _, _, fault in ctx.tick().sample(dut.fault):
            faults.append(fault)
    sim.add_testbench(bench)
    sim.add_process(watch)
    sim.run_until(1e-8 * 4000)
    assert want > 0 and faults.count(1) == want, (faults.count(1), want)


@pytest.mark.parametrize("cols,alpha,lanes", [(3, 3, 4), (1, 2, 2), (4, 5, 3)])
def test_gather_flags_tables_with_a_lane_past_the_banks(cols, alpha, lanes):
    # Tables of valid lanes and NO_LANE, one of them with a lane at ``lanes`` or past it in
    # a random slot and column (odd column counts split entries across words): bad_table
    # is high from the start of that table's pass to the next start, and only then.
    rng = np.random.default_rng(SEED + cols)
    print(f"seed={SEED + cols}")
    dut = Gather(cols=cols, alpha=alpha, lanes=lanes, depth=16)
    plans = []
    for trial in range(8):
        lane = rng.choice(list(range(lanes)) + [NO_LANE], (alpha, cols))
        if trial % 2:           # the first lane past the banks, or another
            lane[rng.integers(alpha), rng.integers(cols)] = \
                lanes if trial % 4 == 1 else rng.integers(lanes + 1, NO_LANE)
        plans.append((trial % 2 == 1, GatherTable(*(rng.integers(0, 16, (alpha, lanes))
                                                    for _ in range(3)), lane)))
    seen = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        geometry = {"src": 0, "height": 1, "width": 1, "out_height": 1, "out_width": 1,
                    "stride": 1, "padding_top": 0, "padding_left": 0, "pad": 0, "rounds": 1,
                    "images": 1, "image_words": 1}
        ctx.set(dut.geometry, geometry)
        ctx.set(dut.o.ready, 1)
        for bad, table in plans:
            await _write_table(ctx, dut, table)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            flags = []
            for _ in range(12):
                flags.append(ctx.get(dut.bad_table))
                await ctx.tick()
            seen.append((bad, flags))
    sim.add_testbench(bench)
    sim.run()
    for bad, flags in seen:
        assert flags == [int(bad)] * len(flags), (bad, flags)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"depth": 1 << 17}, ValueError, "at most 65536 words"),
    ({"lanes": 255}, ValueError, "Lane count must be below 255"),
    ({"ports": 0}, TypeError, "Port count must be a positive integer"),
])
def test_gather_parameters(kwargs, error, message):
    with pytest.raises(error, match=message):
        Gather(**{"cols": 2, "alpha": 2, "lanes": 4, "depth": 64, **kwargs})


def _packed(words, bits):
    """Rows of lanes (two's complement for negative values) as integers."""
    mask = (1 << bits) - 1
    return [sum((int(v) & mask) << (bits * k) for k, v in enumerate(word)) for word in words]


class _BufferHarness(wiring.Component):
    """A ``PostProcess`` on a buffer of its size (two read ports, not transparent, and its
    write port)."""

    def __init__(self, dut, init):
        self.dut, self.buffer = dut, memory.Memory(
            shape=unsigned(dut.lanes * 8), depth=dut.depth, init=init)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut, m.submodules.buffer = self.dut, self.buffer
        write = self.buffer.write_port()
        m.d.comb += [write.addr.eq(self.dut.write.addr), write.data.eq(self.dut.write.data),
                     write.en.eq(self.dut.write.en)]
        for k in range(2):
            read = self.buffer.read_port(transparent_for=())
            m.d.comb += [read.addr.eq(self.dut.read[k]), self.dut.read_data[k].eq(read.data)]
        return m


def _post_run(lanes, words, step):
    """Run one post-processing ``step`` over a buffer holding ``words`` (depth x lanes);
    return the buffer after it and the cycles ``busy`` stayed high."""
    dut = PostProcess(lanes=lanes, depth=len(words))
    harness = _BufferHarness(dut, _packed(words, 8))
    result, cycles = [], [0]
    sim = Simulator(harness)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(dut.step, step)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.step, {**step, "src": 1, "kernel_w": 1})    # sampled already
        while ctx.get(dut.busy):
            await ctx.tick()
            cycles[0] += 1
            assert cycles[0] < 100_000, "the unit never finished"
        for addr in range(len(words)):
            value = ctx.get(harness.buffer.data[addr])
            result.append([(value >> (8 * k)) & 0xFF for k in range(lanes)])

    sim.add_testbench(bench)
    sim.run()
    return np.array(result), cycles[0]


@pytest.mark.parametrize("kind,kernel,stride,padding,count_pad,lanes", [
    ("max", 2, 2, 0, False, 4), ("max", 3, 2, 1, False, 3), ("avg", 3, 1, 1, False, 4),
    ("avg", 3, 1, 1, True, 2), ("avg", 2, 2, 0, False, 1), ("avg", 0, 1, 0, False, 4),
    ("max", 3, 2, (2, 0, 1, 2), False, 6), ("avg", 3, 2, (0, 2, 2, 1), False, 2),
])
def test_pooling_equals_golden(kind, kernel, stride, padding, count_pad, lanes):
    rng = np.random.default_rng(SEED + kernel)
    print(f"seed={SEED + kernel}")
    c, h, w = 6, 7, 6
    x = rng.integers(0, 256, (c, h, w))
    x[0] = 255                                   # the largest sums and quotients
    src, dst = Region("act", 3, (c, h, w)), None
    want = pool(x[None], kind, kernel, stride, padding, count_pad, integer=True)[0]
    dst = Region("act", src.addr + src.words(lanes) + 2, want.shape)
    words = np.zeros((dst.addr + dst.words(lanes) + 3, lanes), np.int64)
    write_region(words, src, x, lanes)
    kh, kw = (kernel, kernel) if kernel else (h, w)
    step = {"op": PostOp.AVG_POOL if kind == "avg" else PostOp.MAX_POOL,
            "count_pad": count_pad, "src": src.addr, "dst": dst.addr,
            "blocks": -(-c // lanes), "height": h, "width": w, "out_height": want.shape[1],
            "out_width": want.shape[2], "kernel_h": kh, "kernel_w": kw,
            "stride": stride if kernel else 1, "padding_top": padding_sides(padding)[0][0],
            "padding_left": padding_sides(padding)[1][0]}
    after, cycles = _post_run(lanes, words, step)
    got = read_region(after, dst, lanes)
    assert np.array_equal(got, want), f"first difference at {np.argwhere(got != want)[0]}"
    outside = np.ones(len(words), bool)
    outside[dst.addr:dst.addr + dst.words(lanes)] = False
    assert np.array_equal(after[outside], words[outside])       # nothing else written
    assert cycles == pool_unit_cycles(kind, kh, kw, dst.words(lanes), 8)


@pytest.mark.parametrize("in_place,signs,lanes", [
    (False, (False, False, False), 4), (True, (False, False, False), 4),
    (False, (True, False, True), 4), (True, (True, True, True), 6),
    (False, (False, True, False), 1)])
def test_residual_add_equals_golden(in_place, signs, lanes):
    # Signed operands and results in offset binary (a linear bottleneck's add), both
    # clamps of each kind of result reached.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    shape = (5, 3, 4)
    a, b = rng.integers(0, 256, shape), rng.integers(0, 256, shape)
    a.flat[:2], b.flat[:2] = [0, 255], [0, 255]
    ma, mb = 70_000, 23_456                      # the first saturates, the second rounds
    ra = Region("act", 2, shape)
    rb = Region("act", ra.addr + ra.words(lanes), shape)
    out = rb if in_place else Region("act", rb.addr + rb.words(lanes) + 1, shape)
    words = np.zeros((out.addr + out.words(lanes) + 2, lanes), np.int64)
    write_region(words, ra, a, lanes)
    write_region(words, rb, b, lanes)
    flags = dict(zip(("a_signed", "b_signed", "out_signed"), signs))
    step = {"op": PostOp.ADD, "src": ra.addr, "src_b": rb.addr, "dst": out.addr,
            "words": ra.words(lanes), "ma": ma, "mb": mb, **flags}
    after, cycles = _post_run(lanes, words, step)
    want = residual_add(a, b, Add("add", "a", "b", "y", ma, mb, *signs), 8)
    assert np.array_equal(read_region(after, out, lanes), want)
    assert want.min() == 0 and want.max() == 255
    assert np.array_equal(read_region(after, ra, lanes), a)
    assert cycles == ra.words(lanes) + 3 + ADD_PRODUCT_STEPS


class _WriterHarness(wiring.Component):
    """A ``ResultWriter`` with an activation and an accumulator buffer (a read port each
    for the fused add's operand, not transparent; the activations' write port)."""

    def __init__(self, dut, rows, act_init, acc_init):
        self.dut = dut
        self.act = memory.Memory(shape=unsigned(rows * 8), depth=len(act_init), init=act_init)
        self.acc = memory.Memory(shape=unsigned(rows * 32), depth=len(acc_init), init=acc_init)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut, m.submodules.act, m.submodules.acc = self.dut, self.act, self.acc
        write = self.act.write_port()
        m.d.comb += [write.addr.eq(self.dut.act_write.addr),
                     write.data.eq(self.dut.act_write.data), write.en.eq(self.dut.act_write.en)]
        for buffer, data in ((self.act, self.dut.side_data), (self.acc, self.dut.acc_side_data)):
            read = buffer.read_port(transparent_for=())
            m.d.comb += [read.addr.eq(self.dut.side), data.eq(read.data)]
        return m


@pytest.mark.parametrize("b_acc,lanes,ma,mb,signed,in_place", [
    (False, 4, 300, 40_000, False, False), (False, 3, 2 ** 24 - 1, 250, True, True),
    (True, 4, 2 ** 24 - 1, 2 ** 24 - 1, False, False), (True, 2, 120, 65_000, True, False),
    (False, 1, 65_000, 2 ** 24 - 1, False, True), (True, 6, 77, 2 ** 24 - 1, True, False)])
def test_fused_add_in_the_result_writer_equals_golden(b_acc, lanes, ma, mb, signed, in_place):
    # The result writer's fused add on its own: results of 32-bit accumulators (their
    # extremes included) times a multiplier (up to the largest) plus the operand at the
    # same place (activations, offset binary with ``signed``, or accumulators), clamped,
    # written over the operand (``in_place``) or beside it, the results offered at
    # random; both clamps reached; nothing else written.
    seed = SEED + lanes + 10 * b_acc
    rng = np.random.default_rng(seed)
    print(f"seed={seed}")
    shape = (5, 2, 3)
    b_region = Region("acc" if b_acc else "act", 3, shape)
    dst = b_region if in_place and not b_acc else Region("act", 40, shape)
    words = b_region.words(lanes)
    reach = 2 ** 25 // ma + 1                      # products of about -512..512 after >> 16
    a = rng.integers(-reach, reach, shape)
    a.flat[:4] = [-2 ** 31, 2 ** 31 - 1, 0, -1]
    b = rng.integers(-(2 ** 25 // mb + 1), 2 ** 25 // mb + 1, shape) if b_acc else \
        rng.integers(0, 256, shape)
    if b_acc:
        b.flat[4:6] = [-2 ** 31, 2 ** 31 - 1]
    act = np.zeros((96, lanes), np.int64)
    acc = np.zeros((48, lanes), np.int64)
    write_region(acc if b_acc else act, b_region, b, lanes)
    before = act.copy()
    signs = (False, signed and not b_acc, signed)
    dut = ResultWriter(rows=lanes, acc_bits=32, out_bits=8, act_depth=len(act),
                       acc_depth=len(acc), psum_depth=4)
    harness = _WriterHarness(dut, lanes, _packed(act, 8), _packed(acc, 32))
    results = np.zeros((words, lanes), np.int64)
    write_region(results, Region("act", 0, shape), a, lanes)
    sim = Simulator(harness)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for name, value in (("base", dst.addr), ("stride", 0), ("positions", words),
                            ("total", words), ("add", 1), ("b_acc", b_acc),
                            ("signed_b", signs[1]), ("signed_out", signs[2]), ("ma", ma),
                            ("mb", mb), ("add_offset", (b_region.addr - dst.addr) % 2 ** 32),
                            ("map_width", 1), ("out_height", 1), ("out_width", 1)):
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.launch, 1)
        await ctx.tick()
        ctx.set(dut.launch, 0)
        sent = 0
        while sent < words:
            offer = bool(rng.integers(0, 3))
            ctx.set(dut.result.valid, offer)
            ctx.set(dut.result.payload.acc, [int(v) for v in results[sent]])
            taken = offer and ctx.get(dut.result.ready)
            await ctx.tick()
            sent += taken
        ctx.set(dut.result.valid, 0)
        waited = 0
        while not ctx.get(dut.idle):
            await ctx.tick()
            waited += 1
            assert waited < 100
        for addr in range(len(act)):
            value = ctx.get(harness.act.data[addr])
            act[addr] = [(value >> (8 * k)) & 0xFF for k in range(lanes)]

    sim.add_testbench(bench)
    sim.run()
    want = residual_add(a, b, Add("add", "a", "b", "y", ma, mb, *signs), 8)
    assert np.array_equal(read_region(act, dst, lanes), want)
    assert want.min() == 0 and want.max() == 255          # both clamps reached
    outside = np.ones(len(act), bool)
    outside[dst.addr:dst.addr + words] = False
    assert np.array_equal(act[outside], before[outside])


def _engine_runs(dut, program, image, images, *, loaded_program=None, act_base=0):
    """Load ``program`` (or the binary ``loaded_program``) and ``image`` into ``dut``, run
    each of ``images``; return ``(output, cycles, error)`` of each run. ``act_base``: the
    external activation memory's base, on an engine with one (no memory answers)."""
    runs = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def write(ctx, port, words):
        for addr, word in words:
            ctx.set(port, {"addr": addr, "data": word, "en": 1})
            await ctx.tick()
        ctx.set(port.en, 0)

    async def bench(ctx):
        program_words, weights, _ = host_words(program, image, images[0])
        if loaded_program is not None:
            program_words = list(enumerate(np.frombuffer(loaded_program, "<u4").tolist()))
        await write(ctx, dut.program_write, program_words)
        await write(ctx, dut.weight_write, weights)
        if dut.params["act_port"] == "axi":
            ctx.set(dut.act_base, act_base)
        out = program.output
        for x in images:
            await write(ctx, dut.act_write, host_words(program, image, x)[2])
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            waited = 0
            while ctx.get(dut.busy):
                await ctx.tick()
                waited += 1
                assert waited < 200_000, "the engine never finished"
            port, data = ((dut.acc_read, dut.acc_read_data) if out.memory == "acc"
                          else (dut.act_read, dut.act_read_data))
            words = []
            for addr in range(out.addr, out.addr + out.words(program.engine.rows)):
                ctx.set(port, addr)
                await ctx.tick()
                words.append(ctx.get(data))
            runs.append((output_values(program, words), ctx.get(dut.cycles),
                         ctx.get(dut.error)))

    sim.add_testbench(bench)
    sim.run()
    return runs


@pytest.mark.parametrize("rows,cols,alpha,mac,packing,ports,layer_rounds", [
    pytest.param(4, 2, 8, "parallel", 4, 2, {1, 2}, marks=pytest.mark.long),
    pytest.param(3, 5, 4, "bitserial", 2, 2, {1, 2}, marks=pytest.mark.long),
    (2, 3, 1, "parallel", 1, 2, {1}),
    pytest.param(5, 2, 2, "parallel", 2, 2, {1}, marks=pytest.mark.long),
    (4, 3, 8, "parallel", 4, 3, {1, 2}), (4, 3, 8, "parallel", 4, 4, {1})])
def test_engine_runs_a_residual_network_as_golden_and_its_cycle_model(rows, cols, alpha, mac,
                                                                       packing, ports,
                                                                       layer_rounds):
    # Every step kind: padded convolutions over several row and column blocks (partial
    # sums through the buffer), a residual add in place, max and global average pooling,
    # a flatten and dense logits; two images one after the other. Five rows: the array's
    # output FIFO per row, and words of five lanes. On the alpha-8 engine the
    # convolutions are packed narrowly (a round of reads a position), the dense logits
    # keep groups of 3-4 (two rounds); with bit-serial MACs two rounds cost nothing (a
    # beat takes 8 cycles), and five columns' inputs over three lane banks take them.
    # Banks of three or four read ports read more slots a round: four take the groups of
    # four in one.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = residual_network(rng, alpha=packing)
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=512,
                          acc_words=16, psum_words=64, gather_ports=ports)
    compiled = compile_network(network, engine)
    rounds = {s.rounds for s in compiled.program.steps if s.op == "layer"}
    assert rounds == layer_rounds, rounds
    images = rng.integers(0, 256, (2, 3, 8, 8))
    images[1, 0] = 255
    _engine_equals(compiled, images, lambda x: run_program(compiled.program, compiled.image, x))


@pytest.mark.parametrize("rows,cols,alpha,mac", [
    (4, 3, 2, "parallel"), (3, 2, 2, "bitserial"),
    pytest.param(6, 2, 2, "parallel", marks=pytest.mark.long)])
def test_engine_runs_resnet_blocks_as_golden(rows, cols, alpha, mac):
    # Branches that end in accumulators, their adds fused into a layer: a projection
    # block's into its projection, which reads the other branch's accumulators from the
    # accumulator buffer, and an identity block's into its last layer, over the
    # identity's activations; strides of 2.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=256,
                          acc_words=64, psum_words=64)
    network = projection_network(rng)
    compiled = _engine_equals_network(network, engine, rng.integers(0, 256, (2, 3, 8, 8)))
    assert [s.add_b.memory for s in compiled.program.steps
            if s.op == "layer" and s.add_b is not None] == ["acc", "act"]


@pytest.mark.parametrize("rows,cols,alpha,mac", [
    (4, 3, 2, "parallel"), pytest.param(3, 2, 2, "bitserial", marks=pytest.mark.long)])
def test_engine_requantizes_by_a_multiplier_as_golden(rows, cols, alpha, mac):
    # Output stages that multiply each row's sum by its 16-bit multiplier before the
    # shift: per channel (0, 1, 2 and 65535 among them, shifts from 8 to 47, past the
    # accumulator's 32 bits) over two row blocks, and one a layer; two images. The
    # multipliers reach the rows past the first block and the clamp at both ends.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=512,
                          acc_words=16, psum_words=64, requant="multiplier")
    network = residual_network(rng, requant="multiplier")
    images = rng.integers(0, 256, (2, 3, 8, 8))
    a = network.run(images, keep=True)["a"]
    assert a.min() == 0 and a.max() == 255
    compiled = _engine_equals_network(network, engine, images)
    # Without the multipliers (each 1) the first layer's outputs differ.
    shifted = compile_network(residual_network(np.random.default_rng(SEED)),
                              dataclasses.replace(engine, requant="shift"))
    assert not np.array_equal(run_program(shifted.program, shifted.image, images[0]),
                              run_program(compiled.program, compiled.image, images[0]))


def _engine_equals(compiled, images, want, dut=None):
    """Run ``images`` on the engine ``compiled`` was built for (or, parallel only, on
    ``dut``): every output equals ``want(image)``, every run's cycles the program's. A
    bit-serial engine runs on Verilator, whose bench holds each output against
    ``run_program`` (and here ``run_program`` against ``want``); a parallel one on
    Amaranth's simulator."""
    if compiled.program.engine.mac == "bitserial":
        report = run_on_engine(compiled, images, simulator="verilator", seed=SEED)
        assert report["cycles"] == [compiled.cycles] * len(images)
        for x in images:
            assert np.array_equal(run_program(compiled.program, compiled.image, x), want(x))
        return
    runs = _engine_runs(dut or NetworkEngine.for_program(compiled.program),
                        compiled.program, compiled.image, images)
    for x, (got, cycles, error) in zip(images, runs):
        assert not error and np.array_equal(got, want(x)), f"{got} != {want(x)} (seed {SEED})"
        assert cycles == compiled.cycles


def _engine_equals_network(network, engine, images):
    """Compile ``network`` for ``engine``, run ``images`` on the engine: every output
    equals the integer network's, every run's cycles the program's. Returns the
    compiled network."""
    compiled = compile_network(network, engine)
    _engine_equals(compiled, images, lambda x: network.run(x[None])[0])
    return compiled


@pytest.mark.parametrize("rows,cols,alpha,mac", [
    (4, 3, 2, "parallel"), pytest.param(3, 2, 2, "bitserial", marks=pytest.mark.long)])
def test_engine_runs_linear_bottlenecks_as_golden(rows, cols, alpha, mac):
    # Adds without a ReLU: accumulators plus activations into signed codes, then two
    # signed operands; layers reading and writing signed codes (offset binary).
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=512,
                          acc_words=128, psum_words=64)
    network = bottleneck_network(rng)
    images = rng.integers(0, 256, (2, 3, 6, 6))
    tensors = network.run(images, keep=True)
    assert tensors["k"].min() == 0 or tensors["k"].max() == 255   # a clamp reached
    compiled = _engine_equals_network(network, engine, images)
    # The first block's add fused into its projection layer, the second's on the unit.
    fused = [s for s in compiled.program.steps if s.op == "layer" and s.add_b is not None]
    assert [(s.name, s.signed_b, s.signed_out) for s in fused] == [("project_a", False, True)]
    adds = [s for s in compiled.program.steps if s.op == "add"]
    assert [(s.signed_a, s.signed_b, s.signed_out) for s in adds] == [(True, True, True)]


@pytest.mark.parametrize("op,edit,message", [
    ("add", {"a": Region("acc", 0, (6, 6, 6))}, "its a must be in the activation buffer"),
    pytest.param("layer", {"rounds": 0}, r"0 rounds of gather reads; the engine reads 1..1",
                 marks=pytest.mark.long),
    pytest.param("layer", {"rounds": 2}, r"2 rounds of gather reads; the engine reads 1..1",
                 marks=pytest.mark.long),
    pytest.param("layer", {"images": 0}, r"0 images; a layer step runs 1..65535",
                 marks=pytest.mark.long)])
def test_engine_refuses_a_step_it_cannot_run(op, edit, message):
    # A hand-edited program whose add (of two activation operands) reads an operand
    # from the accumulator buffer, or whose layer reads in no rounds or more than the
    # gather has, or runs no images: golden refuses it, the engine stops with ``error``
    # at that step.
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=4, cols=3, alpha=2, act_words=512, acc_words=128,
                          psum_words=64)
    compiled = compile_network(bottleneck_network(rng), engine)
    steps = list(compiled.program.steps)
    k = next(k for k, s in enumerate(steps) if s.op == op and (op == "add" or s.pad))
    steps[k] = dataclasses.replace(steps[k], **edit)
    edited = dataclasses.replace(compiled.program, steps=tuple(steps))
    x = rng.integers(0, 256, (1, 3, 6, 6))
    with pytest.raises(ProgramError, match=message):
        run_program(edited, compiled.image, x[0])
    (_, cycles, error), = _engine_runs(NetworkEngine.for_program(compiled.program),
                                       compiled.program, compiled.image, x,
                                       loaded_program=encode_program(edited))
    assert error and cycles == HEADER_CYCLES + sum(compiled.costs[j].cycles
                                                   for j in range(k)) + FETCH_CYCLES


def test_a_pad_code_wider_than_an_activation_has_no_binary():
    # The padded layer (the one reading signed codes) edited to pad with 256: golden
    # refuses to run it, and the binary program cannot carry it (the pad code is 8 bits
    # since version 7), so no engine is ever given one.
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=4, cols=3, alpha=2, act_words=512, acc_words=128,
                          psum_words=64)
    compiled = compile_network(bottleneck_network(rng), engine)
    steps = list(compiled.program.steps)
    k = next(k for k, s in enumerate(steps) if s.op == "layer" and s.pad)
    steps[k] = dataclasses.replace(steps[k], pad=256)
    edited = dataclasses.replace(compiled.program, steps=tuple(steps))
    with pytest.raises(ProgramError, match=r"pad code 256 is not an activation \(0..255\)"):
        run_program(edited, compiled.image, rng.integers(0, 256, (3, 6, 6)))
    with pytest.raises(ProgramError, match="pad is 256, which does not fit 8 bits"):
        encode_program(edited)


def test_engine_runs_a_concat_as_golden():
    # A channel concatenation compiles to adds into the output's lane blocks.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    engine = EngineConfig(rows=4, cols=3, alpha=2, act_words=128, acc_words=4, psum_words=32)
    compiled = compile_network(concat_network(rng, 4), engine)
    images = rng.integers(0, 256, (2, 2, 4, 4))
    runs = _engine_runs(NetworkEngine.for_program(compiled.program), compiled.program,
                        compiled.image, images)
    for x, (got, cycles, error) in zip(images, runs):
        assert not error and cycles == compiled.cycles
        assert np.array_equal(got, run_program(compiled.program, compiled.image, x))


def test_engine_refuses_a_program_for_another_engine():
    rng = np.random.default_rng(SEED)
    network = residual_network(rng)
    engine = EngineConfig(rows=4, cols=4, alpha=2, act_words=512, acc_words=16,
                          psum_words=64)
    compiled = compile_network(network, engine)
    dut = NetworkEngine.for_program(compiled.program)
    # Larger buffers than the engine's, and an output stage with multipliers it lacks.
    for other in (dataclasses.replace(engine, psum_words=128),
                  dataclasses.replace(engine, requant="multiplier")):
        runs = _engine_runs(dut, compiled.program, compiled.image,
                            rng.integers(0, 256, (1, 3, 8, 8)),
                            loaded_program=encode_program(compile_network(network,
                                                                          other).program))
        (got, cycles, error), = runs
        assert error and cycles == HEADER_CYCLES and not np.any(got)


@pytest.mark.parametrize("op,field", [("pool", "src"), ("pool", "dst"), ("add", "dst"),
                                      ("layer", "src"), ("add", "op"), ("add", "load")])
def test_engine_refuses_a_step_on_the_accumulator_buffer(op, field):
    # A hand-edited program whose step reads or writes the accumulator buffer where no
    # step can, whose operation is unknown, or which loads activations on an engine
    # without external activation memory: golden refuses it, the engine stops with
    # ``error`` at that step.
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=4, cols=4, alpha=2, act_words=512, acc_words=16,
                          psum_words=64)
    compiled = compile_network(residual_network(rng), engine)
    steps = list(compiled.program.steps)
    k = next(k for k, s in enumerate(steps) if s.op == op)
    x = rng.integers(0, 256, (1, 3, 8, 8))
    if field == "op":
        binary = bytearray(encode_program(compiled.program))
        binary[4 * (HEADER_WORDS + k * STEP_WORDS)] = 5
        with pytest.raises(ProgramError, match=f"step {k}: unknown operation 5"):
            decode_program(bytes(binary))
        loaded = bytes(binary)
    elif field == "load":
        steps[k] = LoadStep("load", steps[k].dst, 0)
        edited = dataclasses.replace(compiled.program, steps=tuple(steps))
        with pytest.raises(ProgramError, match="past the engine's external activation "
                                               "memory of 0 words"):
            run_program(edited, compiled.image, x[0])
        loaded = encode_program(edited)
    else:
        steps[k] = dataclasses.replace(steps[k], **{field: dataclasses.replace(
            getattr(steps[k], field), memory="acc")})
        edited = dataclasses.replace(compiled.program, steps=tuple(steps))
        with pytest.raises(ProgramError, match=f"its {field} must be in the activation "
                                               f"buffer"):
            run_program(edited, compiled.image, x[0])
        loaded = encode_program(edited)
    (_, cycles, error), = _engine_runs(NetworkEngine.for_program(compiled.program),
                                       compiled.program, compiled.image, x,
                                       loaded_program=loaded)
    assert error and cycles == HEADER_CYCLES + sum(compiled.costs[j].cycles
                                                   for j in range(k)) + FETCH_CYCLES


@pytest.mark.parametrize("shift,requant", [(32, "shift"), (255, "shift"),
                                           (48, "multiplier"), (64, "multiplier")])
def test_engine_refuses_a_shift_past_the_output_stage(shift, requant):
    # A hand-edited weight image whose second layer's first row block holds a shift the
    # output stage cannot make (32 and up; with the multiplier 48 and up): golden refuses
    # it, the engine stops with ``error`` before that row block's first tile.
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=4, cols=4, alpha=2, act_words=512, acc_words=16,
                          psum_words=64, requant=requant)
    compiled = compile_network(residual_network(rng, requant=requant), engine)
    k = 1
    step = compiled.program.steps[k]
    assert step.op == "layer" and step.output_stage
    image = bytearray(compiled.image)
    image[step.weights + 4 * engine.rows + 2] = shift
    x = rng.integers(0, 256, (1, 3, 8, 8))
    most = 31 if requant == "shift" else 47
    with pytest.raises(ProgramError, match=f"{step.name}: a shift of {shift} in the weight "
                                           f"image; the output stage shifts by at most {most}"):
        run_program(compiled.program, bytes(image), x[0])
    (_, cycles, error), = _engine_runs(NetworkEngine.for_program(compiled.program),
                                       compiled.program, bytes(image), x)
    bias_words = bias_bytes(engine) // image_word(engine)
    assert error and cycles == (HEADER_CYCLES + compiled.costs[0].cycles + FETCH_CYCLES
                                + bias_words + 1 + 1)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"rows": 0}, TypeError, "Row count must be a positive integer, not 0"),
    ({"act_words": 1.5}, TypeError, "Activation words must be a positive integer"),
    ({"mac": "serial"}, ValueError, "MAC kind must be one of parallel, bitserial"),
])
def test_engine_parameters(kwargs, error, message):
    with pytest.raises(error, match=message):
        NetworkEngine(**{"rows": 2, "cols": 2, "alpha": 2, **kwargs})


@pytest.mark.parametrize("base_words,count,word_bits", [(2040, 300, 16), (5, 7, 80)])
def test_axi_weight_reader_splits_runs_into_legal_bursts(base_words, count, word_bits):
    # A run longer than a burst and across 4 KB pages (words of 2 bytes: 2048 to a page),
    # and a short run of 10-byte words at a 16-byte stride: every burst has at most
    # PREFETCH_BURST beats and stays in its page, at most PREFETCH_BURSTS are owed, the
    # words arrive in order, the memory stalls its channels at random, and the byte
    # counter counts the stride per word.
    rng = random.Random(SEED)
    print(f"seed={SEED}")
    dut = AxiWeights(word_bits=word_bits)
    stride, base = dut.stride, base_words * dut.stride
    bursts, got = [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def memory(ctx):
        pending = []
        while True:
            ctx.set(dut.axi.arready, rng.random() < 0.7)
            ctx.set(dut.axi.rvalid, 0)
            if pending:
                addr = pending[0][0]
                ctx.set(dut.axi.rvalid, rng.random() < 0.7)
                ctx.set(dut.axi.rdata, addr * 7 + 1)
                ctx.set(dut.axi.rlast, pending[0][1] == 1)
            _, _, arv, arr, ara, arl, rv, rr = await ctx.tick().sample(
                dut.axi.arvalid, dut.axi.arready, dut.axi.araddr, dut.axi.arlen,
                dut.axi.rvalid, dut.axi.rready)
            if rv and rr:
                addr, left = pending[0]
                pending[0] = (addr + stride, left - 1)
                if left == 1:
                    pending.pop(0)
            if arv and arr:
                bursts.append((ara, arl + 1))
                pending.append((ara, arl + 1))
                assert len(pending) <= PREFETCH_BURSTS

    async def bench(ctx):
        ctx.set(dut.base, 0)
        ctx.set(dut.addr, base_words)
        ctx.set(dut.count, count)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for _ in range(20 * count + 200):
            ready = rng.random() < 0.8
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid and ready:
                got.append(payload)
            if len(got) == count:
                break
        assert ctx.get(dut.bytes_read) == count * stride

    sim.add_process(memory)
    sim.add_testbench(bench)
    sim.run()
    assert got == [((base + k * stride) * 7 + 1) % (1 << word_bits) for k in range(count)]
    assert sum(n for _, n in bursts) == count
    for addr, n in bursts:
        assert 1 <= n <= PREFETCH_BURST and addr // 4096 == (addr + n * stride - 1) // 4096


@pytest.mark.parametrize("taken", [0, 7, 40])
def test_axi_weight_reader_clear_drops_a_stopped_run(taken):
    # A run of 100 words stopped by ``clear`` after ``taken`` of them (bursts owed and an
    # address on offer, the memory stalling at random), then a run of 40 other words:
    # exactly those 40 come out, every address offered stays offered until taken, and
    # the byte counter counts every word the memory sent.
    rng = random.Random(SEED + taken)
    print(f"seed={SEED + taken}")
    dut = AxiWeights(word_bits=16)
    stride = dut.stride
    sent, got = [0], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def memory(ctx):
        pending, offered = [], None
        while True:
            ctx.set(dut.axi.arready, rng.random() < 0.5)
            ctx.set(dut.axi.rvalid, 0)
            if pending:
                ctx.set(dut.axi.rvalid, rng.random() < 0.7)
                ctx.set(dut.axi.rdata, pending[0][0] // stride)
                ctx.set(dut.axi.rlast, pending[0][1] == 1)
            _, _, arv, arr, ara, arl, rv, rr = await ctx.tick().sample(
                dut.axi.arvalid, dut.axi.arready, dut.axi.araddr, dut.axi.arlen,
                dut.axi.rvalid, dut.axi.rready)
            if offered is not None:
                assert arv and (ara, arl) == offered, "an offered address was withdrawn"
            offered = (ara, arl) if arv and not arr else None
            if rv and rr:
                sent[0] += 1
                addr, left = pending[0]
                pending[0] = (addr + stride, left - 1)
                if left == 1:
                    pending.pop(0)
            if arv and arr:
                pending.append((ara, arl + 1))

    async def run(ctx, addr, count, stop):
        ctx.set(dut.addr, addr)
        ctx.set(dut.count, count)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        words = []
        while len(words) < stop:
            ready = rng.random() < 0.8
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid and ready:
                words.append(payload)
        ctx.set(dut.o.ready, 0)
        return words

    async def bench(ctx):
        ctx.set(dut.base, 0)
        assert await run(ctx, 1000, 100, taken) == list(range(1000, 1000 + taken))
        await ctx.tick()
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        got.extend(await run(ctx, 3000, 40, 40))
        for _ in range(200):
            await ctx.tick()
        assert ctx.get(dut.bytes_read) == sent[0] * stride

    sim.add_process(memory)
    sim.add_testbench(bench)
    sim.run()
    assert got == list(range(3000, 3040))


class _BufferedTransfers(wiring.Component):
    """``AxiActivations`` with an activation buffer of ``depth`` words behind it."""

    def __init__(self, word_bits, depth, init):
        self.xfer = AxiActivations(word_bits=word_bits, depth=depth)
        self.buffer = memory.Memory(shape=unsigned(word_bits), depth=depth, init=init)
        super().__init__({"peek": wiring.In(range(depth)),
                          "peek_data": wiring.Out(word_bits)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.xfer, m.submodules.buffer = self.xfer, self.buffer
        write, read = self.buffer.write_port(), self.buffer.read_port(transparent_for=())
        peek = self.buffer.read_port(domain="comb")
        m.d.comb += [write.addr.eq(self.xfer.write.addr), write.data.eq(self.xfer.write.data),
                     write.en.eq(self.xfer.write.en), read.addr.eq(self.xfer.read),
                     self.xfer.read_data.eq(read.data), peek.addr.eq(self.peek),
                     self.peek_data.eq(peek.data)]
        return m


@pytest.mark.parametrize("word_bits,ext,count,bad", [(48, 500, 300, False), (8, 4090, 20, False),
                                                     (24, 3, 5, True)])
def test_activation_port_stores_and_loads_in_legal_bursts(word_bits, ext, count, bad):
    # Buffer words out to external memory and back to another place: across a 4 KB page
    # and past 256 beats (words of 6 bytes at a stride of 8), across a page one byte a
    # word, and a memory that answers with errors. The memory stalls every channel at
    # random; the bursts are golden's ``bursts``, the data come back whole, the write
    # strobes cover the word's bytes, the counters count the stride per word.
    rng = random.Random(SEED + count)
    print(f"seed={SEED + count}")
    depth = 1024
    init = [rng.getrandbits(word_bits) for _ in range(depth)]
    dut = _BufferedTransfers(word_bits, depth, init)
    xfer, axi = dut.xfer, dut.xfer.axi
    stride, base = dut.xfer.stride, 3 << 12
    ext_mem, reads, writes, errors = {}, [], [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def memory_model(ctx):
        pending_r, pending_w, responses = [], [], []
        while True:
            ctx.set(axi.arready, rng.random() < 0.7)
            ctx.set(axi.awready, rng.random() < 0.7)
            ctx.set(axi.wready, rng.random() < 0.7)
            ctx.set(axi.rvalid, 0)
            ctx.set(axi.bvalid, bool(responses) and rng.random() < 0.7)
            ctx.set(axi.bresp, 2 if bad else 0)
            if pending_r:
                addr, left = pending_r[0]
                ctx.set(axi.rvalid, rng.random() < 0.7)
                ctx.set(axi.rdata, ext_mem.get(addr, 0))
                ctx.set(axi.rlast, left == 1)
                ctx.set(axi.rresp, 2 if bad else 0)
            (_, _, arv, arr, ara, arl, rv, rr, awv, awr, awa, awl, wv, wr, wd, ws, wl,
             bv, br, err) = await ctx.tick().sample(
                axi.arvalid, axi.arready, axi.araddr, axi.arlen, axi.rvalid, axi.rready,
                axi.awvalid, axi.awready, axi.awaddr, axi.awlen, axi.wvalid, axi.wready,
                axi.wdata, axi.wstrb, axi.wlast, axi.bvalid, axi.bready, xfer.error)
            if err:
                errors.append(1)
            if rv and rr:
                addr, left = pending_r[0]
                pending_r[0] = (addr + stride, left - 1)
                if left == 1:
                    pending_r.pop(0)
            if arv and arr:
                reads.append((ara, arl + 1))
                pending_r.append((ara, arl + 1))
            if awv and awr:
                writes.append((awa, awl + 1))
                pending_w.append([awa, awl + 1])
            if wv and wr:
                assert pending_w, "a write word before its address"
                assert ws == (1 << -(-word_bits // 8)) - 1
                ext_mem[pending_w[0][0]] = wd
                pending_w[0][0] += stride
                pending_w[0][1] -= 1
                assert wl == (pending_w[0][1] == 0)
                if not pending_w[0][1]:
                    pending_w.pop(0)
                    responses.append(1)
            if bv and br:
                responses.pop(0)

    async def bench(ctx):
        ctx.set(xfer.base, base)
        for store, buf in ((1, 10), (0, 1024 - count)):
            ctx.set(xfer.store, store)
            ctx.set(xfer.addr, ext)
            ctx.set(xfer.buf, buf)
            ctx.set(xfer.count, count)
            ctx.set(xfer.start, 1)
            await ctx.tick()
            ctx.set(xfer.start, 0)
            for _ in range(30 * count + 300):
                await ctx.tick()
                if not ctx.get(xfer.busy):
                    break
            assert not ctx.get(xfer.busy), "the transfer hung"
        assert ctx.get(xfer.bytes_written) == ctx.get(xfer.bytes_read) == count * stride
        for k in range(count):
            ctx.set(dut.peek, 1024 - count + k)
            assert ctx.get(dut.peek_data) == init[10 + k], f"word {k}"

    sim.add_process(memory_model)
    sim.add_testbench(bench)
    sim.run()
    want = [(base + a * stride, n) for a, n in bursts(ext, count, stride)]
    assert reads == want and writes == want
    assert all(ext_mem[base + (ext + k) * stride] == init[10 + k] for k in range(count))
    assert bool(errors) == bad


def test_engine_refuses_a_misaligned_external_activation_memory():
    # The external activation memory's base must be 4 KB aligned: the engine stops with
    # ``error`` at the first store, before its address goes out.
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=6, cols=2, alpha=2, act_words=150, acc_words=128,
                          psum_words=64, spill_words=1024)
    compiled = compile_network(bottleneck_network(rng), engine)
    k = next(k for k, s in enumerate(compiled.program.steps) if s.op == "store")
    dut = NetworkEngine.for_program(compiled.program)
    x = rng.integers(0, 256, (1, 3, 6, 6))
    (_, cycles, error), = _engine_runs(dut, compiled.program, compiled.image, x,
                                       act_base=0x1010)
    assert error and cycles == HEADER_CYCLES + sum(compiled.costs[j].cycles
                                                   for j in range(k)) + FETCH_CYCLES


def _run_with_memories(compiled, x, bad, latency=1, images=None):
    """Runs of ``x`` on the engine for ``compiled`` with its weights and its spilled
    activations in AXI4 memories (Python models: always ready, a burst's first word
    ``latency`` cycles after its address for the weights, 1 for the activations, or
    right after the previous burst's words, then a word a cycle; the weight image from
    byte 4096), a run for each of ``images`` (weight images, by default the compiled
    one), the input written before each; ``bad`` names one answer that is SLVERR:
    ``("weights", n)`` the ``n``-th weight word, ``("load", n)`` the ``n``-th activation
    word read, ``("store", n)`` the ``n``-th write response, or None. Returns
    ``(output, cycles, error)`` of each run."""
    from codnn.golden.network_program import act_stride, word_stride
    program = compiled.program
    dut = NetworkEngine.for_program(program, weight_port="axi")
    e = program.engine
    word, stride = image_word(e), word_stride(image_word(e))
    weights, acts, result = {}, {}, []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def reads(ctx, axi, memory, kind, step, latency):
        pending, beat, now = [], 0, 0
        while True:
            due = bool(pending) and pending[0][2] <= now
            ctx.set(axi.arready, 1)
            ctx.set(axi.rvalid, due)
            if due:
                ctx.set(axi.rdata, memory.get(pending[0][0], 0))
                ctx.set(axi.rlast, pending[0][1] == 1)
                ctx.set(axi.rresp, 2 if bad == (kind, beat) else 0)
            _, _, arv, ara, arl, rv, rr = await ctx.tick().sample(
                axi.arvalid, axi.araddr, axi.arlen, axi.rvalid, axi.rready)
            now += 1
            if rv and rr:
                beat += 1
                addr, left, _ = pending[0]
                pending[0] = (addr + step, left - 1, now)
                if left == 1:
                    pending.pop(0)
            if arv:
                pending.append((ara, arl + 1, now + latency - 1))

    async def writes(ctx, axi, memory, step):
        pending, responses, answered = [], 0, 0
        while True:
            ctx.set(axi.awready, 1)
            ctx.set(axi.wready, 1)
            ctx.set(axi.bvalid, responses > 0)
            ctx.set(axi.bresp, 2 if bad == ("store", answered) else 0)
            _, _, awv, awa, wv, wd, wl, bv, br = await ctx.tick().sample(
                axi.awvalid, axi.awaddr, axi.wvalid, axi.wdata, axi.wlast, axi.bvalid,
                axi.bready)
            if bv and br:
                responses, answered = responses - 1, answered + 1
            if awv:
                pending.append(awa)
            if wv:
                memory[pending[0]] = wd
                pending[0] += step
                if wl:
                    pending.pop(0)
                    responses += 1

    async def bench(ctx):
        ctx.set(dut.weight_base, 4096)
        ctx.set(dut.act_base, 1 << 16)
        program_words, _, act = host_words(program, compiled.image, x)
        for image in images or [compiled.image]:
            weights.update({4096 + k * stride: int.from_bytes(image[k * word:(k + 1) * word],
                                                              "little")
                            for k in range(len(image) // word)})
            for port, words in ((dut.program_write, program_words), (dut.act_write, act)):
                for addr, value in words:
                    ctx.set(port, {"addr": addr, "data": value, "en": 1})
                    await ctx.tick()
                ctx.set(port.en, 0)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for _ in range(200_000):
                await ctx.tick()
                if not ctx.get(dut.busy):
                    break
            assert not ctx.get(dut.busy), "the engine never finished"
            out, words = program.output, []
            for addr in range(out.addr, out.addr + out.words(e.rows)):
                ctx.set(dut.acc_read if out.memory == "acc" else dut.act_read, addr)
                await ctx.tick()
                words.append(ctx.get(dut.acc_read_data if out.memory == "acc"
                                     else dut.act_read_data))
            result.append((output_values(program, words), ctx.get(dut.cycles),
                           ctx.get(dut.error)))

    async def weight_reads(ctx):
        await reads(ctx, dut.axi, weights, "weights", stride, latency)

    async def act_reads(ctx):
        await reads(ctx, dut.act_axi, acts, "load", act_stride(e), 1)

    async def act_writes(ctx):
        await writes(ctx, dut.act_axi, acts, act_stride(e))

    for process in (weight_reads, act_reads, act_writes):
        sim.add_process(process)
    sim.add_testbench(bench)
    sim.run()
    return result


def _spilling_bottlenecks():
    """The linear-bottleneck workload compiled for a 6 x 2 engine whose 150-word buffer
    makes it spill to external memory, and three input maps."""
    rng = np.random.default_rng(SEED)
    engine = EngineConfig(rows=6, cols=2, alpha=2, act_words=150, acc_words=128,
                          psum_words=64, spill_words=1024)
    return compile_network(bottleneck_network(rng), engine), rng.integers(0, 256, (3, 6, 6))


@pytest.mark.parametrize("bad", [("store", 0), pytest.param(("weights", 40), marks=pytest.mark.long),
                                 pytest.param(("load", 3), marks=pytest.mark.long)])
def test_memory_errors_flag_the_run_and_let_it_finish(bad):
    # An AXI4 SLVERR on a weight read, an activation read (a load) or a store's write
    # response sets ``error``; the run goes on to its end as it would have (the same
    # cycles; the data came with the error, so the same outputs), and ``error`` stays
    # high until the next start (docs/networks.md, "Driving the engine").
    compiled, x = _spilling_bottlenecks()
    (clean,) = _run_with_memories(compiled, x, None)
    (faulty,) = _run_with_memories(compiled, x, bad)
    assert not clean[2] and faulty[2]
    assert np.array_equal(clean[0], run_program(compiled.program, compiled.image, x))
    assert faulty[1] == clean[1] and np.array_equal(faulty[0], clean[0])


@pytest.mark.parametrize("latency", [1, 40])
def test_prefetched_weights_take_the_models_cycles(latency):
    # Weights behind an AXI4 memory of a short and a long latency (40 cycles: more than
    # two bursts of words can hide, so the prefetch waits on its FIFO's bursts and the
    # memory in turn), spilled activations behind another: the outputs equal golden and
    # the run takes the model's cycles, each layer's words prefetched from its dispatch.
    compiled, x = _spilling_bottlenecks()
    (out, cycles, error), = _run_with_memories(compiled, x, None, latency)
    assert not error
    assert np.array_equal(out, run_program(compiled.program, compiled.image, x))
    assert cycles == HEADER_CYCLES + sum(step_cycles(compiled.program, latency, 1, 1,
                                                     weight_base=4096))


def test_a_run_stopped_inside_a_layer_leaves_no_prefetched_word():
    # A row block's shift past the output stage stops the run in its first tile while
    # the layer's words are still being prefetched from a memory of latency 40; the
    # next start (the image mended) drops them: its outputs equal golden and it takes
    # the model's cycles.
    compiled, x = _spilling_bottlenecks()
    step = next(s for s in compiled.program.steps if s.op == "layer" and s.output_stage)
    broken = bytearray(compiled.image)
    broken[step.weights + 4 * compiled.program.engine.rows] = 32
    stopped, mended = _run_with_memories(compiled, x, None, 40,
                                         images=[bytes(broken), compiled.image])
    assert stopped[2] and stopped[1] < mended[1]
    assert not mended[2]
    assert np.array_equal(mended[0], run_program(compiled.program, compiled.image, x))
    assert mended[1] == HEADER_CYCLES + sum(step_cycles(compiled.program, 40, 1, 1,
                                                        weight_base=4096))


def test_a_program_for_smaller_buffers_runs_on_a_larger_engine():
    # Compiled for buffers smaller than the engine's (as codnn compile sizes them), the
    # program runs, equal to golden in the model's cycles; one for larger buffers than
    # the engine has is refused at its header.
    rng = np.random.default_rng(SEED)
    network = residual_network(rng)
    small = EngineConfig(rows=4, cols=4, alpha=2, act_words=300, acc_words=3,
                         psum_words=64)
    compiled = compile_network(network, small)
    dut = NetworkEngine(rows=4, cols=4, alpha=2, mac="parallel", act_words=512,
                        acc_words=16, psum_words=128, weight_words=4096, program_words=512)
    x = rng.integers(0, 256, (2, 3, 8, 8))
    _engine_equals(compiled, x, lambda image: run_program(compiled.program, compiled.image,
                                                          image), dut=dut)
    large = compile_network(network, dataclasses.replace(small, act_words=600))
    (_, cycles, error), = _engine_runs(dut, large.program, large.image, x[:1])
    assert error and cycles == HEADER_CYCLES


@pytest.mark.parametrize("rows,cols,alpha,mac,weight_ports", [
    (4, 4, 2, "parallel", 2), (4, 4, 2, "parallel", 1), (3, 5, 4, "bitserial", 2)])
def test_engine_fuses_pooling_as_golden(rows, cols, alpha, mac, weight_ports):
    # Convolutions with their 2 x 2 max pooling fused into the result writer: maps of
    # odd sides (the last row and column dropped), several row and column blocks (the
    # partial sums through the buffer before the pooled write), two images one after
    # the other. The program has no pooling step and runs in the cycles of the model,
    # fewer than with the poolings as steps. The tiles' tables come beside their cells
    # (two read ports of the weight memory) or before them (one).
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = pooled_network(rng)
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=1024,
                          acc_words=16, psum_words=256, weight_ports=weight_ports)
    compiled = _engine_equals_network(network, engine, rng.integers(0, 256, (2, 3, 11, 13)))
    layers = [s for s in compiled.program.steps if s.op == "layer"]
    assert [s.pool for s in layers] == [True, True, False]
    assert layers[0].row_blocks > 1 and layers[1].col_blocks > 1
    assert compiled.cycles < compile_network(network, engine, fuse=False).cycles
