"""``codnn demo`` / ``make demo``: the main flow for every engine that exists, end to end.

For each engine: generate Verilog and a manifest, simulate against the golden model with
random idle cycles and backpressure (Verilator, and Icarus when installed), synthesize for
an iCE40 and an ECP5 device; then print one summary table.
"""

from pathlib import Path

from sim.runner import default_build_root
from sim.simulators import SimulatorMissing, use_simulator

from .flows import generate, run_simulation, run_synthesis
from .render import console, err_console, print_rows

__all__ = ["DEMO_STEPS", "run_demo"]

#: (engine, parameters, devices to synthesize for)
DEMO_STEPS = [
    ("fmix32", {"lanes": 1}, ("ice40-up5k", "ecp5-25k")),
    ("fmix32", {"lanes": 4}, ("ecp5-25k",)),
]


def _describe(params):
    return " ".join(f"{k}={v}" for k, v in params.items())


def _simulators(quick):
    if quick:
        return ["verilator"]
    try:
        use_simulator("icarus")
    except SimulatorMissing as missing:
        err_console.print(f"[yellow]skipping Icarus: {missing}[/yellow]")
        return ["verilator"]
    return ["verilator", "icarus"]


def run_demo(*, quick=False, build_root=None):
    """Run the demo; print progress and the summary. Returns the exit code (0 = all passed)."""
    build_root = Path(build_root or default_build_root())
    beats = 500 if quick else 4000
    rows = []
    total = sum(1 + len(_simulators(quick)) + len(devices) for _, _, devices in DEMO_STEPS)
    done = 0

    def step(label):
        nonlocal done
        done += 1
        err_console.print(f"[{done}/{total}] {label}")

    for engine, params, devices in DEMO_STEPS:
        config = f"{engine} {_describe(params)}"
        out_dir = build_root / "demo" / f"{engine}-{_describe(params).replace(' ', '-')}"
        step(f"generate {config}")
        manifest = generate(engine, params, out_dir)
        rows.append({"step": "generate", "config": config, "result": "ok",
                     "figures": f"{out_dir / manifest['verilog']}, latency "
                                f"{manifest['latency_cycles']} cycles, "
                                f"{manifest['throughput']}"})
        for simulator in _simulators(quick):
            step(f"simulate {config} on {simulator} against golden")
            report = run_simulation(engine, params, simulator=simulator, beats=beats,
                                    seed=2026, build_root=build_root)
            rows.append({"step": f"simulate ({simulator})", "config": config,
                         "result": "PASS",
                         "figures": f"{report['values']} values equal golden in "
                                    f"{report['cycles']} cycles (20% idle/backpressure, "
                                    f"seed {report['seed']})"})
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
