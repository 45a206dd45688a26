"""An IO harness that lets any component be placed and timed on a small package.

nextpnr-ice40 has no out-of-context mode, and a component's ports outnumber the pins of an
iCE40 UP5K. The harness feeds every input bit of the component from shift registers
clocked in through one pin (``sin``, while ``load`` is low; chains of at most ``CHAIN``
bits side by side, since yosys's topological sort recurses along a chain and the WASM
build runs out of stack on one of about 3000) and captures every output bit into a shift
register (parallel load when ``load`` is high, else shifting out through ``sout``). The
input chains' flip-flops have that enable so that yosys cannot merge them with the
component's registers that delay an input (a skew line: plain flip-flops fed by the same
bit), which would leave those out of the placed design. Every port of the
component then starts or ends at a flip-flop, as it would inside a larger design, so the
timing nextpnr reports is the component's own register-to-register timing plus at most one
LUT level on output paths. Resources are counted on the component alone, not on this.
"""

from amaranth.hdl import Cat, Elaboratable, Module, Signal, Value
from amaranth.lib.wiring import Flow

__all__ = ["IoHarness", "CHAIN"]

#: Longest input shift register (bits); longer inputs take several, all fed from ``sin``.
CHAIN = 1024


class IoHarness(Elaboratable):
    """Wrap ``component`` (a ``wiring.Component`` in the ``sync`` domain) behind 3 pins.

    Attributes
    ----------
    sin, load : Signal, inputs
    sout : Signal, output
    """

    def __init__(self, component):
        self.component = component
        self.sin = Signal()
        self.load = Signal()
        self.sout = Signal()

    @property
    def ports(self):
        return [self.sin, self.load, self.sout]

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.component
        inputs, outputs = [], []
        for _, member, value in dut.signature.flatten(dut):
            (inputs if member.flow == Flow.In else outputs).append(Value.cast(value))
        if inputs:
            in_width = sum(len(v) for v in inputs)
            shift_in = Signal(in_width, reset_less=True)
            with m.If(~self.load):
                for chain in (shift_in[start:start + CHAIN]
                              for start in range(0, in_width, CHAIN)):
                    m.d.sync += chain.eq(Cat(self.sin, chain[:-1]))
            m.d.comb += Cat(*inputs).eq(shift_in)
        if outputs:
            out_width = sum(len(v) for v in outputs)
            shift_out = Signal(out_width, reset_less=True)
            with m.If(self.load):
                m.d.sync += shift_out.eq(Cat(*outputs))
            with m.Else():
                m.d.sync += shift_out.eq(shift_out >> 1)
            m.d.comb += self.sout.eq(shift_out[0])
        return m
