"""Board bitstreams through the command line: the systolic board top on an iCE40 board and
on the Colorlight (ECP5); the Ethernet bump's board top as planned for the Colorlight; and
the errors for boards, baud rates and designs that do not fit."""

import json
import re
from pathlib import Path

import pytest

from codnn.cli import main
from codnn.engines import BOARD_DESIGNS
from codnn.flows import ParameterError, run_bitstream
from codnn.hw.soc.board_top import uart_divisor
from codnn.synth.bitstream import BOARDS, board_plan
from codnn.synth.tools import SynthesisError

MODELS = Path(__file__).resolve().parent.parent / "benchmarks" / "models"


@pytest.mark.long
def test_icebreaker_bitstream_through_the_command_line(build_root, capsys):
    """The systolic board top on the iCE40; the ECP5 build is the Colorlight's below."""
    code = main(["bitstream", "--board", "icebreaker", "--rows", "2", "--cols", "2",
                 "--alpha", "2", "--depth", "8", "--baud", "1000000",
                 "--build-dir", str(build_root), "--json"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    report = json.loads(out)
    assert report["part"] == "iCE40UP5K-SG48" and report["clock_mhz"] == 12.0
    assert report["divisor"] == 12                      # 12 MHz / 1 Mbaud
    assert 0 < report["logic_cells"] < report["logic_cells_available"] == 5280
    assert report["dsp"] == 4 and report["ff"] is None  # one multiplier per cell
    assert report["io"] == 4                            # clock, rx, tx, LED
    assert report["meets_timing"] and report["fmax_mhz"] >= 12.0
    with open(report["bitstream"], "rb") as bitstream:
        data = bitstream.read()
    assert data.startswith(b"\xff\x00") and b"\x7e\xaa\x99\x7e" in data[:64]  # iCE40 sync
    assert len(data) > 100_000


@pytest.mark.long
def test_colorlight_bitstream(build_root, capsys):
    """An ECP5 board through the command line: the systolic board top on the Colorlight."""
    code = main(["bitstream", "--board", "colorlight-5a-75b", "--design", "systolic",
                 "--rows", "2", "--cols", "2", "--alpha", "2", "--depth", "8",
                 "--build-dir", str(build_root), "--json"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    report = json.loads(out)
    assert report["design"] == "systolic" and report["part"] == "LFE5U-25F-BG256"
    assert report["clock_mhz"] == 25.0 and report["divisor"] == 217   # 25 MHz / 115200
    assert report["io"] == 3                            # clock, rx, tx (no LED)
    assert report["meets_timing"] and 0 < report["ff"] < report["ff_available"]
    with open(report["bitstream"], "rb") as bitstream:
        data = bitstream.read()
    assert data.startswith(b"\xff\x00") and b"\xff\xff\xbd\xb3" in data[:512]
    assert len(data) > 100_000


def test_ethernet_bump_board_top_makes_and_constrains_its_clocks():
    """The Colorlight's default design, the bump in the wire, as its build plan hands it
    to the tools (placing and routing it takes minutes; docs/nic.md has the figures of
    `benchmarks/bitstreams.py --design ethernet_bump`): a PLL makes the 50 MHz core clock
    and the 125 MHz transmit clock from the 25 MHz oscillator, both RGMII receive clocks
    are constrained to 125 MHz, and every RGMII and UART pin is located; the Colorlight
    holds the compressing way (restore off)."""
    board = BOARDS["colorlight-5a-75b"]
    assert board.default_design == "ethernet_bump"
    design = BOARD_DESIGNS["ethernet_bump"]
    params = {**design.default_params(), **board.defaults_for("ethernet_bump")}
    assert params["restore"] is False
    _, plan, clock_hz, divisor = board_plan(
        lambda divisor: design.build(divisor=divisor, **params), board=board.name,
        top=design.top, clock_hz=design.clock_hz)
    assert (clock_hz, divisor) == (50e6, 434)
    lpf, il = plan.files["top.lpf"], plan.files["top.il"]
    frequencies = sorted(re.findall(r"^FREQUENCY (?:PORT|NET) \"(\w+)\S*\" ([\d.]+) HZ;",
                                    lpf, re.M))
    assert frequencies == [("clk25_0__io", "25000000.0"), ("rgmii0_rx_clk", "125000000.0"),
                           ("rgmii1_rx_clk", "125000000.0")]
    assert il.count("EHXPLLL") == 1 and "CLKOP_DIV" in il
    located = set(re.findall(r"^LOCATE COMP \"(\S+)\" SITE", lpf, re.M))
    rgmii = {f"eth_rgmii_pins_{port}__{pin}__io{bit}" for port in (0, 1)
             for pin, bits in (("tx_data", 4), ("tx_clk", 0), ("tx_ctl", 0), ("rx_data", 4),
                               ("rx_clk", 0), ("rx_ctl", 0))
             for bit in ([f"[{b}]" for b in range(bits)] if bits else [""])}
    assert len(rgmii) == 2 * 12
    assert rgmii | {"uart_0__rx__io", "uart_0__tx__io", "clk25_0__io"} <= located


def test_ethernet_bump_needs_two_ports(build_root, capsys):
    assert main(["bitstream", "--board", "icebreaker", "--design", "ethernet_bump",
                 "--build-dir", str(build_root)]) == 2
    assert "needs a board with 2 Ethernet ports, which icebreaker lacks" \
        in capsys.readouterr().err


@pytest.fixture(scope="module")
def lenet_4x4(tmp_path_factory):
    """The column-combined LeNet-5 compiled for a 4 x 4 array, alpha 4 (its buffers sized
    to the program), as docs/networks.md builds it (the default calibration: the netlist
    whose figures the docs give, placed and routed in 6 minutes)."""
    folder = tmp_path_factory.mktemp("lenet") / "program"
    assert main(["compile", str(MODELS / "lenet5_mnist_cc.onnx"), "--rows", "4", "--cols",
                 "4", "--alpha", "4", "--check", "2", "-o", str(folder)]) == 0
    return folder


@pytest.mark.long
def test_bitstream_of_a_compiled_program(lenet_4x4, build_root, capsys):
    """The network engine's board top for a compiled LeNet-5 on the ULX3S 85F: its
    parameters are the program's, the report gives cycles and images per second."""
    capsys.readouterr()
    code = main(["bitstream", "--board", "ulx3s-85f", "--program", str(lenet_4x4),
                 "--build-dir", str(build_root), "--json"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    report = json.loads(out)
    program = json.loads((lenet_4x4 / "program.json").read_text())
    compiled = json.loads((lenet_4x4 / "report.json").read_text())
    for name in ("rows", "cols", "alpha", "mac", "act_words", "acc_words", "psum_words"):
        assert report["parameters"][name] == program["engine"][name], name
    assert report["parameters"]["weight_words"] * 8 == program["weight_image_bytes"]
    assert report["cycles_per_image"] == compiled["cycles_per_image"]
    assert report["images_per_s"] == pytest.approx(25e6 / report["cycles_per_image"], 0.01)
    assert report["part"].startswith("LFE5U-85F") and 0 < report["bram"] <= 208
    with open(report["bitstream"], "rb") as bitstream:
        assert bitstream.read(2) == b"\xff\x00"


def test_program_bitstream_refuses_what_does_not_match(lenet_4x4, tmp_path, capsys,
                                                       build_root):
    """Engine parameters beside --program, a folder without a program, a weight image of
    another size, and an engine whose memories exceed the board's block RAMs are each
    refused in one line before anything is built."""
    cases = [(["--program", str(lenet_4x4), "--rows", "8"], "drop --rows"),
             (["--program", str(lenet_4x4), "--design", "nic"], "drop --design nic"),
             (["--program", str(tmp_path)], "has no program.json or weights.bin"),
             (["--program", str(lenet_4x4), "--board", "nosuch"], "Board must be one of")]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "program.json").write_text((lenet_4x4 / "program.json").read_text())
    (broken / "weights.bin").write_bytes((lenet_4x4 / "weights.bin").read_bytes()[:-1])
    cases.append((["--program", str(broken)], "its program's weight image is"))
    for argv, message in cases:
        board = [] if "--board" in argv else ["--board", "icebreaker"]
        capsys.readouterr()
        assert main(["bitstream", *board, *argv, "--build-dir", str(build_root)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert main(["bitstream", "--board", "icebreaker", "--program", str(lenet_4x4),
                 "--build-dir", str(build_root)]) == 2
    err = capsys.readouterr().err
    assert "block RAMs" in err and "iCEBreaker (iCE40 UP5K) has 30" in err, err


@pytest.mark.long
def test_design_too_big_for_the_board_names_boards_that_have_room(build_root):
    # 16 multipliers: 8 go to the DSP blocks, the rest and the memories overflow the UP5K.
    with pytest.raises(SynthesisError) as failure:
        run_bitstream("systolic", {"rows": 4, "cols": 4, "alpha": 2, "depth": 32},
                      board="icebreaker", build_root=build_root)
    message = str(failure.value)
    print(message)
    assert "design does not fit iCEBreaker" in message
    assert "boards with more: ice40-hx8k-evn (7680 logic cells)" in message
    assert "\n" not in message


@pytest.mark.parametrize("argv, message", [
    (["--board", "nosuch"], "Board must be one of icebreaker, ice40-hx8k-evn"),
    (["--board", "icebreaker", "--baud", "5000000"], "at most 3000000 baud"),
    (["--board", "ulx3s-85f", "--baud", "3200000"], "cannot be made from a 25 MHz clock"),
    (["--board", "icebreaker", "--rows", "0"], "Row count must be a positive integer"),
    (["--board", "icebreaker", "--depth", "70000"], "Depth must be at most 65535"),
    (["--board", "icebreaker", "--design", "nosuch"], "invalid choice: 'nosuch'"),
    (["--board", "icebreaker", "--design", "tq", "--weight-bits", "8"],
     "Design tq has no parameter 'weight_bits'"),
    (["--board", "icebreaker", "--design", "tq", "--g", "300"], "g must be at most 255"),
])
def test_bad_bitstream_arguments_exit_2(argv, message, capsys, build_root):
    assert main(["bitstream", *argv, "--build-dir", str(build_root)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unknown_design_and_parameter():
    with pytest.raises(ParameterError, match="Design must be one of systolic, tq"):
        run_bitstream("nosuch", {}, board="icebreaker")
    with pytest.raises(ParameterError, match="Design systolic has no parameter 'lanes'"):
        run_bitstream("systolic", {"lanes": 4}, board="icebreaker")


@pytest.mark.parametrize("clock_hz, baud, divisor", [
    (12e6, 115200, 104), (25e6, 115200, 217), (48e6, 115200, 417), (12e6, 3_000_000, 4)])
def test_uart_divisor(clock_hz, baud, divisor):
    assert uart_divisor(clock_hz, baud) == divisor
    assert abs(clock_hz / divisor - baud) / baud <= 0.02


def test_every_board_has_a_uart_and_a_led():
    """Every board has a UART, its LED (the Colorlight's shares the UART's pin: none) and
    the Ethernet ports it claims."""
    for board in BOARDS.values():
        platform = board.platform()
        platform.add_resources(list(board.extra_resources))
        assert platform.lookup("uart", 0) is not None
        assert board.led is None or platform.lookup(*board.led[:2]) is not None
        assert all(platform.lookup("eth_rgmii", port) for port in board.ethernet)
        assert platform.default_clk_frequency > 0
    assert BOARDS["colorlight-5a-75b"].led is None
    # The OrangeCrab builds the plain bitstream: its platform's DFU suffix step is gone.
    templates = BOARDS["orangecrab-25f"].platform().command_templates
    assert templates and not any("dfu-suffix" in template for template in templates)
