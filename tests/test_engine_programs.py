# amaranth: UnusedElaboratable=no
"""Malformed programs: every field of the header and of each step through its extremes
(0, 1, one either side of its value, the largest, one past the buffer), and weight
images whose tiles name lanes, selects or words the engine does not have. Golden
(``decode_program`` with the engine, then ``run_program``) refuses with one error type
naming the step and the field; the engine (sim/tb_engine_programs.py, Verilator)
refuses exactly the same programs with ``error``, runs the others equal to golden in
the model's cycles, and never stays busy past a bound."""

import dataclasses

import numpy as np
import pytest

from codnn.golden.network_program import (HEADER_CYCLES, EngineConfig, ProgramError,
                                          Region, bias_bytes, decode_program, encode_program,
                                          run_program, step_cycles)
from codnn.golden.program_format import HEADER_WORDS, STEP_WORDS
from codnn.golden.workloads import pooled_network, projection_network, residual_network
from codnn.hw.network import NetworkEngine
from codnn.model.compile import compile_network
from codnn.sim.runner import simulate
from codnn.sim.tb_engine_programs import golden_view

SEED = 20261206
ENGINE = EngineConfig(rows=4, cols=3, alpha=3, mac="parallel", act_words=400,
                      acc_words=80, psum_words=160)


@pytest.fixture(scope="module", params=["residual", "pooled", "projection"])
def compiled(request):
    """Every step kind (``residual_network``), layers with their pooling fused
    (``pooled_network``: maps of odd sides, the flags that say so), or an add of two
    accumulator operands and one fused into its layer (``projection_network``)."""
    workload = {"residual": residual_network, "pooled": pooled_network,
                "projection": projection_network}[request.param]
    return compile_network(workload(np.random.default_rng(SEED), alpha=2), ENGINE)


#: Each step kind's regions (their first words) and packed byte fields.
_REGIONS = {"layer": ((1, "src"), (4, "dst")), "pool": ((1, "src"), (4, "dst")),
            "add": ((1, "a"), (4, "b"), (7, "dst")), "load": ((1, "dst"),),
            "store": ((1, "src"),)}
_BYTE_FIELDS = {"layer": (12, 13), "pool": (7, 8)}


def _values(value, quick):
    """The values a 32-bit field takes: its extremes and its neighbours."""
    values = {0, value + 1} if quick else {
        0, 1, value - 1, value + 1, 0xFFFF, 0x1_0000, 0xFFFF_FFFF}
    return sorted(v & 0xFFFF_FFFF for v in values if v != value)


def mutants(program, quick=False):
    """Binary programs, each ``program``'s with one field changed."""
    base = np.frombuffer(encode_program(program), "<u4").astype(np.int64)
    R, e = program.engine.rows, program.engine
    out = []

    def put(j, value):
        words = base.copy()
        words[j] = value & 0xFFFF_FFFF
        if words[j] != base[j]:
            out.append(words.tolist())

    def region_edges(j, region, images, size):
        """A region's address on the last word that fits and one past it."""
        span = images * region.words(R)
        flags = int(base[j]) & ~0x1FFF_FFFF
        for addr in (size - span, size - span + 1):
            put(j, flags | max(addr, 0))

    for j in range(len(base)):
        for value in _values(int(base[j]), quick):
            put(j, value)
    for j in (2, 9, 10, 11, 14, 15, 16, 17):            # header counts and sizes
        put(j, int(base[j]) + (1 << 24 if j == 2 else -1))
    region_edges(3, program.input, program.images, e.act_words)
    sizes = {"act": e.act_words, "acc": e.acc_words}
    region_edges(6, program.output, program.images, sizes[program.output.memory])
    for k, step in enumerate(program.steps):
        at = HEADER_WORDS + k * STEP_WORDS
        word0 = int(base[at])
        for bit in range(8, 16):
            put(at, word0 ^ 1 << bit)
        if step.op == "layer" and step.add_b is not None:
            # A fused add's operand: its flag bits, and on the buffer's last words.
            for bit in (29, 30, 31):
                put(at + 16, int(base[at + 16]) ^ 1 << bit)
            region_edges(at + 16, Region("act", step.add_b, step.dst.shape), step.images,
                         e.act_words)
        for j, name in _REGIONS[step.op]:
            first = int(base[at + j])
            for bit in (29, 30, 31):
                put(at + j, first ^ 1 << bit)
            hw = int(base[at + j + 2])
            for value in (hw & 0xFFFF0000, hw & 0xFFFF, hw + 1, hw + (1 << 16)):
                put(at + j + 2, value)
            region = getattr(step, name)
            region_edges(at + j, region, getattr(step, "images", 1), sizes[region.memory])
        for j in _BYTE_FIELDS.get(step.op, ()):
            packed = int(base[at + j])
            for shift in (0, 8, 16, 24):
                field = packed >> shift & 0xFF
                for value in {0, 1, field + 1, 15, 16, 255} - {field}:
                    put(at + j, packed & ~(0xFF << shift) | (value & 0xFF) << shift)
    return out


