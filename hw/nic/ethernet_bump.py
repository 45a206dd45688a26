"""Bump in the wire: two Gigabit Ethernet ports with a frame path each way, gradient frames
compressed from port 0 to port 1 and restored from port 1 to port 0."""

from amaranth.hdl import Cat, ClockDomain, ClockSignal, DomainRenamer, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from codnn.golden.packets import DEFAULT_MAX_FRAME
from codnn.hw.nic.frame_path import FramePath
from codnn.hw.nic.mac import MacRx, MacTx
from codnn.hw.nic.rgmii import Rgmii
from codnn.hw.soc.counter_report import CounterReport

__all__ = ["EthernetBump", "COUNTERS"]

#: The counters of each direction, in the order the UART report sends them (port 0 to 1
#: first): frames received (the FCS checked), of them flagged bad, the frame path's four
#: counters, frames sent, sends cut by an underrun.
COUNTERS = ("received", "received_bad", "passed", "changed", "dropped", "flagged", "sent",
            "underruns")
#: Bytes in flight between a port's receive clock and the core's clock.
_CDC_DEPTH = 16


class EthernetBump(wiring.Component):
    """Frames in on port 0 leave port 1 with their gradient frames compressed (a
    ``FramePath`` in the ``compress`` direction); frames in on port 1 leave port 0
    restored (``decompress``). Each port is an RGMII ``Rgmii``, a ``MacRx`` in the port's
    receive clock domain (``rx0``, ``rx1``: the PHY's ``rgmii<p>_rx_clk``), an
    ``AsyncFIFO`` into the core's ``sync`` domain (125 MHz), and a ``MacTx``; the frame
    paths take a byte a cycle and drop (and count) a frame they have no room for, since a
    receiver cannot hold the wire. ``sync90`` is ``sync`` delayed by a quarter period,
    for the transmit clocks. The counters (``COUNTERS``, each way) go out over a UART as
    a line of hex numbers on any byte received (``CounterReport``); ``busy`` is high while
    a frame is in either path's receiver. ``rx_overflow`` (sticky) would mean a port's
    receive clock ran faster than the core's beyond Ethernet's tolerance.

    Latency: a frame leaves after it has all arrived and been rewritten (store and forward:
    ``FramePath``). Throughput: line rate each way while the frames the path sends are no
    longer than those it takes.

    Parameters
    ----------
    bound_bits : int
        The error bound ``2**-b`` of both directions.
    max_frame : int
        The largest frame (``FramePath``).
    divisor : int
        Clock cycles per UART bit.
    """

    def __init__(self, *, bound_bits=10, max_frame=DEFAULT_MAX_FRAME, divisor=1085):
        self._bound_bits, self._max_frame, self._divisor = bound_bits, max_frame, divisor
        members = {"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1),
                   "rx_overflow": Out(2)}
        for port in (0, 1):
            members.update({f"rgmii{port}_txd": Out(4), f"rgmii{port}_tx_ctl": Out(1),
                            f"rgmii{port}_tx_clk": Out(1), f"rgmii{port}_rxd": In(4),
                            f"rgmii{port}_rx_ctl": In(1), f"rgmii{port}_rx_clk": In(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        ports = []
        for port in (0, 1):
            domain = f"rx{port}"
            m.domains += ClockDomain(domain, reset_less=True, local=True)
            m.d.comb += ClockSignal(domain).eq(getattr(self, f"rgmii{port}_rx_clk"))
            m.submodules[f"rgmii{port}"] = rgmii = Rgmii(rx_domain=domain)
            for name in ("txd", "tx_ctl", "tx_clk"):
                m.d.comb += getattr(self, f"rgmii{port}_{name}").eq(getattr(rgmii, f"rgmii_{name}"))
            for name in ("rxd", "rx_ctl"):
                m.d.comb += getattr(rgmii, f"rgmii_{name}").eq(getattr(self, f"rgmii{port}_{name}"))
            ports.append(rgmii)

        counters, busy_ways = [], []
        for way, (source, sink, direction) in enumerate(((0, 1, "compress"),
                                                         (1, 0, "decompress"))):
            domain = f"rx{source}"
            rgmii_in, rgmii_out = ports[source], ports[sink]
            mac_rx = DomainRenamer(domain)(MacRx())
            m.submodules[f"mac_rx{source}"] = mac_rx
            m.d.comb += [mac_rx.rxd.eq(rgmii_in.rxd), mac_rx.rx_dv.eq(rgmii_in.rx_dv),
                         mac_rx.rx_er.eq(rgmii_in.rx_er)]
            cdc = AsyncFIFO(width=10, depth=_CDC_DEPTH, w_domain=domain, r_domain="sync")
            m.submodules[f"cdc{source}"] = cdc
            overflow = Signal()
            m.d[domain] += overflow.eq(overflow | (mac_rx.m_axis_tvalid & ~cdc.w_rdy))
            m.submodules[f"overflow{source}"] = FFSynchronizer(overflow,
                                                               self.rx_overflow[source])
            m.d.comb += [cdc.w_data.eq(Cat(mac_rx.m_axis_tdata, mac_rx.m_axis_tlast,
                                           mac_rx.m_axis_tuser)),
                         cdc.w_en.eq(mac_rx.m_axis_tvalid)]

            path = FramePath(direction=direction, width=1, max_frame=self._max_frame,
                             drop_when_full=True)
            m.submodules[f"path{way}"] = path
            last, user = cdc.r_data[8], cdc.r_data[9]
            m.d.comb += [path.s_axis_tdata.eq(cdc.r_data[:8]), path.s_axis_tkeep.eq(1),
                         path.s_axis_tlast.eq(last), path.s_axis_tuser.eq(user),
                         path.s_axis_tvalid.eq(cdc.r_rdy), cdc.r_en.eq(path.s_axis_tready),
                         path.bound_bits.eq(self._bound_bits)]

            m.submodules[f"mac_tx{sink}"] = mac_tx = MacTx()
            m.d.comb += [mac_tx.s_axis_tdata.eq(path.m_axis_tdata),
                         mac_tx.s_axis_tlast.eq(path.m_axis_tlast),
                         mac_tx.s_axis_tuser.eq(path.m_axis_tuser),
                         mac_tx.s_axis_tvalid.eq(path.m_axis_tvalid),
                         path.m_axis_tready.eq(mac_tx.s_axis_tready),
                         rgmii_out.txd.eq(mac_tx.txd), rgmii_out.tx_en.eq(mac_tx.tx_en),
                         rgmii_out.tx_er.eq(mac_tx.tx_er)]

            received, received_bad, busy = Signal(32), Signal(32), Signal()
            with m.If(cdc.r_rdy & cdc.r_en):
                m.d.sync += busy.eq(~last)
                with m.If(last):
                    m.d.sync += [received.eq(received + 1), received_bad.eq(received_bad + user)]
            busy_ways.append(busy)
            counters += [received, received_bad, path.passed, path.changed, path.dropped,
                         path.flagged, mac_tx.frames, mac_tx.underruns]

        m.d.comb += self.busy.eq(busy_ways[0] | busy_ways[1])
        m.submodules.report = report = CounterReport(count=len(counters), divisor=self._divisor)
        m.d.comb += [report.rx.eq(self.rx), self.tx.eq(report.tx),
                     *(getattr(report, f"counter_{k}").eq(counter)
                       for k, counter in enumerate(counters))]
        return m
