"""The NIC engines, one descriptor each: everything the rest of codnn needs to know of an
engine beside its class. The host protocol's port table, the board tops, the command
line, the golden model a testbench holds an engine against and the testbench's checks all
read these, so that a new engine is its class, its line here and its baseline entries."""

from dataclasses import dataclass

from amaranth.hdl import Shape
from amaranth.lib.wiring import Flow

from codnn.hw.nic.compressor import InceptionnCompressor
from codnn.hw.nic.decompressor import InceptionnDecompressor
from codnn.hw.nic.loopback import CodecLoopback
from codnn.hw.nic.maxabs import MaxAbs
from codnn.hw.nic.rice_compressor import RiceCompressor
from codnn.hw.nic.rice_decompressor import RiceDecompressor
from codnn.hw.nic.rice_loopback import RiceLoopback
from codnn.hw.nic.terngrad import TernGradDecoder, TernGradEncoder

__all__ = ["NicDescriptor", "NIC_ENGINES"]


@dataclass(frozen=True)
class NicDescriptor:
    """A NIC engine as the rest of codnn sees it.

    Attributes
    ----------
    name : str
        The command line's and the board tops' name.
    component : type
        Its ``codnn.hw.nic.engine_base.NicEngineBase`` class (``component.PORTS``: its settings and
        reports).
    summary : str
        One line for ``--help`` and reports.
    codec : str
        The golden model it is held against (``codnn.golden.value_frames.NicCodec``):
        ``"inceptionn"``, ``"terngrad"``, ``"maxabs"`` or ``"rice"``.
    takes, gives : str
        What its input and output messages are: ``"values"`` (value messages),
        ``"codec"`` (the codec's messages) or, for ``gives``, ``"scaler"`` (one float32).
    full_rate : str
        Its steady-state rate, ``{lanes}`` standing for its lane count.
    """

    name: str
    component: type
    summary: str
    codec: str
    takes: str
    gives: str
    full_rate: str

    @property
    def settings(self):
        """``(name, bits, reset value)`` of each input port beside the streams, in order."""
        return tuple((name, Shape.cast(member.shape).width, member.init or 0)
                     for name, member in self.component.PORTS.items()
                     if member.flow == Flow.In)

    @property
    def reports(self):
        """``(name, bits)`` of each output port beside the streams, in order."""
        return tuple((name, Shape.cast(member.shape).width)
                     for name, member in self.component.PORTS.items()
                     if member.flow == Flow.Out)

    def has(self, port):
        """True when the engine has the port ``port`` (``"bypass"``, ``"nonfinite"``...)."""
        return port in self.component.PORTS


#: The engines by name; the order is the host protocol's ``kind`` index.
NIC_ENGINES = {engine.name: engine for engine in [
    NicDescriptor("compressor", InceptionnCompressor,
              "INCEPTIONN-style gradient compressor, AXI4-Stream", "inceptionn", "values",
              "codec", "1 beat ({lanes} float32)/cycle while the compressed data fits the "
              "output"),
    NicDescriptor("decompressor", InceptionnDecompressor,
              "INCEPTIONN-style gradient decompressor, AXI4-Stream", "inceptionn", "codec",
              "values", "{lanes} float32/cycle while the input keeps up"),
    NicDescriptor("loopback", CodecLoopback,
              "compressor into decompressor (round trip), AXI4-Stream", "inceptionn",
              "values", "values", "{lanes} float32/cycle"),
    NicDescriptor("terngrad", TernGradEncoder,
              "TernGrad encoder (counter-based random numbers, 2-bit codes), AXI4-Stream",
              "terngrad", "values", "codec", "1 beat ({lanes} float32)/cycle"),
    NicDescriptor("terngrad_decoder", TernGradDecoder, "TernGrad decoder, AXI4-Stream",
              "terngrad", "codec", "values", "{lanes} float32/cycle"),
    NicDescriptor("maxabs", MaxAbs, "max|g| of each message (the TernGrad scaler), AXI4-Stream",
              "maxabs", "values", "scaler", "1 beat ({lanes} float32)/cycle"),
    NicDescriptor("rice_compressor", RiceCompressor,
              "Rice-coded error-bounded gradient compressor, AXI4-Stream", "rice", "values",
              "codec", "1 float32/cycle less one per block of 16, while codes average at "
              "most 32 bits a value"),
    NicDescriptor("rice_decompressor", RiceDecompressor,
              "Rice-coded error-bounded gradient decompressor, AXI4-Stream", "rice", "codec",
              "values", "1 float32/cycle while the input keeps up"),
    NicDescriptor("rice_loopback", RiceLoopback,
              "Rice compressor into decompressor (round trip), AXI4-Stream", "rice",
              "values", "values", "1 float32/cycle at best: the slower of the two engines"),
]}
