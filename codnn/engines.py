"""The engines the command line knows: how to build each one, its parameters, its testbench.

An ``Engine`` turns command-line parameters into an Amaranth component, names its Verilog
module, and says which cocotb testbench holds it against the golden model and with what
configuration. New engines register here and every command (generate, simulate, synth,
demo) picks them up.
"""

from dataclasses import dataclass

from hw.common.fmix32 import Fmix32Unit

__all__ = ["Param", "Engine", "ENGINES", "get_engine"]


@dataclass(frozen=True)
class Param:
    """One generator parameter of an engine, as a command-line option ``--name``."""

    name: str
    type: type
    default: object
    help: str


@dataclass(frozen=True)
class Engine:
    """An engine the command line can generate, simulate and synthesize.

    Attributes
    ----------
    name : str
    summary : str
    params : tuple of Param
    build : callable
        ``build(**params)`` returns the component; it validates the parameters.
    testbench : str
        cocotb test module that checks the component against golden.
    tb_config : callable
        ``tb_config(params, component, beats, idle, backpressure)`` returns the testbench's
        configuration.
    latency : callable
        ``latency(component)`` returns the latency in cycles.
    throughput : callable
        ``throughput(component)`` returns a description of the throughput.
    """

    name: str
    summary: str
    params: tuple
    build: object
    testbench: str
    tb_config: object
    latency: object
    throughput: object

    def default_params(self):
        return {p.name: p.default for p in self.params}


ENGINES = {engine.name: engine for engine in [
    Engine(
        name="fmix32",
        summary="pipelined counter-based hash fmix32 (TernGrad's random source)",
        params=(Param("lanes", int, 1, "values per beat"),),
        build=lambda lanes: Fmix32Unit(lanes=lanes),
        testbench="sim.tb_fmix32",
        tb_config=lambda params, dut, beats, idle, backpressure: {
            "lanes": dut.lanes, "beats": beats, "idle": idle,
            "backpressure": backpressure, "latency": dut.LATENCY},
        latency=lambda dut: dut.LATENCY,
        throughput=lambda dut: f"{dut.lanes} values/cycle",
    ),
]}


def get_engine(name):
    """Return the engine called ``name``.

    Raises
    ------
    ValueError
        If there is no such engine; the message lists the known ones.
    """
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"Engine must be one of {', '.join(ENGINES)}, not {name!r}") from None
