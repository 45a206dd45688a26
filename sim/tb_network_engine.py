"""cocotb testbench: the network engine (``codnn.hw.network.NetworkEngine``) running a compiled
network against ``codnn.golden.network_program``.

Configuration (``CODNN_TB_CONFIG``): ``program`` (the JSON form, ``Program.to_dict``),
``image`` (the weight image, an ``.npy`` of its bytes), ``inputs`` (an ``.npy`` of
images, the program's input shape each; for a program of several ``images``, of such
batches), ``reset_after`` (optional: the first image's
run is reset after that many cycles, then every image runs from a fresh start) and
``weight_port`` (``"axi"``: the engine reads the weight image from cocotbext-axi's
``AxiRamRead``, where the testbench writes it at ``weight_base``, a word every
``word_stride`` bytes; ``memory_pauses``: the memory stalls its address and data channels
at random, and the cycles are then only checked not to fall below the model). A program
with loads and stores (``spill_words``) gets cocotbext-axi's ``AxiRam`` on the engine's
activation port, at byte 65536 (where a batch program's input is written); its read
latency and write-response latency are measured at the first load and store, and its
byte counters checked against the compiler's traffic.

The testbench writes the binary program and the weight image through the engine's ports,
then per image its input, pulses ``start``, waits for ``busy`` to fall and reads the
output region back: every value must equal ``run_program``'s, ``error`` must stay low and
the engine's ``cycles`` must equal the model (``HEADER_CYCLES + sum(step_cycles)``).
"""

import json

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from codnn.golden.network_program import (HEADER_CYCLES, LoadStep, Program, StoreStep,
                                          act_stride, external_reach, host_words, image_word,
                                          output_values, run_program, step_cycles,
                                          weight_words_read, word_stride)

from codnn.sim.testbench import load_config, start_clock_and_reset, write_report


async def write_words(dut, port, data_bits, words):
    """Write ``words`` through a write port (one vector: address, data, enable, from the
    least significant bit) of ``data_bits``-bit data, a word an edge."""
    handle = getattr(dut, port)
    addr_bits = len(handle) - data_bits - 1
    for addr, word in words:
        handle.value = addr | word << addr_bits | 1 << (addr_bits + data_bits)
        await RisingEdge(dut.clk)
    handle.value = 0


async def _run(dut, limit):
    """Pulse start; return the edges until busy fell (failing after ``limit``)."""
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    for edge in range(1, limit + 1):
        await RisingEdge(dut.clk)
        await ReadOnly()
        if not int(dut.busy.value):
            await RisingEdge(dut.clk)
            return edge
    raise AssertionError(f"the engine was still busy after {limit} cycles")


async def read_output(dut, program):
    out = program.output
    port = "acc_read" if out.memory == "acc" else "act_read"
    words = []
    for addr in range(out.addr, out.addr + program.images * out.words(program.engine.rows)):
        getattr(dut, port).value = addr
        await RisingEdge(dut.clk)
        await ReadOnly()
        words.append(int(getattr(dut, f"{port}_data").value))
        await RisingEdge(dut.clk)
    return output_values(program, words)


def _external_memory(dut, config, weights, stride):
    """An ``AxiRamRead`` on the engine's ``axi`` port holding the weight words from five
    words before a 4 KB page boundary (so that a run of words crosses it); returns that
    base."""
    from cocotbext.axi import AxiRamRead, AxiReadBus
    base = 4096 - 5 * stride
    memory = AxiRamRead(AxiReadBus.from_prefix(dut, "axi_"), dut.clk, dut.rst,
                        size=base + max(1, len(weights)) * stride + 4096)
    for addr, value in weights:
        memory.write(base + addr * stride, value.to_bytes(stride, "little"))
    dut.weight_base.value = base
    if config.get("memory_pauses"):
        rng = np.random.default_rng(config["seed"])
        for channel in (memory.ar_channel, memory.r_channel):
            channel.set_pause_generator(iter(lambda: bool(rng.random() < 0.3), None))
    return base


#: Where the external activation memory starts (4 KB aligned).
ACT_BASE = 1 << 16


def _activation_memory(dut, program):
    """An ``AxiRam`` on the engine's ``act_axi`` port, as large as the program's loads,
    stores and input reach."""
    from cocotbext.axi import AxiBus, AxiRam
    size = ACT_BASE + max(external_reach(program), 1) * act_stride(program.engine)
    dut.act_base.value = ACT_BASE
    return AxiRam(AxiBus.from_prefix(dut, "act_axi_"), dut.clk, dut.rst, size=size)


async def _write_input(dut, program, words, memory, data_bits):
    """The input's words (``host_words``) into the activation buffer, or into the
    external activation memory for a program whose input waits there."""
    if program.input.memory != "ext":
        await write_words(dut, "act_write", data_bits, words)
        return
    stride = act_stride(program.engine)
    for addr, word in words:
        memory.write(ACT_BASE + addr * stride, word.to_bytes(stride, "little"))


