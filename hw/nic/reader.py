"""The front end of the engines that take value messages: descriptor, value beats, and the
defined behaviour of messages whose length does not match their count."""

from amaranth.hdl import Cat, Const, Mux, Signal, unsigned
from amaranth.lib import data, enum

from codnn.hw.nic.layouts import beat_bytes

__all__ = ["Item", "MessageReader"]


class Item(enum.Enum, shape=2):
    """What the reader's output register holds."""
    NONE = 0
    VALUES = 1          # a beat of values
    HEADER = 2          # a message's start; ``bits[:32]`` is its count
    RAW = 3             # a beat passed on as it is (bypass): ``length`` bytes of ``bits``


class _State(enum.Enum, shape=3):
    DESCRIPTOR = 0      # waiting for a message's first beat
    VALUES = 1
    PAD = 2             # the input ended early: zeros up to the count
    DROP = 3            # beats past the count, up to the input's last
    BYPASS = 4


class MessageReader:
    """Read value messages from stream ``i`` into the register ``item`` of module ``m``,
    one beat each cycle ``advance`` is high.

    ``item`` holds ``kind`` (an ``Item``), ``bits`` (the beat's values, zero past
    ``count``), ``count`` (values in the beat), ``final`` (the message's last value beat),
    ``index`` (the message index of lane 0), and for ``RAW`` beats ``length`` and ``last``.
    A descriptor beat gives a ``HEADER`` item (``last`` set when the count is 0); with
    ``bypass`` high at the descriptor every beat of the message is a ``RAW`` item.

    A message whose input ends before its count is padded with zero beats (the input waits
    meanwhile); beats past the count are dropped up to the input's ``last``; a message
    whose count is above ``max_values`` gives no item and is dropped up to its ``last``.
    Each pulses ``flag``. ``descriptor`` is high in the cycle a (non-bypass) descriptor
    beat is taken, for the engine to sample its per-message settings at that edge;
    ``between`` while the reader waits for a message's first beat (for ``count_errors``).

    With ``hold`` (an engine that stalls) the item stays while ``advance`` is low. Without
    it (an engine whose stages never stall) ``kind`` is ``NONE`` in every cycle that follows
    one without a beat, and the other fields load every cycle what a beat would give, so
    their registers have no enable that the input handshake must reach.

    Latency: 1 cycle. Throughput: one beat per cycle while ``advance`` stays high.
    """

    def __init__(self, m, i, advance, *, lanes, flag, bypass, max_values, hold=True):
        self.item = Signal(data.StructLayout({
            "kind": Item, "bits": unsigned(32 * lanes), "count": range(lanes + 1),
            "final": 1, "index": 32, "length": range(4 * lanes + 1), "last": 1,
        }))
        self.descriptor = Signal()
        self.between = Signal()
        item, beat = self.item, i.payload
        state = Signal(_State)
        remaining = Signal(32)
        index = Signal(32)
        taken = Signal()
        m.d.comb += [i.ready.eq(advance & (state != _State.PAD)),
                     taken.eq(i.valid & i.ready), self.between.eq(state == _State.DESCRIPTOR)]
        kept_bytes, masked = beat_bytes(m, beat)
        final = Signal(init=1)                  # remaining <= lanes, kept as a register

        with m.If(advance if hold else Const(1)):
            m.d.sync += item.kind.eq(Item.NONE)

        count = Signal(range(lanes + 1))
        m.d.comb += count.eq(Mux(final, remaining, lanes))
        total = beat.data[:32]

        # The item's fields for each kind of beat.
        def value_fields(bits):
            kept = Cat(Mux(k < count, bits[32 * k:32 * (k + 1)], 0) for k in range(lanes))
            return [item.bits.eq(kept), item.count.eq(count), item.final.eq(final),
                    item.index.eq(index)]

        raw_fields = [item.bits.eq(masked), item.length.eq(kept_bytes), item.last.eq(beat.last)]
        header_fields = [item.bits.eq(total), item.last.eq(total == 0)]

        def load(fields):
            if hold:
                m.d.sync += fields

        def values(bits):
            load(value_fields(bits))
            m.d.sync += [item.kind.eq(Item.VALUES), index.eq(index + lanes),
                         remaining.eq(Mux(final, 0, remaining - lanes)),
                         final.eq(final | (remaining <= 2 * lanes))]

        def raw():
            load(raw_fields)
            m.d.sync += item.kind.eq(Item.RAW)

        with m.Switch(state):
            with m.Case(_State.DESCRIPTOR):
                with m.If(taken & bypass):
                    raw()
                    with m.If(~beat.last):
                        m.d.sync += state.eq(_State.BYPASS)
                with m.Elif(taken & (total > max_values)):
                    m.d.comb += flag.eq(1)
                    with m.If(~beat.last):
                        m.d.sync += state.eq(_State.DROP)
                with m.Elif(taken):
                    m.d.comb += [self.descriptor.eq(1),
                                 flag.eq((total == 0) != beat.last)]
                    load(header_fields)
                    m.d.sync += [item.kind.eq(Item.HEADER), remaining.eq(total),
                                 final.eq(total <= lanes), index.eq(0)]
                    with m.If(total == 0):
                        with m.If(~beat.last):
                            m.d.sync += state.eq(_State.DROP)
                    with m.Elif(beat.last):
                        m.d.sync += state.eq(_State.PAD)
                    with m.Else():
                        m.d.sync += state.eq(_State.VALUES)
            with m.Case(_State.VALUES):
                with m.If(taken):
                    values(beat.data)
                    with m.If(final):
                        with m.If(beat.last):
                            m.d.sync += state.eq(_State.DESCRIPTOR)
                        with m.Else():
                            m.d.comb += flag.eq(1)
                            m.d.sync += state.eq(_State.DROP)
                    with m.Elif(beat.last):
                        m.d.comb += flag.eq(1)
                        m.d.sync += state.eq(_State.PAD)
            with m.Case(_State.PAD):
                with m.If(advance):
                    values(Const(0, 32 * lanes))
                    with m.If(final):
                        m.d.sync += state.eq(_State.DESCRIPTOR)
            with m.Case(_State.DROP):
                with m.If(taken & beat.last):
                    m.d.sync += state.eq(_State.DESCRIPTOR)
            with m.Case(_State.BYPASS):
                with m.If(taken):
                    raw()
                    with m.If(beat.last):
                        m.d.sync += state.eq(_State.DESCRIPTOR)
        if not hold:
            # Every cycle, what the state's beat would give (the fields ``kind`` leaves
            # unused are don't-cares).
            with m.Switch(state):
                with m.Case(_State.DESCRIPTOR):
                    with m.If(bypass):
                        m.d.sync += raw_fields
                    with m.Else():
                        m.d.sync += header_fields
                with m.Case(_State.VALUES):
                    m.d.sync += value_fields(beat.data)
                with m.Case(_State.PAD):
                    m.d.sync += value_fields(Const(0, 32 * lanes))
                with m.Default():
                    m.d.sync += raw_fields
