# amaranth: UnusedElaboratable=no
"""The term-quantization units in cocotb against golden: every output beat, and the cycle
count without stalls (the testbench asserts both)."""

import pytest

from codnn.hw.tq import PMac, TermEncoder, TermLister, TermQuantArray, TermRevealer, TMac
from codnn.sim.runner import simulate


def _run(dut, unit, simulator, seed, *, stalls, **config):
    config = {"unit": unit, "mag_bits": dut.mag_bits, "idle": 0.3 if stalls else 0.0,
              "backpressure": 0.4 if stalls else 0.0, **config}
    print(f"seed={seed} config={config}")
    return simulate(dut, top=f"tq_{unit}", testbench="codnn.sim.tb_tq", simulator=simulator,
                    config=config, seed=seed).report


def _both(dut, unit, simulator, count, **config):
    """With stalls, then without (cycles == inputs + latency)."""
    stalled = _run(dut, unit, simulator, 21, stalls=True, **config)
    steady = _run(dut, unit, simulator, 22, stalls=False, **config)
    assert steady["cycles"] == steady["inputs"] + config["latency"]
    assert stalled["cycles"] > stalled["inputs"] + config["latency"]
    assert steady["outputs"] == count
    return steady


@pytest.mark.parametrize("encoding,lanes,mag_bits,simulator", [
    pytest.param("naf", 4, 7, "verilator", marks=pytest.mark.long),
    pytest.param("binary", 1, 7, "verilator", marks=pytest.mark.long),
    pytest.param("booth", 2, 5, "verilator", marks=pytest.mark.long),
    ("naf", 2, 10, "icarus"),
])
def test_term_encoder(encoding, lanes, mag_bits, simulator, request):
    if simulator == "icarus":
        request.getfixturevalue("icarus")
    dut = TermEncoder(lanes=lanes, mag_bits=mag_bits, encoding=encoding)
    _both(dut, "encoder", simulator, 600, lanes=lanes, encoding=encoding, beats=600,
          latency=dut.latency)


@pytest.mark.parametrize("lanes,group,budget,encoding,simulator", [
    pytest.param(4, 1, 3, "naf", "verilator",  # data: each value's top beta terms
                 marks=pytest.mark.long),
    pytest.param(4, 4, 6, "naf", "verilator",  # a group of 4 under a shared budget
                 marks=pytest.mark.long),
    (3, 3, 4, "binary", "icarus"),          # a group of 3 under a shared budget
])
def test_term_revealer(lanes, group, budget, encoding, simulator, request):
    if simulator == "icarus":
        request.getfixturevalue("icarus")
    dut = TermRevealer(lanes=lanes, group=group, budget=budget)
    # docs/semantics.md's vectors lead where they apply (binary, g=3, alpha=4).
    spec = [[67, 10, 81], [64, 3, 14], [-67, 10, -81]] if (group, budget) == (3, 4) else []
    _both(dut, "revealer", simulator, 500, lanes=lanes, group=group, budget=budget,
          encoding=encoding, beats=500, latency=dut.latency, first_groups=spec)


def test_term_lister():
    dut = TermLister(lanes=3, slots=3)
    _both(dut, "lister", "verilator", 500, lanes=3, slots=3, encoding="naf", beats=500,
          latency=dut.latency)


@pytest.mark.parametrize("alpha,beta,g,acc_bits,encoding", [
    (12, 3, 8, 32, "naf"), (4, 2, 3, 16, "binary"),
    pytest.param(1, 1, 1, 12, "booth", marks=pytest.mark.long),
])
def test_tmac(alpha, beta, g, acc_bits, encoding):
    dut = TMac(acc_bits=acc_bits)
    _both(dut, "tmac", "verilator", 150, alpha=alpha, beta=beta, g=g, acc_bits=acc_bits,
          encoding=encoding, groups=150, latency=dut.latency)


def test_pmac(icarus):
    for simulator in ("verilator", icarus):
        dut = PMac(acc_bits=24)
        _both(dut, "pmac", simulator, 200, g=8, acc_bits=24, groups=200, latency=dut.latency)


ARRAY_KEYS = ("rows", "cols", "g", "alpha", "beta", "mag_bits", "encoding", "acc_bits",
              "out_bits", "requant")


