"""Byte window: the front end of the TernGrad decoder, which parses compressed messages."""

from amaranth.hdl import Cat, Const, Mux, Signal

from codnn.hw.nic.layouts import beat_bytes

__all__ = ["ByteWindow"]


class ByteWindow:
    """The bytes of one message from stream ``i`` not parsed yet: the first ``fill`` bytes
    of ``data`` (byte 0 first; the bytes after them are undefined). ``fill_next`` is what
    ``fill`` will be in the next cycle, for the engine's own registers.

    The engine names at construction the byte counts it may consume, ``amounts``
    (constants or registers), and each cycle drives ``drop``: one bit per amount (then,
    with ``beat_amount``, one for a whole beat, which ``message_end_cases`` uses), at most
    one set, or ``clear``
    (drop all). A beat is appended after what stays, whenever
    ``size - width`` bytes or fewer are buffered and the message's ``last`` beat has not
    been taken (``ended``). With ``discard`` high every beat is taken and thrown away (the
    engine also drives ``clear``). The engine clears ``ended`` (``finish``) when it is done
    with the message, which lets the next one in.

    The beat goes in at the registered ``fill``, every amount's shift is computed from
    registers, and ``drop`` only selects among them, so the engine's decision reaches
    ``data`` through one level of logic. Latency: a beat's bytes are in ``data`` the cycle
    after it is taken. Throughput: one beat per cycle while the engine consumes as fast.
    """

    def __init__(self, m, i, *, size, discard, amounts, beat_amount=True):
        width = len(i.payload.keep)
        self._i, self._width = i, width
        if beat_amount:
            amounts = [*amounts, Const(width)]          # the last: a whole beat (bypass)
        self.data = Signal(8 * size)
        self.fill = Signal(range(size + 1))
        self.fill_next = Signal.like(self.fill)
        self.ended = Signal()
        self.drop = Signal(len(amounts))
        self.clear = Signal()
        self.finish = Signal()
        nbytes, masked = beat_bytes(m, i.payload)
        take = i.valid & i.ready
        m.d.comb += i.ready.eq(~self.ended & ((self.fill <= size - width) | discard))
        # Bytes past ``fill`` are don't-cares (so ``clear`` only resets ``fill``).
        placed = Signal.like(self.data)
        m.d.comb += placed.eq(Mux(take, masked << Cat(Const(0, 3), self.fill), 0))
        appended = Signal.like(self.data)
        m.d.comb += appended.eq(Cat(Mux(k < self.fill, self.data.word_select(k, 8),
                                        placed.word_select(k, 8)) for k in range(size)))
        kept = Mux(self.drop.any(), 0, appended)
        dropped = 0
        for k, amount in enumerate(amounts):
            # A constant amount is wiring (``shift_right``); ``>>`` by a constant would be an
            # operator whose every output bit Amaranth's loop check takes to depend on
            # every input bit.
            shifted = (appended.shift_right(8 * amount.value) if isinstance(amount, Const)
                       else appended >> Cat(Const(0, 3), amount))
            kept = kept | Mux(self.drop[k], shifted, 0)
            dropped = dropped + Mux(self.drop[k], amount, 0)
        m.d.sync += self.data.eq(kept)
        m.d.comb += self.fill_next.eq(Mux(self.clear, 0,
                                          self.fill - dropped + Mux(take, nbytes, 0)))
        m.d.sync += self.fill.eq(self.fill_next)
        with m.If(take):
            m.d.sync += self.ended.eq(i.payload.last)
        with m.If(self.finish):                # also drops a last beat being discarded
            m.d.sync += self.ended.eq(0)

    def message_end_cases(self, m, state, states, *, flag, out, out_free):
        """The ``m.Case`` blocks of a decoder's states ``TAIL``, ``DROP`` and ``BYPASS``
        (members of the enum ``states``; all return to ``HEADER``):

        ``TAIL``: the message's last value has gone out; bytes left before ``last`` are an
        error (``flag``) and go to ``DROP``. ``DROP``: discard up to the input's ``last``.
        ``BYPASS``: send the window's bytes out unchanged as full beats to ``out`` (a
        ``codnn.hw.common.skid.SkidOutput``, when ``out_free``), ``last`` on the message's final
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
                final = self.ended & (self.fill <= width)
                m.d.comb += [self.drop[-1].eq(~final), self.clear.eq(final)]
                m.d.comb += [out.write.eq(1), out.payload.data.eq(self.data[:8 * width]),
                             out.payload.keep.eq(Cat(self.fill > k for k in range(width))),
                             out.payload.last.eq(final)]
                with m.If(final):
                    m.d.comb += self.finish.eq(1)
                    m.d.sync += state.eq(states.HEADER)
