"""The bump in the wire on an ECP5 board with two RGMII Gigabit ports: a PLL makes the
ports' 125 MHz clock, its quarter-period-late copy and the 50 MHz core clock from the
board's clock; the ports' pins go to ``EthernetBump``."""

from fractions import Fraction

from amaranth.hdl import (ClockDomain, ClockSignal, Const, Elaboratable, Instance, Module,
                          ResetSignal, Signal)
from amaranth.build import Attrs, Resource
from amaranth.lib import io

from codnn.hw.soc.board_top import connect_uart_and_led

__all__ = ["EthernetBoardTop", "PORT_CLOCK_HZ", "CORE_CLOCK_HZ", "pll_dividers"]

PORT_CLOCK_HZ = 125_000_000
#: The frame paths' clock: 4 bytes a beat at 50 MHz is 1.6 times Gigabit line rate.
CORE_CLOCK_HZ = 50_000_000
_CORE_DIVIDER = 10
#: The ECP5 PLL's VCO range (Hz) and the port clock's divider from it (VCO 500 MHz: a VCO
#: period is the quarter period of the port clock).
_VCO = (400e6, 800e6)
#: The slowest phase detector input it takes (Hz).
_PFD_MIN = 3.125e6
_OUTPUT_DIVIDER = 4


def pll_dividers(input_hz, output_hz=PORT_CLOCK_HZ):
    """``(CLKI_DIV, CLKFB_DIV)`` of an ECP5 ``EHXPLLL`` making ``output_hz`` exactly from
    ``input_hz`` with the output divider 4 (VCO 500 MHz at 125 MHz out), the phase
    detector at 3.125 MHz or more.

    Raises
    ------
    ValueError
        If no pair of dividers (1..128) makes it exactly so.
    """
    if not _VCO[0] <= output_hz * _OUTPUT_DIVIDER <= _VCO[1]:
        raise ValueError(f"{output_hz / 1e6:g} MHz is outside the PLL's range here")
    ratio = Fraction(int(output_hz), int(input_hz))
    for input_div in range(1, 129):
        feedback = ratio * input_div
        if feedback.denominator == 1 and 1 <= feedback <= 128 \
                and input_hz / input_div >= _PFD_MIN:
            return input_div, int(feedback)
    raise ValueError(f"The PLL cannot make {output_hz / 1e6:g} MHz from "
                     f"{input_hz / 1e6:g} MHz exactly")


def _port_pins(platform, port, resets):
    """The data and clock pins of the board's ``eth_rgmii`` ``port`` and its PHY's reset
    pin (None if an earlier port's PHY reset is the same pin): requested as resources of
    their own, since a board's ports may share MDIO and reset pins."""
    resource = platform.lookup("eth_rgmii", port)
    subsignals = {subsignal.name: subsignal for subsignal in resource.ios}
    attrs = Attrs(**resource.attrs)
    data = [subsignals[name] for name in subsignals if name not in ("rst", "mdc", "mdio")]
    platform.add_resources([Resource("eth_rgmii_pins", port, *data, attrs)])
    pins = platform.request("eth_rgmii_pins", port, dir="-")
    reset_pins = subsignals["rst"].ios[0]
    key = tuple(reset_pins.names)
    if key in resets:
        return pins, None
    resets[key] = number = len(resets)
    platform.add_resources([Resource("eth_phy_reset", number, reset_pins, attrs)])
    return pins, platform.request("eth_phy_reset", number, dir="-")


