"""Run a compiled network on the network engine's RTL (``codnn.hw.network.NetworkEngine``,
cocotb on Verilator or Icarus): the program and the weight image loaded through the
engine's ports, then each input image from the host side alone, every output held
against ``codnn.golden.network_program.run_program`` and every run's cycles against the model
(``sim/tb_network_engine.py``)."""

import tempfile
from pathlib import Path

import numpy as np

__all__ = ["run_on_engine"]


def run_on_engine(compiled, inputs, *, simulator, build_root=None, seed=0,
                  weight_port="onchip"):
    """Run ``inputs`` (integer images, the program's input shape each) through the engine
    that ``compiled`` (a ``codnn.model.compile.CompiledNetwork``) was built for, its
    weight image on chip or (``weight_port="axi"``) in cocotbext-axi's AXI RAM, and its
    external activation memory (a program with ``spill_words``) in another; return the
    testbench's report (``images``, ``cycles`` per image, ``model_cycles``,
    ``memory_latency``, ``weight_bytes_per_image``, ``act_latencies``, ``spill_bytes``).

    Raises
    ------
    codnn.sim.runner.SimulationFailure
        If an output or a cycle count differs, with the image and the seed.
    """
    from codnn.hw.network import NetworkEngine
    from codnn.sim.runner import simulate
    with tempfile.TemporaryDirectory(prefix="codnn-engine-") as folder:
        folder = Path(folder)
        np.save(folder / "weights.npy", np.frombuffer(compiled.image, np.uint8))
        np.save(folder / "inputs.npy", np.asarray(inputs, dtype=np.int64))
        config = {"program": compiled.program.to_dict(), "image": str(folder / "weights.npy"),
                  "inputs": str(folder / "inputs.npy"), "weight_port": weight_port}
        return simulate(NetworkEngine.for_program(compiled.program, weight_port=weight_port),
                        top="network_engine",
                        testbench="codnn.sim.tb_network_engine", simulator=simulator,
                        config=config, seed=seed, build_root=build_root).report
