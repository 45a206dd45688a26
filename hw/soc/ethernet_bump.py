"""Bump in the wire: two Gigabit Ethernet ports with a frame path each way, gradient frames
compressed from port 0 to port 1 and restored from port 1 to port 0."""

from amaranth.hdl import Cat, ClockDomain, ClockSignal, DomainRenamer, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from codnn.golden.inceptionn import check_bound_bits
from codnn.golden.packets import DEFAULT_MAX_FRAME
from codnn.hw.common.async_fifo import RegisteredAsyncFIFO
from codnn.hw.common.skid import SkidOutput
from codnn.hw.nic.beat_width import Narrower, Widener
from codnn.hw.nic.ethernet_mac import MacRx, MacTx
from codnn.hw.nic.frame_path import FramePath
from codnn.hw.nic.layouts import frame_beat_layout
from codnn.hw.nic.rgmii import Rgmii
from codnn.hw.soc.counter_report import CounterReport

__all__ = ["EthernetBump", "COUNTERS"]

#: The counters of each direction, in the order the UART report sends them (port 0 to 1
#: first): frames received (the FCS checked), of them flagged bad, the frame path's four
#: counters, frames sent, sends cut by an underrun.
COUNTERS = ("received", "received_bad", "passed", "changed", "dropped", "flagged", "sent",
            "underruns")
#: Beats in flight between a port's clocks and the core's clock.
_CDC_DEPTH = 4
#: Bytes per beat in the core (the frame paths).
_CORE_WIDTH = 4


def _beat_fifo(m, name, source, from_domain, to_domain):
    """``source`` (a stream of ``frame_beat_layout(_CORE_WIDTH)``) through a
    ``RegisteredAsyncFIFO`` and a ``SkidOutput`` into ``to_domain``; returns the stream
    out (the skid keeps the consumer's logic off the FIFO's read pointer)."""
    layout = frame_beat_layout(_CORE_WIDTH)
    m.submodules[name] = fifo = RegisteredAsyncFIFO(layout, depth=_CDC_DEPTH,
                                                    w_domain=from_domain, r_domain=to_domain)
    m.submodules[f"{name}_skid"] = skid = DomainRenamer(to_domain)(SkidOutput(layout))
    wiring.connect(m, source, fifo.i)
    m.d.comb += [skid.payload.eq(fifo.o.payload), skid.write.eq(fifo.o.valid & skid.free),
                 fifo.o.ready.eq(skid.free)]
    return skid.o


def _count_across(m, name, count, from_domain, to_domain):
    """``count`` (a counter that steps by at most one a cycle in ``from_domain``) as seen
    in ``to_domain``: Gray-coded, synchronized, decoded."""
    gray = Signal.like(count, name=f"{name}_gray")
    m.d[from_domain] += gray.eq(count ^ (count >> 1))
    seen = Signal.like(count, name=f"{name}_seen")
    m.submodules[f"{name}_sync"] = FFSynchronizer(gray, seen, o_domain=to_domain)
    bits = [seen[-1]]                       # binary bit k: Gray bit k XOR binary bit k+1
    for bit in reversed(range(len(count) - 1)):
        bits.insert(0, seen[bit] ^ bits[0])
    decoded = Signal.like(count, name=name)
    m.d.comb += decoded.eq(Cat(bits))
    return decoded


