"""Byte window: the front end of the engines that parse compressed messages."""

from amaranth.hdl import Cat, Const, Mux, Signal

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
        self._i, self._width = i, width
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

    def message_end_cases(self, m, state, states, *, flag, out, out_free):
        """The ``m.Case`` blocks of a decoder's states ``TAIL``, ``DROP`` and ``BYPASS``
        (members of the enum ``states``; all return to ``HEADER``):

        ``TAIL``: the message's last value has gone out; bytes left before ``last`` are an
        error (``flag``) and go to ``DROP``. ``DROP``: discard up to the input's ``last``.
        ``BYPASS``: send the window's bytes out unchanged as full beats to ``out`` (a
        ``hw.common.skid.SkidOutput``, when ``out_free``), ``last`` on the message's final
        one.
        """
        width, i = self._width, self._i
        with m.Case(states.TAIL):
            with m.If(self.fill != 0):
                m.d.comb += flag.eq(1)
                m.d.sync += state.eq(states.DROP)
            with m.Elif(self.ended):
                m.d.comb += self.finish.eq(1)
                m.d.sync += state.eq(states.HEADER)
        with m.Case(states.DROP):
            m.d.comb += self.clear.eq(1)
            with m.If(self.ended | (i.valid & i.ready & i.payload.last)):
                m.d.comb += self.finish.eq(1)
                m.d.sync += state.eq(states.HEADER)
        with m.Case(states.BYPASS):
            with m.If(out_free & ((self.fill >= width) | self.ended)):
                m.d.comb += self.consume.eq(Mux(self.fill < width, self.fill, width))
                final = self.ended & (self.fill <= width)
                m.d.comb += [out.write.eq(1), out.payload.data.eq(self.data[:8 * width]),
                             out.payload.keep.eq(Cat(self.fill > k for k in range(width))),
                             out.payload.last.eq(final)]
                with m.If(final):
                    m.d.comb += self.finish.eq(1)
                    m.d.sync += state.eq(states.HEADER)
