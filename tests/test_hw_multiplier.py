"""``codnn.hw.common.multiplier.split_product`` as synthesized for the ECP5 (MULT18X18D
blocks with their input registers, simulated with sim/primitives/MULT18X18D.v under
Icarus) against its generic form and Python's product, value for value and cycle for
cycle."""

import random
import re
import subprocess

from amaranth.back import verilog
from amaranth.hdl import Elaboratable, Module, Signal, signed, unsigned

from codnn.hw.common.multiplier import SPLIT_PRODUCT_STEPS, split_product
from codnn.sim.runner import PRIMITIVE_MODELS
from codnn.sim.simulators import use_simulator
from codnn.synth.devices import get_device

SEED = 69


class _Both(Elaboratable):
    """The same product in both forms, side by side."""

    def __init__(self, a_shape, b_bits, platform):
        self.a, self.b = Signal(a_shape, name="a"), Signal(unsigned(b_bits), name="b")
        self.generic = Signal(len(self.a) + b_bits)
        self.dsp = Signal(len(self.a) + b_bits)
        self._platform = platform

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.generic.eq(split_product(m, self.a, self.b, "generic")),
            self.dsp.eq(split_product(m, self.a, self.b, "dsp", self._platform))]
        return m


def _vectors(rng, a_bits, a_signed, b_bits, count):
    low = -(1 << (a_bits - 1)) if a_signed else 0
    high = (1 << (a_bits - 1)) - 1 if a_signed else (1 << a_bits) - 1
    edges = [(low, (1 << b_bits) - 1), (high, (1 << b_bits) - 1), (low, 0), (-1 if a_signed
             else high, 1), (0, (1 << b_bits) - 1)]
    return edges + [(rng.randint(low, high), rng.randint(0, (1 << b_bits) - 1))
                    for _ in range(count - len(edges))]


def _testbench(vectors, a_bits, b_bits):
    """A Verilog testbench: a vector a cycle, each product checked ``SPLIT_PRODUCT_STEPS``
    cycles later against both forms and the expected value."""
    width = a_bits + b_bits
    lines = [f"module tb; reg clk = 0; reg [{a_bits - 1}:0] a; reg [{b_bits - 1}:0] b;",
             f"wire [{width - 1}:0] generic, dsp; integer bad = 0;",
             "top dut(.clk(clk), .rst(1'b0), .a(a), .b(b), .generic(generic), .dsp(dsp));",
             "initial begin"]
    steps = SPLIT_PRODUCT_STEPS
    for k in range(len(vectors) + steps):
        if k < len(vectors):
            a, b = vectors[k]
            lines.append(f"a = {a_bits}'d{a % (1 << a_bits)}; b = {b_bits}'d{b};")
        lines.append("#1 clk = 1; #1 clk = 0;")
        if k >= steps - 1 and k - steps + 1 < len(vectors):
            a, b = vectors[k - steps + 1]
            want = (a * b) % (1 << width)
            lines.append(f"if (generic !== {width}'d{want} || dsp !== {width}'d{want}) begin "
                         f"bad = bad + 1; $display(\"{a} * {b}: %d %d\", generic, dsp); end")
    lines += ["$display(\"mismatches %0d\", bad); $finish; end", "endmodule"]
    return "\n".join(lines)


def test_the_dsp_form_equals_the_generic_form(tmp_path):
    # The fused add's products: a 32-bit accumulator (signed) and a 24-bit multiplier,
    # and an unsigned 8-bit code; edges first (the extremes, -1, 0), then random.
    use_simulator("icarus")
    rng = random.Random(SEED)
    print(f"seed={SEED}")
    device = get_device("ecp5-85k")
    for a_bits, a_signed, b_bits in ((32, True, 24), (8, False, 24), (18, True, 17)):
        dut = _Both(signed(a_bits) if a_signed else unsigned(a_bits), b_bits, device)
        text = verilog.convert(dut, name="top", ports=[dut.a, dut.b, dut.generic, dut.dsp],
                               emit_src=False)
        blocks = len(re.findall(r"^\s*MULT18X18D\b", text, re.MULTILINE))
        assert blocks == -(-a_bits // 17) * -(-b_bits // 17)
        vectors = _vectors(rng, a_bits, a_signed, b_bits, 60)
        source = tmp_path / f"split_{a_bits}_{b_bits}.v"
        source.write_text(text + "\n" + (PRIMITIVE_MODELS / "MULT18X18D.v").read_text()
                          + "\n" + _testbench(vectors, a_bits, b_bits))
        binary = tmp_path / f"split_{a_bits}_{b_bits}.vvp"
        subprocess.run(["iverilog", "-g2012", "-o", str(binary), str(source)], check=True)
        out = subprocess.run(["vvp", "-n", str(binary)], capture_output=True, text=True,
                             check=True).stdout
        assert "mismatches 0" in out, out
