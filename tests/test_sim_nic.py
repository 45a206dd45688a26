# amaranth: UnusedElaboratable=no
"""The NIC engines in cocotb (AXI4-Stream tops driven by cocotbext-axi) against
codnn.golden.inceptionn: every output byte, the error count of the bad messages, and the full
rate on compressible messages (the testbench asserts all three)."""

import pytest

from codnn.hw.nic import NIC_ENGINES, AxiStreamTop, RingLinks
from codnn.hw.nic.frame_path import FramePath
from codnn.sim.runner import simulate
#: Message sizes every configuration sends: empty, one value, around a block, a few beats.
EDGE_COUNTS = [0, 1, 7, 8, 9, 8 * 16 + 3, 1027]
#: The larger lane counts run in ``make test-long`` (the small ones hold the same logic).
LONG = pytest.mark.long


def _run(engine, lanes, *, simulator="verilator", seed, counts=EDGE_COUNTS, idle=0.3,
         backpressure=0.3, corrupt=True, **codec):
    config = {"engine": engine, "lanes": lanes, "counts": counts, "corrupt": corrupt,
              "idle": idle, "backpressure": backpressure, **codec}
    print(f"seed={seed} config={config}")
    top = AxiStreamTop(NIC_ENGINES[engine].component(lanes=lanes))
    # Named as the command line names it, so the compiled models are shared with
    # test_cli and the demo.
    return simulate(top, top=engine, testbench="codnn.sim.tb_nic", simulator=simulator,
                    config=config, seed=seed).report


@pytest.mark.parametrize("engine,lanes,bound_bits", [
    ("compressor", 1, 7), ("compressor", 4, 15), pytest.param("compressor", 16, 9, marks=LONG),
    ("decompressor", 1, 7), pytest.param("decompressor", 2, 12, marks=LONG),
    pytest.param("decompressor", 4, 15, marks=LONG),
    pytest.param("decompressor", 8, 10, marks=LONG),
    pytest.param("decompressor", 16, 9, marks=LONG),
])
def test_engine_with_stalls_and_bad_messages(engine, lanes, bound_bits):
    # The decompressor also gets 12 messages cut at random bytes and 12 of random bytes
    # after a good count, each output value checked against received_values.
    cuts = 12 if engine == "decompressor" else 0
    report = _run(engine, lanes, seed=31 + lanes, bound_bits=bound_bits, cuts=cuts)
    # (a garbage message may happen to be a good one; the cuts never are)
    assert (5 if engine == "decompressor" else 4) + cuts <= report["bad_messages"]
    assert report["bad_messages"] <= (5 if engine == "decompressor" else 4) + 2 * cuts
    assert report["values"] == sum(EDGE_COUNTS)


@pytest.mark.long
@pytest.mark.parametrize("engine", ["compressor", "decompressor"])
@pytest.mark.parametrize("lanes", [8, 16])
def test_full_rate_without_stalls(engine, lanes):
    # The testbench asserts no refused input (compressor) and no output gap (decompressor)
    # inside compressible messages; check that it saw real traffic.
    report = _run(engine, lanes, seed=41, idle=0.0, backpressure=0.0, counts=[4096] * 8,
                  corrupt=False)
    assert report["values"] == 8 * 4096 and report["ratio"] > 1.5


@pytest.mark.long
def test_loopback_many_values():
    """Compressor into decompressor: 36 000 values at 4 lanes, every byte checked (the
    16-lane engines are checked on their own above; a 16-lane loop took minutes to
    compile)."""
    report = _run("loopback", 4, seed=43, counts=[12_000] * 3, idle=0.1,
                  backpressure=0.1, corrupt=True)
    assert report["values"] == 36_000


@pytest.mark.parametrize("engine,lanes", [
    ("compressor", 4), pytest.param("decompressor", 2, marks=LONG)])
def test_icarus(engine, lanes, icarus):
    _run(engine, lanes, simulator=icarus, seed=47, counts=EDGE_COUNTS[:6])


