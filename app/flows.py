"""The flows behind the commands: generate, simulate, synthesize one engine configuration.

Each returns a plain dict (what ``--json`` prints and the tables show). The Verilog module of
an engine is named after the engine.
"""

import hashlib
import json
import re
from pathlib import Path

from enum import Enum

from amaranth.hdl import Shape, Value
from amaranth.lib import data
from amaranth.lib.wiring import Flow

from codnn.sim.runner import (
    PRIMITIVE_MODELS,
    default_build_root,
    primitives_in,
    simulate,
    write_verilog,
)
from codnn.synth.bitstream import BOARDS, build_bitstream, get_board
from codnn.synth.devices import get_device
from codnn.synth.flow import synthesize

from . import __version__
from .engines import BOARD_DESIGNS, get_engine

__all__ = ["ParameterError", "build_component", "generate", "run_simulation", "run_synthesis",
           "run_bitstream", "run_program_bitstream", "ports_of"]


class ParameterError(ValueError):
    """An engine or flow parameter is invalid; the message says which and why."""


def _full_params(what, defaults, params):
    """``defaults`` updated with ``params``; a ``ParameterError`` names an unknown one."""
    unknown = set(params) - set(defaults)
    if unknown:
        raise ParameterError(f"{what} has no parameter {sorted(unknown)[0]!r}; it takes "
                             f"{', '.join(defaults) or 'none'}")
    return {**defaults, **params}


def build_component(engine_name, params):
    """Return ``(engine, component, params)`` with defaults filled in.

    Raises
    ------
    ParameterError
        If the engine is unknown or a parameter is invalid (with the component's message).
    """
    try:
        engine = get_engine(engine_name)
    except ValueError as error:
        raise ParameterError(str(error)) from error
    full = _full_params(f"Engine {engine.name}", engine.default_params(), params)
    try:
        component = engine.build(**full)
    except (TypeError, ValueError) as error:
        raise ParameterError(str(error)) from error
    return engine, component, full


def _layout(shape):
    """How the bits of a port of ``shape`` are laid out: its width and, for a structure,
    each field's name, bit offset (from bit 0, the least significant) and layout; for an
    array, its length, the stride between elements and the element's layout; for an enum,
    its members' values; else whether it is signed."""
    if isinstance(shape, data.ArrayLayout):
        stride = shape.size // shape.length if shape.length else 0
        return {"width": shape.size, "array": {"length": shape.length, "stride": stride,
                                               "element": _layout(shape.elem_shape)}}
    if isinstance(shape, data.Layout):
        return {"width": shape.size,
                "fields": [{"name": name, "offset": field.offset, **_layout(field.shape)}
                           for name, field in shape]}
    if isinstance(shape, type) and issubclass(shape, Enum):
        return {"width": Shape.cast(shape).width,
                "enum": {member.name: member.value for member in shape}}
    cast = Shape.cast(shape)
    return {"width": cast.width, "signed": cast.signed}


def ports_of(component):
    """List the Verilog ports of a component: name, direction, width and the layout of
    its bits (``_layout``: every field with its offset), so that a Verilog user can drive
    it without reading Amaranth."""
    ports = [{"name": "clk", "direction": "input", "width": 1, "signed": False},
             {"name": "rst", "direction": "input", "width": 1, "signed": False}]
    for path, member, value in component.signature.flatten(component):
        shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
        ports.append({"name": "__".join(str(p) for p in path),
                      "direction": "input" if member.flow == Flow.In else "output",
                      **_layout(shape)})
    return ports


def _platform(device, dsp_blocks=None):
    """The Amaranth platform an engine is elaborated for: the ``Device`` (with at most
    ``dsp_blocks`` of its DSP blocks; None: all) or None."""
    if device is None:
        if dsp_blocks is not None:
            raise ParameterError("DSP blocks are a device's: give a device with them")
        return None
    try:
        return get_device(device).with_dsp_blocks(dsp_blocks)
    except ValueError as error:
        raise ParameterError(str(error)) from error


