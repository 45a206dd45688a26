"""Counters over a UART as a line of text: send any byte, get every counter back."""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.soc.uart import UartRx, UartTx

__all__ = ["CounterReport"]


class CounterReport(wiring.Component):
    """On each byte received on ``rx``, copy the ``count`` 32-bit ``counters`` and send
    them on ``tx`` as one line: each as 8 upper-case hex digits followed by a space, the
    line ended by ``\\r\\n`` (8N1 at ``divisor`` clock cycles per bit). A byte received
    while a line is being sent is ignored.

    Latency: the line starts a byte time after the request's stop bit; it takes
    ``9 * count + 2`` byte times.

    Attributes
    ----------
    counters : In(data.ArrayLayout(32, count))
    rx : In(1)
    tx : Out(1)
    """

    def __init__(self, *, count, divisor):
        self._count, self._divisor = count, divisor
        super().__init__({"counters": In(data.ArrayLayout(32, count)),
                          "rx": In(1, init=1), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = uart_rx = UartRx(divisor=self._divisor)
        m.submodules.uart_tx = uart_tx = UartTx(divisor=self._divisor)
        m.d.comb += [uart_rx.rx.eq(self.rx), self.tx.eq(uart_tx.tx)]
        copies = Array(Signal(32, name=f"copy_{k}") for k in range(self._count))
        sending = Signal()
        index = Signal(range(self._count + 1))   # the counter, or the line's end
        digit = Signal(range(9))                 # its digit, 8 the space (or '\r', '\n')
        with m.If(uart_rx.data.valid & ~sending):
            m.d.sync += [sending.eq(1), index.eq(0), digit.eq(0),
                         *(copies[k].eq(self.counters[k]) for k in range(self._count))]
        nibble = copies[index].word_select(~digit[:3], 4)        # the highest first
        hex_digit = Mux(nibble < 10, ord("0") + nibble, ord("A") - 10 + nibble)
        at_end = index == self._count
        m.d.comb += [uart_tx.data.valid.eq(sending),
                     uart_tx.data.payload.eq(Mux(at_end, Mux(digit == 0, ord("\r"), ord("\n")),
                                                 Mux(digit == 8, ord(" "), hex_digit)))]
        with m.If(uart_tx.data.valid & uart_tx.data.ready):
            with m.If(at_end):
                m.d.sync += digit.eq(1)
                with m.If(digit == 1):
                    m.d.sync += sending.eq(0)
            with m.Elif(digit == 8):
                m.d.sync += [digit.eq(0), index.eq(index + 1)]
            with m.Else():
                m.d.sync += digit.eq(digit + 1)
        return m
