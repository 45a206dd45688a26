"""cocotb testbench: the network engine (``codnn.hw.network.NetworkEngine``) against
golden's decision on malformed programs and weight images.

Configuration (``CODNN_TB_CONFIG``): ``engine`` (the engine's ``EngineConfig`` as a
dict, its weight memory's bytes and external memory's words included), ``image`` (the
weight image, an ``.npy`` of its bytes, written once), ``programs`` (binary programs of
one length, an ``.npy`` of u32 words, a program a row), ``program_words`` (the engine's
program memory), ``limit`` (the most cycles a run may take) and ``patches`` (weight
image edits, each ``[program index, byte offset, byte]``: the run of that program with
that byte changed).

For each program (and each patch) the testbench writes the program memory in full (the
program, zeros after it), an input for the input region the program names, pulses
``start`` and waits for ``busy`` to fall. Golden's decision is the engine's view: the
header and the step descriptors its count names, on this engine
(``decode_program(..., engine=...)``), then ``run_program`` (which refuses what a tile's
part of the image may not hold; the engine flags those and runs on). A program golden
refuses must end with ``error`` high;
one it runs must end with ``error`` low in the model's cycles (the first program, the
unchanged one, with every output value equal: a changed one may read words no step
wrote, which golden takes as 0 and the engine as what the last run left). No run may
take more than ``limit`` cycles.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer

from codnn.golden.network_program import (HEADER_CYCLES, EngineConfig, ProgramError,
                                          decode_program, host_words, image_word,
                                          run_program, step_cycles)
from codnn.golden.program_format import HEADER_WORDS, STEP_WORDS

from codnn.sim.tb_network_engine import read_output, write_words
from codnn.sim.testbench import load_config, start_clock_and_reset, write_report


def golden_view(words, engine, image, program_words, rng):
    """What golden says the engine does with program memory ``words``: ``(program, x,
    output, cycles)`` for a program it runs, or None for one it refuses."""
    count = int(words[2]) & 0xFF_FFFF
    length = HEADER_WORDS + count * STEP_WORDS
    if length > program_words:
        return None
    try:
        program = decode_program(np.asarray(words[:length], "<u4").tobytes(), engine=engine)
        x = rng.integers(0, 1 << engine.out_bits, (program.images, *program.input.shape)
                         if program.images > 1 else program.input.shape)
        used = image[:program.weight_image_bytes]
        return program, x, run_program(program, used, x), HEADER_CYCLES + sum(
            step_cycles(program))
    except ProgramError:
        return None


@cocotb.test()
async def engine_decides_as_golden(dut):
    config = load_config()
    engine = EngineConfig(**config["engine"])
    image = np.load(config["image"]).astype(np.uint8).tobytes()
    program_words, limit = config["program_words"], config["limit"]
    rng = np.random.default_rng(config["seed"])
    widths = {"program_write": 32, "act_write": engine.rows * engine.out_bits,
              "weight_write": 16 * engine.cols}
    for name in (*widths, "start"):
        getattr(dut, name).value = 0
    dut.act_read.value = dut.acc_read.value = 0
    await start_clock_and_reset(dut)
    word = image_word(engine)
    weights = [(k, int.from_bytes(image[k * word:(k + 1) * word], "little"))
               for k in range(len(image) // word)]
    await write_words(dut, "weight_write", widths["weight_write"], weights)
    programs = np.load(config["programs"]).astype(np.int64).tolist()
    runs = [(k, words, None) for k, words in enumerate(programs)]
    runs += [(k, programs[k], (offset, value)) for k, offset, value in config["patches"]]
    refused = ran = 0
    for k, words, patch in runs:
        words = list(words) + [0] * (program_words - len(words))
        edited = bytearray(image)
        if patch:
            edited[patch[0]] = patch[1]
            at = patch[0] // word
            await write_words(dut, "weight_write", widths["weight_write"],
                         [(at, int.from_bytes(edited[at * word:(at + 1) * word], "little"))])
        view = golden_view(words, engine, bytes(edited), program_words, rng)
        await write_words(dut, "program_write", 32, list(enumerate(words)))
        if view:                            # golden takes the input in the activations
            program, x, want, model = view
            await write_words(dut, "act_write", widths["act_write"],
                         host_words(program, bytes(edited), x)[2])
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await RisingEdge(dut.clk)
        if int(dut.busy.value):
            ended = FallingEdge(dut.busy)
            if await First(ended, Timer(10 * limit, "ns")) is not ended:   # 10 ns clock
                raise AssertionError(f"program {k} {patch}: still busy after {limit} cycles")
        await RisingEdge(dut.clk)
        what = f"program {k}" + (f", image byte {patch[0]} = {patch[1]}" if patch else "")
        if view is None:
            assert int(dut.error.value), f"{what}: golden refuses it, the engine ran it"
            refused += 1
        else:
            assert not int(dut.error.value), f"{what}: golden runs it, the engine refused it"
            if k == 0 and not patch:        # a mutant may read what no step wrote
                got = await read_output(dut, program)
                assert np.array_equal(got, want), f"{what}: the output differs from golden"
            assert int(dut.cycles.value) == model, (f"{what}: {int(dut.cycles.value)} cycles, "
                                                    f"the model {model}")
            ran += 1
        if patch:
            at = patch[0] // word
            await write_words(dut, "weight_write", widths["weight_write"],
                         [(at, int.from_bytes(image[at * word:(at + 1) * word], "little"))])
    write_report(config, {"programs": len(runs), "refused": refused, "ran": ran})
