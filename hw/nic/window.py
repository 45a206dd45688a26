"""Byte window: the front end of the engines that parse compressed messages."""

from amaranth.hdl import Cat, Const, Signal

from hw.nic.layouts import beat_bytes

__all__ = ["ByteWindow"]


class ByteWindow:
    """The bytes of one message from stream ``i`` not parsed yet, byte 0 of ``data`` first.

    Each cycle the engine drives ``consume`` (bytes to drop from the front) or ``clear``
    (drop all); a beat is appended after what stays, whenever ``size - width`` bytes or
    fewer are buffered and the message's ``last`` beat has not been taken (``ended``). With
    ``discard`` high every beat is taken and thrown away. The engine clears ``ended``
    (``finish``) when it is done with the message, which lets the next one in.

    Latency: a beat's bytes are in ``data`` the cycle after it is taken. Throughput: one
    beat per cycle while the engine consumes as fast.
    """

    def __init__(self, m, i, *, size, discard):
        width = len(i.payload.keep)
        self.data = Signal(8 * size)
        self.fill = Signal(range(size + 1))
        self.ended = Signal()
        self.consume = Signal(range(size + 1))
        self.clear = Signal()
        self.finish = Signal()
        nbytes, masked = beat_bytes(m, i.payload)
        m.d.comb += i.ready.eq(~self.ended & ((self.fill <= size - width) | discard))
        left = Signal.like(self.fill)
        m.d.comb += left.eq(self.fill - self.consume)
        kept = self.data >> Cat(Const(0, 3), self.consume)
        with m.If(self.clear):
            m.d.sync += [self.data.eq(0), self.fill.eq(0)]
        with m.Else():
            m.d.sync += [self.data.eq(kept), self.fill.eq(left)]
        with m.If(i.valid & i.ready):
            m.d.sync += self.ended.eq(i.payload.last)
            with m.If(~self.clear):
                m.d.sync += [self.data.eq(kept | (masked << Cat(Const(0, 3), left))),
                             self.fill.eq(left + nbytes)]
        with m.If(self.finish):                # also drops a last beat being discarded
            m.d.sync += self.ended.eq(0)