async def _first_latency(dut, port, begin, end):
    """Cycles from the first cycle in which the signals ``begin`` of ``port`` are all
    high (a burst's address taken, its last write word taken) to the first with ``end``
    high: a memory's latency as the cycle model takes it."""
    edge, taken = 0, None
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        edge += 1
        if taken is None and all(int(getattr(dut, f"{port}__{name}").value) for name in begin):
            taken = edge
        elif taken is not None and int(getattr(dut, f"{port}__{end}").value):
            return edge - taken


@cocotb.test()
async def engine_matches_golden(dut):
    config = load_config()
    program = Program.from_dict(config["program"])
    image = np.load(config["image"]).astype(np.uint8).tobytes()
    inputs = np.load(config["inputs"])
    engine = program.engine
    widths = {"program_write": 32, "act_write": engine.rows * engine.out_bits}
    external = config.get("weight_port") == "axi"
    if not external:
        widths["weight_write"] = 16 * engine.cols
    for name in (*widths, "start"):
        getattr(dut, name).value = 0
    dut.act_read.value = dut.acc_read.value = 0
    program_words, weights, _ = host_words(program, image, inputs[0])
    word, stride = image_word(engine), word_stride(image_word(engine))
    base = _external_memory(dut, config, weights, stride) if external else 0
    spills = any(isinstance(step, (LoadStep, StoreStep)) for step in program.steps)
    memory = _activation_memory(dut, program) if hasattr(dut, "act_base") else None
    await start_clock_and_reset(dut)
    measuring = cocotb.start_soon(_first_latency(
        dut, "axi", ("arvalid", "arready"), "rvalid")) if external else None
    act_read = cocotb.start_soon(_first_latency(
        dut, "act_axi", ("arvalid", "arready"), "rvalid")) if spills else None
    act_write = cocotb.start_soon(_first_latency(
        dut, "act_axi", ("wvalid", "wready", "wlast"), "bvalid")) if spills else None
    spill_bytes = [sum(s.dst.words(engine.rows) for s in program.steps
                       if isinstance(s, LoadStep)) * act_stride(engine),
                   sum(s.src.words(engine.rows) for s in program.steps
                       if isinstance(s, StoreStep)) * act_stride(engine)]
    await write_words(dut, "program_write", widths["program_write"], program_words)
    if not external:
        await write_words(dut, "weight_write", widths["weight_write"], weights)
    bytes_per_image = weight_words_read(program) * (stride if external else word)
    resets = 0
    if config.get("reset_after"):
        await _write_input(dut, program, host_words(program, image, inputs[0])[2], memory,
                           widths["act_write"])
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        for _ in range(config["reset_after"]):
            await RisingEdge(dut.clk)
        assert int(dut.busy.value), "the run ended before the reset"
        dut.rst.value = 1
        await RisingEdge(dut.clk)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        assert not int(dut.busy.value) and not int(dut.error.value)
        resets = 1
    cycles = []
    for k, x in enumerate(inputs):
        await _write_input(dut, program, host_words(program, image, x)[2], memory,
                           widths["act_write"])
        before = int(dut.weight_bytes_read.value)
        counters = ("act_bytes_read", "act_bytes_written") if spills else ()
        spilled = [int(getattr(dut, name).value) for name in counters]
        await _run(dut, 40 * (HEADER_CYCLES + sum(step_cycles(program, 50, 50, 50))) + 1000)
        latency = ((0 if config.get("memory_pauses") else measuring.result()) if external
                   else None)
        act_latencies = (act_read.result(), act_write.result()) if spills else (0, 0)
        model = HEADER_CYCLES + sum(step_cycles(program, latency, *act_latencies,
                                                weight_base=base))
        for name, was, want in zip(counters, spilled, spill_bytes):
            moved = (int(getattr(dut, name).value) - was) % (1 << 32)
            assert moved == want, f"image {k}: {name} moved {moved} bytes, the model {want}"
        assert not int(dut.error.value), f"image {k}: the engine refused the program"
        got = await read_output(dut, program)
        want = run_program(program, image, x)
        if not np.array_equal(got, want):
            first = tuple(np.argwhere(got != want)[0])
            raise AssertionError(f"image {k}: output {first} is {got[first]}, golden "
                                 f"{want[first]} (seed {config['seed']})")
        cycles.append(int(dut.cycles.value))
        if config.get("memory_pauses"):
            assert cycles[-1] >= model, f"image {k}: {cycles[-1]} cycles, below the model"
        else:
            assert cycles[-1] == model, (f"image {k}: {cycles[-1]} cycles, the model says "
                                         f"{model} (seed {config['seed']})")
        moved = (int(dut.weight_bytes_read.value) - before) % (1 << 32)
        assert moved == bytes_per_image, (f"image {k}: the weight memory moved {moved} "
                                          f"bytes, the model says {bytes_per_image}")
    write_report(config, {"images": len(inputs), "cycles": cycles, "model_cycles": model,
                          "memory_latency": latency, "weight_bytes_per_image": bytes_per_image,
                          "act_latencies": list(act_latencies), "spill_bytes": spill_bytes,
                          "resets": resets, "output": json.loads(json.dumps(
                              run_program(program, image, inputs[-1]).tolist()))})