@pytest.mark.parametrize("config,simulator", [
    # a single tMAC cell, groups of 3, binary terms
    (dict(rows=1, cols=1, g=3, alpha=4, beta=2, encoding="binary", layer_rows=3,
          layer_cols=7), "verilator"),
    # non-square, NAF, output stage (a shift per output channel), several tiles with
    # partial sums chained
    (dict(rows=3, cols=2, g=4, alpha=6, beta=2, out_bits=8, shift=[10, 0, 31, 7, 12, 9, 3],
          layer_rows=7, layer_cols=29), "verilator"),
    # the output stage multiplying before it shifts, a multiplier and shift per channel
    (dict(rows=3, cols=2, g=4, alpha=6, beta=2, out_bits=8, requant="multiplier",
          shift=[22, 5, 40, 16, 0, 27, 30], multiplier=[65535, 1, 65535, 20000, 0, 3, 44444],
          layer_rows=7, layer_cols=29), "verilator"),
    # the paper's g=8, alpha=12, beta=3 on one cell, narrow accumulator (wraps), 5 tiles
    pytest.param(dict(rows=1, cols=1, g=8, alpha=12, beta=3, acc_bits=18, layer_rows=1,
                      layer_cols=40), "verilator", marks=pytest.mark.long),
    (dict(rows=2, cols=3, g=2, alpha=3, beta=1, encoding="booth", layer_rows=3,
          layer_cols=13), "icarus"),
    # more columns than a vector's slots: 3 column groups a cycle through the edge, the
    # last step padded; partial sums short enough to wait in registers
    pytest.param(dict(rows=2, cols=5, g=2, alpha=2, beta=1, mag_bits=3, layer_rows=3,
                      layer_cols=23), "verilator", marks=pytest.mark.long),
    # one weight term a group: a vector a cycle, every data term kept (NAF's most, 4)
    pytest.param(dict(rows=2, cols=3, g=3, alpha=1, beta=4, layer_rows=3, layer_cols=10),
                 "verilator", marks=pytest.mark.long),
])
def test_tq_array_equals_golden(config, simulator, request):
    if simulator == "icarus":
        request.getfixturevalue("icarus")
    config = {"mag_bits": 7, "encoding": "naf", "acc_bits": 32, "out_bits": None,
              "shift": 0, "requant": "shift", "vectors": 5, **config}
    dut = TermQuantArray(**{k: config[k] for k in ARRAY_KEYS})
    reports = []
    for seed, stalls in [(31, True), (32, False)]:
        run = {**config, "idle": 0.3 if stalls else 0.0,
               "backpressure": 0.4 if stalls else 0.0}
        print(f"seed={seed} config={run}")
        reports.append(simulate(dut, top="tq_array", testbench="codnn.sim.tb_tq_array",
                                simulator=simulator, config=run, seed=seed).report)
    stalled, steady = reports
    assert steady["cycles"] == steady["model_cycles_without_stalls"]
    # A vector takes alpha cycles, so stalls may cost nothing; but the backpressure
    # must have held results.
    assert stalled["cycles"] >= stalled["model_cycles_without_stalls"]
    assert stalled["results_held"] > 0 and steady["results_held"] == 0


def test_tq_array_reset_in_flight_then_a_fresh_layer():
    # Five rows (an output FIFO per row): a reset with the beats of two tiles in the
    # array and results in the FIFOs, then the whole layer again, every result and the
    # cycle count checked; the output stage multiplying by a multiplier per channel.
    config = {"rows": 5, "cols": 2, "g": 2, "alpha": 3, "beta": 1, "mag_bits": 7,
              "encoding": "naf", "acc_bits": 32, "out_bits": 8, "requant": "multiplier",
              "shift": [20, 22, 4, 30, 21, 19, 20, 3, 24, 18, 20],
              "multiplier": [16384, 20000, 1, 65535, 16384, 3000, 16384, 8, 16384, 40000,
                             16384], "layer_rows": 11,
              "layer_cols": 13, "vectors": 5, "reset_in_flight": 7}
    dut = TermQuantArray(**{k: config[k] for k in ARRAY_KEYS})
    for seed, stalls in [(33, False), (34, True)]:
        run = {**config, "idle": 0.3 if stalls else 0.0, "backpressure": 0.4 if stalls else 0.0}
        print(f"seed={seed} config={run}")
        report = simulate(dut, top="tq_array", testbench="codnn.sim.tb_tq_array",
                          config=run, seed=seed).report
        assert report["tiles"] >= 4
        if not stalls:
            assert report["cycles"] == report["model_cycles_without_stalls"]