@pytest.mark.parametrize("engine,lanes", [
    ("terngrad", 1), pytest.param("terngrad", 16, marks=LONG),
    ("terngrad_decoder", 1), pytest.param("terngrad_decoder", 2, marks=LONG),
    ("terngrad_decoder", 4),
    pytest.param("terngrad_decoder", 8, marks=LONG),
    pytest.param("terngrad_decoder", 16, marks=LONG),
    ("maxabs", 1), pytest.param("maxabs", 16, marks=LONG),
])
def test_terngrad_engines_with_stalls_and_bad_messages(engine, lanes):
    # The decoder also gets 12 messages cut at random bytes (at 8 lanes one cut a byte
    # into a beat's two code bytes lost that byte's values) and 12 of random bytes after
    # a good header, each output value checked against received_values.
    cuts = 12 if engine == "terngrad_decoder" else 0
    report = _run(engine, lanes, seed=51 + lanes, cuts=cuts)
    fixed = {"terngrad": 4, "maxabs": 4}.get(engine, 9)
    assert fixed + cuts <= report["bad_messages"] <= fixed + 2 * cuts


@pytest.mark.long
def test_terngrad_counter_wraps():
    """The seed an outside testbench found wrong: 0xFFFFFF00 with 600 values, so the
    counter wraps in the middle of a beat of 16 lanes."""
    _run("terngrad", 16, seed=57, codec_seed=0xFFFF_FF00, counts=[600, 3], corrupt=False)


@pytest.mark.long
def test_terngrad_huge_and_tiny_scalers():
    # Scalers far above and below the values exercise both saturated shifts of the exact
    # comparison (every code 0; every nonzero value kept).
    for seed, scaler in ((53, 1e30), (54, 1e-30)):
        _run("terngrad", 4, seed=seed, scaler=scaler, counts=[1000], corrupt=False)


@pytest.mark.parametrize("engine,lanes", [
    ("compressor", 4), pytest.param("decompressor", 8, marks=LONG),
    pytest.param("terngrad", 4, marks=LONG),
    pytest.param("terngrad_decoder", 8, marks=LONG)])
def test_bypass_passes_messages_unchanged(engine, lanes):
    _run(engine, lanes, seed=55, counts=[0, 9, 500], bypass=True)


@pytest.mark.long
def test_ring_of_links_equals_golden_ring(icarus):
    """The ring exchange with a compressor and a decompressor on every hop (3 nodes, an
    odd count, so chunks differ in size): every node's averaged gradient is
    codnn.golden.exchange's, bit for bit, under idle cycles and backpressure (sim/tb_ring.py;
    Icarus, since Verilator takes minutes to compile three loopbacks)."""
    nodes, lanes, simulator = 3, 2, icarus
    config = {"nodes": nodes, "lanes": lanes, "count": 151, "bound_bits": 7,
              "idle": 0.2, "backpressure": 0.2}
    print(f"seed=41 config={config}")
    report = simulate(RingLinks(nodes=nodes, lanes=lanes), top="ring_links",
                      testbench="codnn.sim.tb_ring", simulator=simulator, config=config,
                      seed=41).report
    assert len(report["step_cycles"]) == 2 * (nodes - 1) and report["cycles"] > 0


@pytest.mark.long
@pytest.mark.parametrize("direction, seed", [("compress", 51), ("decompress", 52)])
def test_frame_path_fuzzed_frames_equal_golden(direction, seed):
    """400 fuzzed frames each way through the frame path at 8 bytes per beat, with idle
    cycles and backpressure: every frame, flag and counter equal to
    codnn.golden.packets.frame_path, rewritten frames checked again by scapy
    (sim/tb_frame_path.py). Longer runs: codnn simulate framepath --frames N."""
    config = {"direction": direction, "width": 8, "max_frame": 2048, "bound_bits": 10,
              "frames": 400, "idle": 0.2, "backpressure": 0.2}
    print(f"seed={seed} config={config}")
    report = simulate(AxiStreamTop(FramePath(direction=direction, width=8)), top="framepath",
                      testbench="codnn.sim.tb_frame_path", config=config, seed=seed).report
    assert report["frames_in"] > 380 and report["scapy_checked"] > 100
    assert min(report[name] for name in ("passed", "changed", "dropped", "flagged")) > 5


