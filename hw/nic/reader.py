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
        self._m, self._i, self._lanes, self._hold = m, i, lanes, hold
        self._state = state = Signal(_State, name="state")
        self._remaining = Signal(32, name="remaining")
        self._index = Signal(32, name="index")
        self._final = Signal(init=1, name="final")      # remaining <= lanes, a register
        self._taken = taken = Signal(name="taken")
        m.d.comb += [i.ready.eq(advance & (state != _State.PAD)),
                     taken.eq(i.valid & i.ready), self.between.eq(state == _State.DESCRIPTOR)]
        kept_bytes, masked = beat_bytes(m, i.payload)
        with m.If(advance if hold else Const(1)):
            m.d.sync += self.item.kind.eq(Item.NONE)
        self._count = Signal(range(lanes + 1), name="count")
        m.d.comb += self._count.eq(Mux(self._final, self._remaining, lanes))
        self._total = i.payload.data[:32]
        # The item's fields for each kind of beat but values (``_value_fields``).
        self._raw_fields = [self.item.bits.eq(masked), self.item.length.eq(kept_bytes),
                            self.item.last.eq(i.payload.last)]
        self._header_fields = [self.item.bits.eq(self._total),
                               self.item.last.eq(self._total == 0)]
        self._states(advance, flag, bypass, max_values)
        if not hold:
            self._fields_every_cycle(bypass)

    def _value_fields(self, bits):
        """The item's fields for a beat of values ``bits``: zero past ``count``."""
        item, lanes = self.item, self._lanes
        kept = Cat(Mux(k < self._count, bits[32 * k:32 * (k + 1)], 0) for k in range(lanes))
        return [item.bits.eq(kept), item.count.eq(self._count), item.final.eq(self._final),
                item.index.eq(self._index)]

    def _load(self, fields):
        """The item's fields with its kind, where the item holds (else every cycle)."""
        if self._hold:
            self._m.d.sync += fields

    def _values(self, bits):
        m, lanes, final, remaining = self._m, self._lanes, self._final, self._remaining
        self._load(self._value_fields(bits))
        m.d.sync += [self.item.kind.eq(Item.VALUES), self._index.eq(self._index + lanes),
                     remaining.eq(Mux(final, 0, remaining - lanes)),
                     final.eq(final | (remaining <= 2 * lanes))]

    def _raw(self):
        self._load(self._raw_fields)
        self._m.d.sync += self.item.kind.eq(Item.RAW)

    def _states(self, advance, flag, bypass, max_values):
        """The reader's states: a message's descriptor, its values, zeros for a message
        cut short, beats dropped past its count or its refusal, bypass."""
        m, state, beat, taken = self._m, self._state, self._i.payload, self._taken
        total, lanes, final = self._total, self._lanes, self._final
        with m.Switch(state):
            with m.Case(_State.DESCRIPTOR):
                with m.If(taken & bypass):
                    self._raw()
                    with m.If(~beat.last):
                        m.d.sync += state.eq(_State.BYPASS)
                with m.Elif(taken & (total > max_values)):
                    m.d.comb += flag.eq(1)
                    with m.If(~beat.last):
                        m.d.sync += state.eq(_State.DROP)
                with m.Elif(taken):
                    m.d.comb += [self.descriptor.eq(1),
                                 flag.eq((total == 0) != beat.last)]
                    self._load(self._header_fields)
                    m.d.sync += [self.item.kind.eq(Item.HEADER), self._remaining.eq(total),
                                 final.eq(total <= lanes), self._index.eq(0)]
                    with m.If(total == 0):
                        with m.If(~beat.last):
                            m.d.sync += state.eq(_State.DROP)
                    with m.Elif(beat.last):
                        m.d.sync += state.eq(_State.PAD)
                    with m.Else():
                        m.d.sync += state.eq(_State.VALUES)
            with m.Case(_State.VALUES):
                with m.If(taken):
                    self._values(beat.data)
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
                    self._values(Const(0, 32 * lanes))
                    with m.If(final):
                        m.d.sync += state.eq(_State.DESCRIPTOR)
            with m.Case(_State.DROP):
                with m.If(taken & beat.last):
                    m.d.sync += state.eq(_State.DESCRIPTOR)
            with m.Case(_State.BYPASS):
                with m.If(taken):
                    self._raw()
                    with m.If(beat.last):
                        m.d.sync += state.eq(_State.DESCRIPTOR)

    def _fields_every_cycle(self, bypass):
        """Without ``hold``: every cycle, what the state's beat would give (the fields
        ``kind`` leaves unused are don't-cares)."""
        m = self._m
        with m.Switch(self._state):
            with m.Case(_State.DESCRIPTOR):
                with m.If(bypass):
                    m.d.sync += self._raw_fields
                with m.Else():
                    m.d.sync += self._header_fields
            with m.Case(_State.VALUES):
                m.d.sync += self._value_fields(self._i.payload.data)
            with m.Case(_State.PAD):
                m.d.sync += self._value_fields(Const(0, 32 * self._lanes))
            with m.Default():
                m.d.sync += self._raw_fields