class EthernetBoardTop(Elaboratable):
    """``design`` (an ``EthernetBump``) on a board: its ``sync`` domain at 125 MHz,
    ``sync90`` a quarter period later (2 ns) and ``core`` at 50 MHz from an ``EHXPLLL``
    fed by the board's default clock, all held in reset until the PLL locks; the PHYs
    held in reset until then too (MDIO unused: the PHYs' strapped defaults, 1 Gb/s with
    autonegotiation).
    ``ports`` names the board's two ``eth_rgmii`` resources (their numbers); the UART
    carries the counter report, ``led`` (a resource, number and subsignal, or None)
    shows ``busy``.
    """

    def __init__(self, design, *, ports=(0, 1), led=None):
        self.design, self.ports, self.led = design, ports, led

    def elaborate(self, platform):
        m = Module()
        m.submodules.design = design = self.design
        clock = platform.request(platform.default_clk, dir="-")
        m.submodules.clock_in = clock_in = io.Buffer("i", clock)
        input_div, feedback_div = pll_dividers(platform.default_clk_frequency)
        port, late, core, locked = Signal(), Signal(), Signal(), Signal()
        # CLKOP_CPHASE = divider - 1 puts CLKOP at 0 degrees; CLKOS one VCO period (2 ns)
        # later: 90 degrees at 125 MHz; CLKOS2 divides the VCO (500 MHz) by 10.
        m.submodules.pll = Instance(
            "EHXPLLL",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD", p_CLKI_DIV=input_div,
            p_CLKFB_DIV=feedback_div, p_FEEDBK_PATH="CLKOP",
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=_OUTPUT_DIVIDER,
            p_CLKOP_CPHASE=_OUTPUT_DIVIDER - 1, p_CLKOP_FPHASE=0,
            p_CLKOS_ENABLE="ENABLED", p_CLKOS_DIV=_OUTPUT_DIVIDER,
            p_CLKOS_CPHASE=_OUTPUT_DIVIDER, p_CLKOS_FPHASE=0,
            p_CLKOS2_ENABLE="ENABLED", p_CLKOS2_DIV=_CORE_DIVIDER,
            p_CLKOS2_CPHASE=_CORE_DIVIDER - 1, p_CLKOS2_FPHASE=0,
            a_FREQUENCY_PIN_CLKI=f"{platform.default_clk_frequency / 1e6:g}",
            a_FREQUENCY_PIN_CLKOP=f"{PORT_CLOCK_HZ / 1e6:g}",
            a_FREQUENCY_PIN_CLKOS=f"{PORT_CLOCK_HZ / 1e6:g}",
            a_FREQUENCY_PIN_CLKOS2=f"{CORE_CLOCK_HZ / 1e6:g}",
            i_CLKI=clock_in.i, i_CLKFB=port, i_RST=Const(0), i_STDBY=Const(0),
            i_PHASESEL0=Const(0), i_PHASESEL1=Const(0), i_PHASEDIR=Const(1),
            i_PHASESTEP=Const(1), i_PHASELOADREG=Const(1), i_PLLWAKESYNC=Const(0),
            i_ENCLKOP=Const(0), o_CLKOP=port, o_CLKOS=late, o_CLKOS2=core, o_LOCK=locked)
        for name, source in (("sync", port), ("sync90", late), ("core", core)):
            m.domains += ClockDomain(name)
            m.d.comb += [ClockSignal(name).eq(source), ResetSignal(name).eq(~locked)]

        resets = {}                             # PHY reset pins, each once (the
        for number, port in enumerate(self.ports):  # Colorlight's PHYs share theirs)
            pins, reset = _port_pins(platform, port, resets)
            prefix = f"rgmii{number}_"

            def buffer(kind, *names):
                name = next(name for name in names if hasattr(pins, name))
                m.submodules[prefix + name] = buf = io.Buffer(kind, getattr(pins, name))
                return buf

            for ours, theirs, kind in (("txd", ("tx_data",), "o"), ("tx_clk", ("tx_clk",), "o"),
                                       ("tx_ctl", ("tx_ctl", "tx_ctrl"), "o"),
                                       ("rxd", ("rx_data",), "i"),
                                       ("rx_ctl", ("rx_ctl", "rx_ctrl"), "i")):
                buf = buffer(kind, *theirs)
                if kind == "o":
                    m.d.comb += buf.o.eq(getattr(design, prefix + ours))
                else:
                    m.d.comb += getattr(design, prefix + ours).eq(buf.i)
            rx_clk = buffer("i", "rx_clk")
            platform.add_clock_constraint(rx_clk.i, PORT_CLOCK_HZ)
            m.d.comb += getattr(design, prefix + "rx_clk").eq(rx_clk.i)
            if reset is not None:
                m.submodules[f"phy_reset{number}"] = buf = io.Buffer("o", reset)
                m.d.comb += buf.o.eq(~locked)

        connect_uart_and_led(m, platform, design, led=self.led)
        return m
