"""UART receiver and transmitter (8 data bits, no parity, 1 stop bit, LSB first)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.params import positive_int

__all__ = ["UartRx", "UartTx", "check_divisor"]


def check_divisor(divisor):
    """Raise unless ``divisor`` (clock cycles per bit) is an integer of at least 4."""
    positive_int(divisor, "Clock cycles per bit (divisor)")
    if divisor < 4:
        raise ValueError(f"Clock cycles per bit (divisor) must be at least 4, not {divisor}")


class UartRx(wiring.Component):
    """Receive 8N1 bytes from ``rx`` at ``divisor`` clock cycles per bit.

    ``rx`` goes through a two-flop synchronizer; a start bit is confirmed half a bit after
    its falling edge, the data bits are sampled in their middles and the stop bit must be
    high, else the byte is dropped and ``frame_error`` pulses for a cycle. The receiver
    looks for the next start bit right after the middle of the stop bit.

    Latency: a byte is on ``data`` about 9.5 bit times (+ 2 cycles) after its start bit's
    falling edge, for one cycle (``data`` is always ready: whoever listens takes it then).

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4 (clock frequency / baud rate).

    Attributes
    ----------
    rx : In(1)
        The serial line (idle high).
    data : Out(stream.Signature(8, always_ready=True))
    frame_error : Out(1)
    """

    def __init__(self, *, divisor):
        check_divisor(divisor)
        self._divisor = divisor
        super().__init__({"rx": In(1, init=1),
                          "data": Out(stream.Signature(8, always_ready=True)),
                          "frame_error": Out(1)})

    divisor = property(lambda self: self._divisor, doc="Clock cycles per bit.")

    def elaborate(self, platform):
        m = Module()
        line = Signal(2, init=0b11)
        m.d.sync += line.eq(line << 1 | self.rx)
        level = line[1]
        timer = Signal(range(self.divisor))
        bits = Signal(range(9))
        shift = Signal(8)
        m.d.sync += self.data.valid.eq(0)
        m.d.sync += self.frame_error.eq(0)
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~level):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(level):                     # a glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [timer.eq(self.divisor - 1), bits.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq(shift >> 1 | level << 7), bits.eq(bits + 1),
                                 timer.eq(self.divisor - 1)]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(level):
                        m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(1)]
                    with m.Else():
                        m.d.sync += self.frame_error.eq(1)
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """Send the bytes of ``data`` on ``tx`` as 8N1 at ``divisor`` clock cycles per bit.

    Throughput: one byte per ``10 * divisor`` cycles; ``data`` is ready while the line is
    idle and during the last cycle of a stop bit, so bytes follow back to back.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4.

    Attributes
    ----------
    data : In(stream.Signature(8))
    tx : Out(1)
        The serial line (idle high).
    """

    def __init__(self, *, divisor):
        check_divisor(divisor)
        self._divisor = divisor
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1)})

    divisor = property(lambda self: self._divisor, doc="Clock cycles per bit.")

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        bits_left = Signal(range(11))
        frame = Signal(10, init=0x3FF)                  # stop, 8 data bits, start; LSB first
        m.d.comb += self.tx.eq(frame[0])
        last_cycle = (bits_left == 0) | ((bits_left == 1) & (timer == 0))
        m.d.comb += self.data.ready.eq(last_cycle)
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [frame.eq((self.data.payload << 1) | (1 << 9)), bits_left.eq(10),
                         timer.eq(self.divisor - 1)]
        with m.Elif(bits_left != 0):
            with m.If(timer == 0):
                m.d.sync += [frame.eq(frame >> 1 | (1 << 9)), bits_left.eq(bits_left - 1),
                             timer.eq(self.divisor - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m
