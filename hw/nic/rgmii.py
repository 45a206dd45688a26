"""RGMII: GMII's byte a cycle as four bits on both clock edges, through the ECP5's DDR
flip-flops in its IO cells (ODDRX1F out, IDDRX1F in; ``sim/primitives`` has their models
for simulation)."""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Rgmii"]


class Rgmii(wiring.Component):
    """One RGMII port: GMII on the inside, the port's pins (as signals) outside.

    Transmit (``sync`` domain): ``txd`` leaves low nibble first, the low nibble and
    ``tx_en`` while the clock is high, the high nibble and ``tx_en ^ tx_er`` while it is
    low; ``rgmii_tx_clk`` is the ``tx_shifted`` domain's clock (``sync`` delayed by a
    quarter period), so its edges fall in the middle of each nibble. Receive (the
    ``rx_domain``, clocked by the PHY's ``rgmii_rx_clk``): the nibbles taken on the rising
    and the falling edge make ``rxd``; ``rx_dv`` is the rising edge's control bit,
    ``rx_er`` it XOR the falling edge's.

    Latency: two cycles out (the DDR flip-flops), three in (and a register by the pins).

    Attributes
    ----------
    txd, tx_en, tx_er : In
    rxd, rx_dv, rx_er : Out
    rgmii_txd, rgmii_tx_ctl, rgmii_tx_clk : Out
    rgmii_rxd, rgmii_rx_ctl : In
    """

    def __init__(self, *, rx_domain="eth_rx", tx_shifted="sync90"):
        self._rx_domain, self._tx_shifted = rx_domain, tx_shifted
        super().__init__({"txd": In(8), "tx_en": In(1), "tx_er": In(1),
                          "rxd": Out(8), "rx_dv": Out(1), "rx_er": Out(1),
                          "rgmii_txd": Out(4), "rgmii_tx_ctl": Out(1), "rgmii_tx_clk": Out(1),
                          "rgmii_rxd": In(4), "rgmii_rx_ctl": In(1)})

    def elaborate(self, platform):
        m = Module()

        def out(name, pin, rising, falling, domain="sync"):
            m.submodules[name] = Instance("ODDRX1F", i_SCLK=ClockSignal(domain), i_RST=Const(0),
                                          i_D0=rising, i_D1=falling, o_Q=pin)

        for bit in range(4):
            out(f"txd{bit}", self.rgmii_txd[bit], self.txd[bit], self.txd[4 + bit])
        out("tx_ctl", self.rgmii_tx_ctl, self.tx_en, self.tx_en ^ self.tx_er)
        out("tx_clk", self.rgmii_tx_clk, Const(1), Const(0), self._tx_shifted)

        rising, falling = Signal(5), Signal(5)
        for bit, pin in enumerate([*self.rgmii_rxd, self.rgmii_rx_ctl]):
            m.submodules[f"rx{bit}"] = Instance(
                "IDDRX1F", i_SCLK=ClockSignal(self._rx_domain), i_RST=Const(0), i_D=pin,
                o_Q0=rising[bit], o_Q1=falling[bit])
        # A register by the pins, so that the route from the IO cells is a cycle of its own.
        m.d[self._rx_domain] += [self.rxd.eq(Cat(rising[:4], falling[:4])),
                                 self.rx_dv.eq(rising[4]), self.rx_er.eq(rising[4] ^ falling[4])]
        return m