class EthernetBump(wiring.Component):
    """Frames in on port 0 leave port 1 with their gradient frames compressed (a
    ``FramePath`` in the ``compress`` direction); frames in on port 1 leave port 0
    restored (``decompress``).

    Each port is an RGMII ``Rgmii`` and two MACs. Its ``MacRx`` runs in the port's receive
    clock domain (``rx0``, ``rx1``: the PHY's ``rgmii<p>_rx_clk``, 125 MHz), its bytes
    packed into 4-byte beats (``Widener``) that a ``RegisteredAsyncFIFO`` takes into the
    ``core`` domain, where the frame paths run 4 bytes a beat (50 MHz is 1.6 times line
    rate); their beats go through another into ``sync`` (125 MHz) and a byte a cycle
    (``Narrower``, then a skid register) into the other port's ``MacTx``. ``sync90`` is
    ``sync`` a quarter period late, for the transmit clocks. The frame paths drop (and
    count) a frame they have no room for, since a receiver cannot hold the wire.

    The counters (``COUNTERS``, each way, counted in ``core``) go out over a UART as a
    line of hex numbers on any byte received (``CounterReport``, in ``core``); ``busy`` is
    high while a frame is coming into either path. ``rx_overflow`` (sticky) would mean a
    port's beats found their FIFO full: the core's clock too slow.

    Latency: a frame leaves after it has all arrived and been rewritten (store and forward:
    ``FramePath``). Throughput: line rate each way while the frames the path sends are no
    longer than those it takes (a restored frame is longer: the path holds what the wire
    cannot take, then drops).

    Parameters
    ----------
    bound_bits : int
        The error bound ``2**-b`` of both directions.
    max_frame : int
        The largest frame (``FramePath``).
    divisor : int
        Core clock cycles per UART bit (434: 115200 baud at 50 MHz).
    restore : bool
        False: port 1's frames reach port 0 as they are (cut through, no frame path),
        for a device too small for both paths (the Colorlight's LFE5U-25F).
    """

    def __init__(self, *, bound_bits=10, max_frame=DEFAULT_MAX_FRAME, divisor=434,
                 restore=True):
        check_bound_bits(bound_bits)
        self._bound_bits, self._max_frame, self._divisor = bound_bits, max_frame, divisor
        self._restore = bool(restore)
        members = {"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1),
                   "rx_overflow": Out(2)}
        for port in (0, 1):
            members.update({f"rgmii{port}_txd": Out(4), f"rgmii{port}_tx_ctl": Out(1),
                            f"rgmii{port}_tx_clk": Out(1), f"rgmii{port}_rxd": In(4),
                            f"rgmii{port}_rx_ctl": In(1), f"rgmii{port}_rx_clk": In(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        ports = [self._port(m, port) for port in (0, 1)]
        counters, busy_ways = [], []
        for way, (source, sink, direction) in enumerate(((0, 1, "compress"),
                                                         (1, 0, "decompress"))):
            rx_cdc = self._receive(m, source, ports[source])
            leaving, path_counters = self._path(m, way, direction, rx_cdc)
            mac_tx = self._send(m, sink, leaving, ports[sink])
            # Counters, in the core's domain (the MAC's underruns through a Gray code).
            beat = rx_cdc.payload
            received, received_bad, sent, busy = Signal(32), Signal(32), Signal(32), Signal()
            with m.If(rx_cdc.valid & rx_cdc.ready):
                m.d.core += busy.eq(~beat.last)
                with m.If(beat.last):
                    m.d.core += [received.eq(received + 1),
                                 received_bad.eq(received_bad + beat.user)]
            with m.If(leaving.valid & leaving.ready & leaving.payload.last):
                m.d.core += sent.eq(sent + 1)
            busy_ways.append(busy)
            counters += [received, received_bad, *path_counters, sent,
                         _count_across(m, f"underruns{sink}", mac_tx.underruns, "sync", "core")]
        m.d.comb += self.busy.eq(busy_ways[0] | busy_ways[1])
        report = DomainRenamer("core")(CounterReport(count=len(counters),
                                                     divisor=self._divisor))
        m.submodules.report = report
        m.d.comb += [report.rx.eq(self.rx), self.tx.eq(report.tx),
                     report.counters.eq(Cat(counters))]
        return m

    def _port(self, m, port):
        """Ethernet port ``port``'s RGMII, its receive clock domain ``rx{port}``."""
        domain = f"rx{port}"
        m.domains += ClockDomain(domain, reset_less=True, local=True)
        m.d.comb += ClockSignal(domain).eq(getattr(self, f"rgmii{port}_rx_clk"))
        m.submodules[f"rgmii{port}"] = rgmii = Rgmii(rx_domain=domain)
        for name in ("txd", "tx_ctl", "tx_clk"):
            pin = getattr(self, f"rgmii{port}_{name}")
            m.d.comb += pin.eq(getattr(rgmii, f"rgmii_{name}"))
        for name in ("rxd", "rx_ctl"):
            pin = getattr(self, f"rgmii{port}_{name}")
            m.d.comb += getattr(rgmii, f"rgmii_{name}").eq(pin)
        return rgmii

    def _receive(self, m, source, rgmii_in):
        """Receive on port ``source``: a byte a cycle at the port's clock, packed into
        4-byte beats for the core, which takes a beat a cycle at half that clock or more;
        an overflow (a byte the widener could not take) flagged. Returns the core's side
        of the clock crossing."""
        domain = f"rx{source}"
        mac_rx = DomainRenamer(domain)(MacRx())
        widener = DomainRenamer(domain)(Widener(1, _CORE_WIDTH))
        m.submodules[f"mac_rx{source}"], m.submodules[f"widener{source}"] = mac_rx, widener
        m.d.comb += [mac_rx.rxd.eq(rgmii_in.rxd), mac_rx.rx_dv.eq(rgmii_in.rx_dv),
                     mac_rx.rx_er.eq(rgmii_in.rx_er),
                     widener.i.payload.eq(mac_rx.o.payload), widener.i.valid.eq(mac_rx.o.valid)]
        overflow = Signal()
        m.d[domain] += overflow.eq(overflow | (mac_rx.o.valid & ~widener.i.ready))
        m.submodules[f"overflow{source}"] = FFSynchronizer(overflow, self.rx_overflow[source])
        return _beat_fifo(m, f"rx_cdc{source}", widener.o, domain, "core")

    def _path(self, m, way, direction, rx_cdc):
        """The frames' way through the core: the frame path in ``direction``, or (a device
        too small for both, restoring off) forwarded as they come. Returns the stream
        that leaves and the path's counters (passed, changed, dropped, flagged)."""
        beat = rx_cdc.payload
        leaving = stream.Signature(frame_beat_layout(_CORE_WIDTH)).create()
        if direction != "compress" and not self._restore:
            # Forwarded as they come (cut through): passed counts them, flagged the
            # damaged ones.
            wiring.connect(m, rx_cdc, wiring.flipped(leaving))
            passed, flagged = Signal(32), Signal(32)
            with m.If(rx_cdc.valid & rx_cdc.ready & beat.last):
                m.d.core += [passed.eq(passed + ~beat.user), flagged.eq(flagged + beat.user)]
            return leaving, [passed, Signal(32), Signal(32), flagged]
        path = DomainRenamer("core")(FramePath(direction=direction, width=_CORE_WIDTH,
                                               max_frame=self._max_frame,
                                               drop_when_full=True))
        m.submodules[f"path{way}"] = path
        wiring.connect(m, rx_cdc, path.i)
        m.d.comb += path.bound_bits.eq(self._bound_bits)
        return path.o, [path.passed, path.changed, path.dropped, path.flagged]

    def _send(self, m, sink, leaving, rgmii_out):
        """Send on port ``sink``: 4-byte beats into the port's transmit clock, a byte a
        cycle to the MAC (a skid register between the byte select and the MAC's CRC, no
        bubble). Returns the MAC."""
        tx_cdc = _beat_fifo(m, f"tx_cdc{sink}", leaving, "core", "sync")
        m.submodules[f"narrower{sink}"] = narrower = Narrower(_CORE_WIDTH, 1)
        wiring.connect(m, tx_cdc, narrower.i)
        m.submodules[f"tx_skid{sink}"] = tx_skid = SkidOutput(narrower.o.payload.shape())
        m.d.comb += [tx_skid.payload.eq(narrower.o.payload),
                     tx_skid.write.eq(narrower.o.valid & tx_skid.free),
                     narrower.o.ready.eq(tx_skid.free)]
        m.submodules[f"mac_tx{sink}"] = mac_tx = MacTx()
        wiring.connect(m, tx_skid.o, mac_tx.i)
        m.d.comb += [rgmii_out.txd.eq(mac_tx.txd), rgmii_out.tx_en.eq(mac_tx.tx_en),
                     rgmii_out.tx_er.eq(mac_tx.tx_er)]
        return mac_tx
