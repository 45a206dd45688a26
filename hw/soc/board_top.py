"""A board top: a host-link design wired to a board's UART pins, clock and one LED."""

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import io

__all__ = ["BoardTop", "connect_uart_and_led", "uart_divisor"]


def uart_divisor(clock_hz, baud):
    """Clock cycles per UART bit for ``baud`` at ``clock_hz``.

    Raises
    ------
    ValueError
        If the nearest integer divisor misses ``baud`` by more than 2 % (a UART frame then
        drifts out of its stop bit) or is below 4 (the UART's minimum).
    """
    if not baud > 0:
        raise ValueError(f"Baud rate must be positive, not {baud!r}")
    divisor = round(clock_hz / baud)
    if divisor < 4:
        raise ValueError(f"{baud} baud is too fast for a {clock_hz / 1e6:g} MHz clock: at "
                         f"most {int(clock_hz // 4)} baud")
    error = abs(clock_hz / divisor - baud) / baud
    if error > 0.02:
        raise ValueError(f"{baud} baud cannot be made from a {clock_hz / 1e6:g} MHz clock "
                         f"(nearest: {clock_hz / divisor:.0f} baud, {error:.1%} off)")
    return divisor


class BoardTop(Elaboratable):
    """``design`` (with ``rx``, ``tx`` and ``busy`` ports, e.g. ``SystolicSoc``) on a board.

    ``rx``/``tx`` go to the board's UART resource ``uart``, ``busy`` lights the LED
    ``led`` (a resource name and index, and the subsignal for a multi-colour LED; None for
    none). The
    design runs in the ``sync`` domain of the board's default clock; its divisor must be
    ``uart_divisor(platform.default_clk_frequency, baud)``.
    """

    def __init__(self, design, *, uart=("uart", 0), led=("led", 0, None)):
        self.design = design
        self.uart = uart
        self.led = led

    def elaborate(self, platform):
        m = Module()
        m.submodules.design = design = self.design
        connect_uart_and_led(m, platform, design, uart=self.uart, led=self.led)
        return m


def connect_uart_and_led(m, platform, design, *, uart=("uart", 0), led=None):
    """Wire ``design``'s ``rx``/``tx`` to the board's UART resource ``uart`` and its
    ``busy`` to the LED ``led`` (a resource name, index and subsignal, or None)."""
    pins = platform.request(*uart, dir="-")
    m.submodules.uart_rx = rx = io.Buffer("i", pins.rx)
    m.submodules.uart_tx = tx = io.Buffer("o", pins.tx)
    m.d.comb += [design.rx.eq(rx.i), tx.o.eq(design.tx)]
    if led is not None:
        name, number, subsignal = led
        pin = platform.request(name, number, dir="-")
        m.submodules.led = buf = io.Buffer("o", getattr(pin, subsignal) if subsignal else pin)
        m.d.comb += buf.o.eq(design.busy)