def generate(engine_name, params, out_dir, device=None, dsp_blocks=None, top_name=None):
    """Write ``<top>.v`` and ``manifest.json`` into ``out_dir``; return the manifest. The
    Verilog module is ``top_name`` (default the engine's name), so that two configurations
    of one engine can sit in one design. With ``device``, the Verilog is elaborated for it
    (it may instantiate the device's primitives, listed in the manifest; DSP blocks up to
    ``dsp_blocks``)."""
    if top_name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", top_name):
        raise ParameterError(f"Top module name must be a Verilog identifier, not {top_name!r}")
    engine, component, params = build_component(engine_name, params)
    platform = _platform(device, dsp_blocks)
    top = top_name or engine.name
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    verilog_path = out_dir / f"{top}.v"
    text = write_verilog(component, top, verilog_path, platform)
    primitives = primitives_in(text)
    for name in primitives:             # behavioural models, for the user's simulator
        (out_dir / f"{name}.v").write_text((PRIMITIVE_MODELS / f"{name}.v").read_text())
    manifest = {
        "engine": engine.name,
        "top": top,
        "verilog": verilog_path.name,
        "verilog_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "parameters": params,
        "device": device,
        "dsp_blocks": dsp_blocks,
        "primitives": primitives,
        "primitive_models": [f"{name}.v" for name in primitives],
        "ports": ports_of(component),
        "clock": "clk (rising edge)",
        "reset": "rst (synchronous, active high)",
        "latency_cycles": component.latency,
        "throughput": engine.throughput(component),
        "generator": f"codnn {__version__}",
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def run_simulation(engine_name, params, *, simulator="verilator", beats=1000, idle=0.2,
                   backpressure=0.2, seed=None, waves=False, build_root=None, sim_params=None,
                   device=None, dsp_blocks=None):
    """Simulate an engine against its golden model; return the run's figures. With
    ``device``, the engine as elaborated for it (its primitives through codnn's models;
    DSP blocks up to ``dsp_blocks``).

    Raises
    ------
    sim.runner.SimulationFailure
        If any output or cycle count differs from golden.
    """
    engine, component, params = build_component(engine_name, params)
    platform = _platform(device, dsp_blocks)
    if not isinstance(beats, int) or beats <= 0:
        raise ParameterError(f"Beat count must be a positive integer, not {beats!r}")
    for name, p in (("Idle", idle), ("Backpressure", backpressure)):
        if not 0 <= p < 1:
            raise ParameterError(f"{name} probability must lie in [0, 1), not {p!r}")
    sim = _full_params(f"Engine {engine.name}'s simulation",
                       {p.name: p.default for p in engine.sim_params}, sim_params or {})
    build_root = build_root or default_build_root()
    try:
        config = engine.tb_config(component, sim, beats, idle, backpressure, build_root)
    except (TypeError, ValueError) as error:
        raise ParameterError(str(error)) from error
    result = simulate(component, top=engine.name, testbench=engine.testbench, config=config,
                      simulator=simulator, waves=waves, seed=seed, build_root=build_root,
                      platform=platform)
    return {"engine": engine.name, "parameters": params, "workload": sim,
            "simulator": simulator, "device": device, "dsp_blocks": dsp_blocks,
            "result": "pass", "seed": result.seed,
            "idle": idle,
            "backpressure": backpressure, **result.report,
            "waves": str(result.waves) if result.waves else None,
            "run_dir": str(result.run_dir)}


def run_synthesis(engine_name, params, *, device, clock_mhz=None, dsp_blocks=None,
                  build_root=None, progress=None, seed=1):
    """Synthesize an engine on a device (with at most ``dsp_blocks`` of its DSP blocks,
    None: all; nextpnr's placement ``seed``); return the report as a dict (with the work
    per cycle, ``rate_per_cycle`` ``rate_unit``, and ``throughput_per_s`` at Fmax)."""
    engine, component, params = build_component(engine_name, params)
    if clock_mhz is not None and not clock_mhz > 0:
        raise ParameterError(f"Clock must be a positive frequency in MHz, not {clock_mhz!r}")
    _platform(device, dsp_blocks)
    report = synthesize(component, top=engine.name, device=device, clock_mhz=clock_mhz,
                        dsp_blocks=dsp_blocks, build_root=build_root or default_build_root(),
                        progress=progress, seed=seed)
    items, unit = engine.rate(component)
    return {"engine": engine.name, "parameters": params, **report.to_dict(), "seed": seed,
            "rate_per_cycle": items, "rate_unit": unit,
            "throughput_per_s": items * report.fmax_mhz * 1e6}


def run_bitstream(design_name, params, *, board, baud=115200, build_root=None, progress=None,
                  seed=1):
    """Build a board design's bitstream for ``board``; return the report as a dict.

    Raises
    ------
    ParameterError
        For an unknown design or board, a bad parameter, or a baud rate the board's clock
        cannot make.
    """
    if design_name not in BOARD_DESIGNS:
        raise ParameterError(f"Design must be one of {', '.join(BOARD_DESIGNS)}, "
                             f"not {design_name!r}")
    design = BOARD_DESIGNS[design_name]
    if board in BOARDS and len(BOARDS[board].ethernet) < design.ethernet_ports:
        raise ParameterError(f"Design {design_name} needs a board with "
                             f"{design.ethernet_ports} Ethernet ports, which {board} lacks")
    on_board = BOARDS[board].defaults_for(design_name) if board in BOARDS else {}
    full = _full_params(f"Design {design_name}", {**design.default_params(), **on_board},
                        params)
    try:
        report = build_bitstream(lambda divisor: design.build(divisor=divisor, **full),
                                 board=board, baud=baud,
                                 build_root=build_root or default_build_root(),
                                 progress=progress, top=design.top, clock_hz=design.clock_hz,
                                 seed=seed)
    except (TypeError, ValueError) as error:
        raise ParameterError(str(error)) from error
    return {"design": design_name, "parameters": full, **report.to_dict()}


def _compiled_folder(folder):
    """The program and weight image ``codnn compile`` wrote into ``folder``
    (``program.json``, ``weights.bin``); ``ParameterError`` for a folder that does not
    hold them, or holds a program whose image is not its size."""
    from codnn.golden.network_program import Program, ProgramError
    folder = Path(folder)
    files = [folder / "program.json", folder / "weights.bin"]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise ParameterError(f"{folder} has no {' or '.join(missing)}: give the folder "
                             f"codnn compile wrote (-o DIR)")
    try:
        program = Program.from_dict(json.loads(files[0].read_text()))
    except (ValueError, ProgramError) as error:
        raise ParameterError(f"{files[0]} is not a codnn program: {error}") from None
    image = files[1].read_bytes()
    if len(image) != program.weight_image_bytes:
        raise ParameterError(f"{files[1]} holds {len(image)} bytes; its program's weight "
                             f"image is {program.weight_image_bytes}")
    return program, image


def run_program_bitstream(folder, *, board, baud=115200, build_root=None, progress=None,
                          seed=1):
    """Build the bitstream of the network engine's board top sized for the program that
    ``codnn compile`` wrote into ``folder`` (``NetworkSoc.for_program``: its array and
    buffers the program's, its weights on chip), so that the two cannot differ; return
    the report: the board's resources and Fmax, the engine's parameters, its cycles per
    image (the program's cycle model) and images per second at the board's clock.

    Raises
    ------
    ParameterError
        For a folder without a program, an unknown board, a program that uses external
        activation memory (the board top has none), or an engine whose memories (its
        block RAMs estimated) exceed the board's.
    """
    from codnn.golden.network_program import HEADER_CYCLES, step_cycles
    from codnn.hw.network import NetworkEngine
    from codnn.hw.soc import NetworkSoc
    from codnn.synth.devices import memory_blocks
    program, _ = _compiled_folder(folder)
    try:
        spec = get_board(board)
    except ValueError as error:
        raise ParameterError(str(error)) from None
    if program.engine.spill_words:
        raise ParameterError("the program uses external activation memory (compiled with "
                             "--spill-words); the board top has none")
    params = NetworkEngine.program_params(program)
    blocks = memory_blocks(get_device(spec.device).family,
                           NetworkEngine.program_memories(program))
    if sum(blocks.values()) > spec.brams:
        biggest = max(blocks, key=blocks.get)
        raise ParameterError(
            f"the engine for this program needs about {sum(blocks.values())} block RAMs "
            f"({biggest} {blocks[biggest]}), {spec.title} has {spec.brams}: compile for a "
            f"smaller array (--rows, --cols) or a board with more")
    cycles = HEADER_CYCLES + sum(step_cycles(program))
    try:
        report = build_bitstream(
            lambda divisor: NetworkSoc.for_program(program, divisor=divisor), board=board,
            baud=baud, build_root=build_root or default_build_root(), progress=progress,
            seed=seed)
    except ValueError as error:                 # a baud rate the board's clock cannot make
        raise ParameterError(str(error)) from error
    return {"design": "network", "program": str(Path(folder) / "program.json"),
            "parameters": {name: params[name] for name in (
                "rows", "cols", "alpha", "mac", "act_words", "acc_words", "psum_words",
                "weight_words", "program_words", "gather_ports")},
            "bram_estimate": sum(blocks.values()), "cycles_per_image": cycles,
            "images_per_s": round(report.clock_mhz * 1e6 / cycles, 1),
            "images_per_s_at_fmax": round(report.fmax_mhz * 1e6 / cycles, 1),
            **report.to_dict()}