def patches(compiled, quick=False):
    """Weight image edits ``(program 0, byte, value)``: each layer's first tile's first
    gather entry with a lane past the rows, no lane, its largest offset; its first cell's
    select past alpha; its first row block's first shift past the output stage."""
    e = compiled.program.engine
    out = []
    for step in compiled.program.steps:
        if step.op != "layer":
            continue
        table = step.weights + bias_bytes(e)
        cell = table + 4 * e.cols * e.alpha
        out += [(0, table + 2, e.rows), (0, table + 2, 0xFF), (0, table + 1, 0xFF),
                (0, cell + 1, e.alpha), (0, cell + 1, 0x80)]
        if step.output_stage:
            out.append((0, step.weights + 4 * e.rows, 32))
        if quick:
            break
    return out


def test_golden_refuses_with_one_error_type(compiled):
    """Every mutant is refused with a ProgramError naming where, or runs; nothing else
    is raised."""
    rng = np.random.default_rng(SEED)
    image = compiled.image
    words = HEADER_WORDS + STEP_WORDS * len(compiled.program.steps) + STEP_WORDS
    decided = {"refused": 0, "ran": 0}
    for mutant in mutants(compiled.program):
        try:
            decode_program(np.asarray(mutant, "<u4").tobytes(), engine=ENGINE)
        except ProgramError as error:
            assert str(error).startswith(("the header", "step ", "a program", "not a")), error
        view = golden_view(mutant + [0] * (words - len(mutant)), ENGINE, image, words, rng)
        decided["refused" if view is None else "ran"] += 1
    print(decided)
    assert decided["refused"] > 300 and decided["ran"] > 20


def test_golden_refuses_each_field_naming_it(compiled):
    program = compiled.program
    steps = list(program.steps)
    layer = next(k for k, s in enumerate(steps) if s.op == "layer" and s.col_blocks > 1)
    cases = [
        (dataclasses.replace(steps[layer], positions=0), f"step {layer} .*positions 0"),
        (dataclasses.replace(steps[layer], col_blocks=0), "column blocks 0"),
        (dataclasses.replace(steps[layer], filters=1000), "filters 1000"),
        (dataclasses.replace(steps[layer], stride=0), "stride 0"),
        (dataclasses.replace(steps[layer], weights=1 << 20), "are not whole words inside"),
        (dataclasses.replace(steps[layer], src=dataclasses.replace(
            steps[layer].src, addr=ENGINE.act_words)), "its src .* lies past the act"),
    ]
    for step, message in cases:
        edited = dataclasses.replace(program, steps=tuple(
            step if k == layer else s for k, s in enumerate(steps)))
        with pytest.raises(ProgramError, match=message):
            run_program(edited, compiled.image, np.zeros(program.input.shape, np.int64))
    with pytest.raises(ProgramError, match="a weight image of 131080 bytes"):
        run_program(dataclasses.replace(program, weight_image_bytes=131_080),
                    compiled.image, np.zeros(program.input.shape, np.int64))


def _engine_decides(compiled, programs, patches_, tmp_path):
    engine = dataclasses.replace(ENGINE, weight_bytes=len(compiled.image))
    program_words = HEADER_WORDS + STEP_WORDS * (len(compiled.program.steps) + 1)
    np.save(tmp_path / "image.npy", np.frombuffer(compiled.image, np.uint8))
    dut = NetworkEngine(rows=ENGINE.rows, cols=ENGINE.cols, alpha=ENGINE.alpha,
                        mac=ENGINE.mac, act_words=ENGINE.act_words,
                        acc_words=ENGINE.acc_words, psum_words=ENGINE.psum_words,
                        weight_words=len(compiled.image) // (2 * ENGINE.cols),
                        program_words=program_words)
    limit = 4 * (HEADER_CYCLES + sum(step_cycles(compiled.program))) + 2000
    np.save(tmp_path / "programs.npy", np.asarray(programs, np.uint32))
    config = {"engine": dataclasses.asdict(engine), "image": str(tmp_path / "image.npy"),
              "programs": str(tmp_path / "programs.npy"), "patches": patches_,
              "program_words": program_words, "limit": limit}
    print(f"seed={SEED} programs={len(programs)} patches={len(patches_)}")
    return simulate(dut, top="network_engine", testbench="codnn.sim.tb_engine_programs",
                    simulator="verilator", config=config, seed=SEED).report


def test_engine_decides_as_golden(compiled, tmp_path):
    """Each field at 0, one past its value, its largest and one past its buffer, and
    the weight image edits, on Verilator."""
    programs = [np.frombuffer(encode_program(compiled.program), "<u4").tolist()]
    programs += mutants(compiled.program, quick=True)
    report = _engine_decides(compiled, programs, patches(compiled, quick=True), tmp_path)
    print(report)
    assert report["refused"] > 100 and report["ran"] > 10


@pytest.mark.long
def test_engine_decides_as_golden_on_every_mutant(compiled, tmp_path):
    programs = [np.frombuffer(encode_program(compiled.program), "<u4").tolist()]
    programs += mutants(compiled.program)
    report = _engine_decides(compiled, programs, patches(compiled), tmp_path)
    print(report)
    assert report["refused"] > 300