@pytest.mark.long
@pytest.mark.parametrize("direction, seed", [("compress", 53), ("decompress", 54)])
def test_frame_path_byte_wide(direction, seed, icarus):
    """The 1 GbE width (a byte per beat) on Icarus, 80 fuzzed frames each way."""
    config = {"direction": direction, "width": 1, "max_frame": 2048, "bound_bits": 8,
              "frames": 80, "idle": 0.3, "backpressure": 0.3}
    print(f"seed={seed} config={config}")
    report = simulate(AxiStreamTop(FramePath(direction=direction, width=1)), top="framepath",
                      testbench="codnn.sim.tb_frame_path", simulator=icarus, config=config,
                      seed=seed).report
    assert report["changed"] > 10 and report["dropped"] > 0


def test_simulate_framepath_replays_a_capture(tmp_path, capsys, icarus):
    """codnn simulate framepath --pcap: a capture written by scapy through the RTL; the
    capture it writes equals codnn pcap's (the golden rule) frame for frame."""
    import json

    import numpy as np
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import ARP, Ether
    from scapy.packet import Raw
    from scapy.utils import wrpcap

    from codnn.cli import main
    from codnn.sim.pcapfile import read_frames, rewrite_pcap
    from codnn.sim.frame_fuzz import gradient_frame
    rng = np.random.default_rng(55)
    packets = [Ether(gradient_frame(rng, rng.normal(0, 0.01, n).astype("<f4")))
               for n in (3, 100, 250)]
    packets += [Ether() / IP() / UDP() / Raw(b"not a gradient"), Ether() / ARP()]
    capture, rtl, golden = tmp_path / "in.pcap", tmp_path / "rtl.pcap", tmp_path / "gold.pcap"
    wrpcap(str(capture), packets)
    assert main(["simulate", "framepath", "--pcap", str(capture), "--pcap-out", str(rtl),
                 "--sim", icarus, "--width", "4", "--seed", "55", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changed"] == 3 and report["passed"] == 2
    rewrite_pcap(capture, golden)
    assert read_frames(rtl) == read_frames(golden)


@pytest.mark.long
def test_ethernet_bump_between_two_rgmii_phys():
    """The bump in the wire between cocotbext-eth's RGMII PHY models (sim/tb_ethernet_bump):
    frames in on port 0 leave port 1 as golden compresses them (a frame with a bad FCS or
    rx_er leaves unchanged with a bad FCS), the compressed frames sent back in on port 1
    leave port 0 restored, and the counters read over the UART equal golden's counts."""
    from codnn.hw.soc.ethernet_bump import COUNTERS, EthernetBump
    config = {"bound_bits": 10, "divisor": 4, "frames": 4, "max_values": 80}
    print(f"seed=61 config={config}")
    report = simulate(EthernetBump(divisor=4), top="ethernet_bump",
                      testbench="codnn.sim.tb_ethernet_bump", config=config, seed=61).report
    counters = dict(zip(COUNTERS, report["counters"]))
    assert counters["changed"] == 4 and counters["received_bad"] == 2


def test_rice_compressor_with_stalls_bad_messages_and_a_wrapping_counter():
    # Stochastic rounding from the seed 0xFFFFFF00, so the draws' counter wraps inside
    # the 1027-value message; four lanes taken a value a cycle; the bad messages of the
    # value-taking engines (cut, too long, count 0 with values, a count too large).
    report = _run("rice_compressor", 4, seed=61, bound_bits=12, rounding=1,
                  codec_seed=0xFFFF_FF00)
    assert report["bad_messages"] == 4 and report["values"] == sum(EDGE_COUNTS)


def test_rice_decompressor_with_stalls_bad_and_cut_messages():
    # Messages coded with stochastic rounding at the bound 2**-12; the bad messages of
    # the decoders (cut, a nonzero value past the count, a parameter of 15, a reserved
    # settings bit, a wrong CRC, bytes past the end, no whole header, a count too large)
    # and 12 messages cut at random bytes and 12 of random bytes after a good header,
    # each held to codnn.golden.rice.received_values.
    report = _run("rice_decompressor", 2, seed=67, bound_bits=12, rounding=1, cuts=12)
    assert report["bad_messages"] >= 8 + 12
