"""``codnn demo --engines``: every engine's own flow, end to end.

For each engine: generate Verilog and a manifest, simulate against the golden model with
random idle cycles and backpressure (Verilator, and Icarus when installed), synthesize for
an iCE40 and an ECP5 device; then print one summary table. The systolic array runs a
magnitude-pruned layer packed by column combining (alpha 8, gamma 0.5) as tiles; the TQ
array a layer term-revealed in groups of 4 (alpha 6) with data truncated to 2 terms; the
gradient compressor real gradients (an MLP trained on scikit-learn's digits, dumped by
``benchmarks/gradient_dumps.py``) with bad messages between them. ``--quick`` runs fewer
beats on one simulator (Icarus when installed, else Verilator) and synthesizes only the
steps marked in ``DEMO_STEPS`` (the one-lane ``fmix32``, on both devices).
"""

from pathlib import Path

from codnn.sim.runner import default_build_root
from codnn.sim.simulators import SimulatorMissing, use_simulator

from .flows import generate, run_simulation, run_synthesis
from .render import console, err_console, print_rows

__all__ = ["DEMO_STEPS", "run_demo"]

#: The real gradients the demo sends through the compressor.
GRADIENTS = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / \
    "digits_mlp_gradients.npz"

#: (engine, parameters, simulation workload, beats (per tile), devices to synthesize for,
#: synthesize with --quick too)
DEMO_STEPS = [
    ("fmix32", {"lanes": 1}, {}, 4000, ("ice40-up5k", "ecp5-25k"), True),
    ("fmix32", {"lanes": 4}, {}, 4000, ("ecp5-25k",), False),
    ("systolic", {"rows": 4, "cols": 4, "alpha": 8, "out_bits": 8},
     {"layer_rows": 16, "layer_cols": 256, "sparsity": 0.8, "gamma": 0.5}, 32, ("ecp5-25k",),
     False),
    ("systolic", {"rows": 2, "cols": 4, "alpha": 8, "out_bits": 8},
     {"layer_rows": 6, "layer_cols": 64, "sparsity": 0.8, "gamma": 0.5}, 16, ("ice40-up5k",),
     False),
    ("tq", {"rows": 2, "cols": 2, "g": 4, "budget": 6, "beta": 2},
     {"layer_rows": 4, "layer_cols": 32}, 8, ("ice40-up5k",), False),
    ("compressor", {"lanes": 1}, {"gradients": str(GRADIENTS), "bound_bits": 10}, 1,
     ("ice40-hx8k",), False),
]


def _describe(params):
    return " ".join(f"{k}={v}" for k, v in params.items())


def _simulators(quick):
    """Verilator and Icarus; with ``quick`` one of them, Icarus when installed (it compiles
    in a second, where each Verilator model is a C++ build)."""
    try:
        use_simulator("icarus")
    except SimulatorMissing as missing:
        err_console.print(f"[yellow]skipping Icarus: {missing}[/yellow]")
        return ["verilator"]
    return ["icarus"] if quick else ["verilator", "icarus"]


def _sim_figures(report):
    w = report["workload"]
    if "groups" not in report and "tiles" in report:
        p = report["parameters"]
        return (f"{w['layer_rows']}x{w['layer_cols']} layer, groups of {p['g']} revealed "
                f"to {p['budget']} terms, data to {p['beta']}: {report['tiles']} tiles, "
                f"{report['beats']} vectors equal golden in {report['cycles']} cycles "
                f"(model {report['model_cycles_without_stalls']} without stalls)")
    if "tiles" in report:
        return (f"{w['layer_rows']}x{w['layer_cols']} layer at {w['sparsity']:.0%} sparsity: "
                f"{report['groups']} groups, {report['tiles']} tiles, {report['beats']} "
                f"vectors equal golden in {report['cycles']} cycles (model "
                f"{report['model_cycles_without_stalls']} without stalls), mapping "
                f"efficiency {report['mapping_efficiency']:.0%}")
    if "ratio" in report:
        return (f"{report['values']} real gradient values in {report['messages']} messages "
                f"({report['bad_messages']} of them bad): every byte equals golden, ratio "
                f"{report['ratio']:.2f}x at b={w['bound_bits']}")
    return (f"{report['values']} values equal golden in {report['cycles']} cycles "
            f"(20% idle/backpressure, seed {report['seed']})")


def run_demo(*, quick=False, build_root=None):
    """Run the demo, printing progress and the summary; return 0. A step that fails raises
    (``SimulationFailure``, ``SynthesisError``), which the command line reports."""
    build_root = Path(build_root or default_build_root())
    rows = []
    simulators = _simulators(quick)
    steps = [(engine, params, workload, beats, devices if synth_quick or not quick else ())
             for engine, params, workload, beats, devices, synth_quick in DEMO_STEPS]
    total = sum(1 + len(simulators) + len(step[-1]) for step in steps)
    done = 0

    def step(label):
        nonlocal done
        done += 1
        err_console.print(f"[{done}/{total}] {label}")

    for engine, params, workload, beats, devices in steps:
        beats = max(1, beats // 8) if quick else beats
        config = f"{engine} {_describe(params)}"
        out_dir = build_root / "demo" / f"{engine}-{_describe(params).replace(' ', '-')}"
        step(f"generate {config}")
        manifest = generate(engine, params, out_dir)
        rows.append({"step": "generate", "config": config, "result": "ok",
                     "figures": f"{out_dir / manifest['verilog']}, latency "
                                f"{manifest['latency_cycles']} cycles, "
                                f"{manifest['throughput']}"})
        for simulator in simulators:
            step(f"simulate {config} on {simulator} against golden")
            report = run_simulation(engine, params, simulator=simulator, beats=beats,
                                    seed=2026, build_root=build_root, sim_params=workload)
            rows.append({"step": f"simulate ({simulator})", "config": config,
                         "result": "PASS", "figures": _sim_figures(report)})
        for device in devices:
            step(f"synthesize {config} for {device}")
            synth = run_synthesis(engine, params, device=device, build_root=build_root)
            rows.append({"step": f"synth ({device})", "config": config, "result": "ok",
                         "figures": f"{synth['lut']} LUT, {synth['ff']} FF, {synth['dsp']} DSP,"
                                    f" Fmax {synth['fmax_mhz']:.1f} MHz"})
    print_rows("codnn demo summary", rows, [("step", "step"), ("config", "configuration"),
                                            ("result", "result"), ("figures", "figures")])
    console.print(f"artifacts under {build_root}")
    return 0
