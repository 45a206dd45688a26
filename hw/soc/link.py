"""The device end of the host link: a UART each way around the link's frames."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.params import positive_int

from .link_frames import LinkFrames, executor_ports
from .uart import UartRx, UartTx, check_divisor

__all__ = ["HostLink", "check_link"]


def check_link(divisor, timeout_bytes):
    """Raise unless ``HostLink(divisor=divisor, timeout_bytes=timeout_bytes)`` is valid (a
    top checks before building anything it would then drop)."""
    check_divisor(divisor)
    positive_int(timeout_bytes, "Timeout (byte times)")
    if timeout_bytes < 16:         # longer than an error response, so DISCARD outlasts it
        raise ValueError(f"Timeout must be at least 16 byte times, not {timeout_bytes}")


class HostLink(wiring.Component):
    """Receive request frames (``codnn.hw.soc.protocol``) on the serial line ``rx``, send
    response frames on ``tx``: ``UartRx`` and ``UartTx`` around ``LinkFrames``
    (``codnn.hw.soc.link_frames``), whose executor-side ports and counters these are, with
    a timeout of ``timeout_bytes`` byte times (``timeout_bytes * 10 * divisor`` cycles).

    Throughput: the UART's, one byte per ``10 * divisor`` cycles each way.

    Parameters
    ----------
    divisor : int
        Clock cycles per UART bit (>= 4).
    timeout_bytes : int
        Quiet byte times that end a frame cut short (at least 16: longer than the link's
        own error answer).

    Attributes
    ----------
    rx : In(1)
    tx : Out(1)
    request, buffer_addr, buffer_data, response, response_data, clear, frames_ok,
    frames_bad
        As ``LinkFrames``.
    """

    def __init__(self, *, divisor, timeout_bytes=2000):
        check_link(divisor, timeout_bytes)
        self._rx = UartRx(divisor=divisor)
        self._tx = UartTx(divisor=divisor)
        self._frames = LinkFrames(timeout=timeout_bytes * 10 * divisor)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), **executor_ports()})

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = rx = self._rx
        m.submodules.uart_tx = tx = self._tx
        m.submodules.frames = frames = self._frames
        m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(tx.tx)]
        wiring.connect(m, rx.data, frames.rx)
        wiring.connect(m, frames.tx, tx.data)
        for name in ("request", "response", "response_data"):
            wiring.connect(m, getattr(frames, name), wiring.flipped(getattr(self, name)))
        m.d.comb += [frames.buffer_addr.eq(self.buffer_addr), frames.clear.eq(self.clear),
                     self.buffer_data.eq(frames.buffer_data),
                     self.frames_ok.eq(frames.frames_ok), self.frames_bad.eq(frames.frames_bad)]
        return m
