"""Byte ring: a parser's input buffer that stores each beat in place and is read at any
byte."""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.utils import exact_log2

from codnn.hw.nic.layouts import beat_bytes

__all__ = ["ByteRing"]


class ByteRing:
    """The bytes of one message from stream ``i``, one beat per slot of ``width`` bytes in
    a ring of ``slots`` slots (a power of two), never shifted.

    A beat taken from ``i`` (the engine drives ``take``) is held in a register for a cycle,
    where the engine sees it (``beat``, ``beat_valid`` and ``beat_bytes``, the bytes it
    carries: ``codnn.hw.nic.layouts.beat_bytes``), then stored in the next slot: the slot's enable
    is a register set at the take (``selected``, one bit per slot, for the engine's own
    per-slot registers). Byte addresses count modulo twice the ring's size, so that a full
    ring differs from an empty one. ``top`` is the address after the message's last byte stored:
    a beat other than the message's last counts whole (its ``keep`` is not read); the last
    beat counts its kept bytes; ``top_next`` is what ``top`` will be in the next cycle
    unless ``finish`` (one LUT level from registers; ``top_next_copy`` gives more of it).
    ``ended``: the last beat is stored.

    The engine names at construction ``release``, the address of the oldest byte it still
    needs: its slot and the slots after it are not written over while it takes beats only
    when ``room`` (no held beat is a message's last, none has ended, and a slot is free
    for a beat taken now). ``finish`` clears ``ended`` and empties the ring: ``top``
    moves to ``start``, the first address of the next slot (where the next message's first
    beat goes; the engine moves ``release`` there too). ``finish`` with a held beat
    drops it.

    ``slots_from(address, span)`` is the ``span`` slots from the one holding ``address``
    (a shifter by slot, no byte shift), for the engine to register and shift by the byte
    offset. Latency: a taken beat is in ``data`` two cycles later. Throughput: one beat
    per cycle while the engine releases as fast.
    """

    def __init__(self, m, i, *, slots, release):
        width = len(i.payload.keep)
        exact_log2(slots)                     # raises unless a power of two
        self.width, self.slots, self.size = width, slots, width * slots
        self._slot_bits = exact_log2(width)
        self.data = Signal(8 * self.size)
        self.top = Signal(exact_log2(self.size) + 1)
        self.top_next = Signal.like(self.top)
        self.start = Signal.like(self.top)
        self.ended = Signal()
        self.take, self.room, self.finish = Signal(), Signal(), Signal()
        self.beat = Signal.like(i.payload)
        self.beat_valid = Signal()
        self.selected = Signal(slots)
        nbytes, _ = beat_bytes(m, i.payload)
        self.beat_bytes = Signal.like(nbytes)
        slot_index = Signal(exact_log2(slots) + 1)        # the next slot, same modulus
        next_slot_address = slot_index + self.beat_valid
        next_slot = next_slot_address[:exact_log2(slots)]
        m.d.sync += [self.beat.eq(i.payload), self.beat_bytes.eq(nbytes),
                     self.beat_valid.eq(self.take),
                     self.selected.eq(Mux(self.take, 1 << next_slot, 0))]
        m.d.comb += self.start.eq(Cat(Const(0, self._slot_bits), slot_index))
        in_use = Signal.like(slot_index)
        m.d.comb += [in_use.eq(slot_index + self.beat_valid - release[self._slot_bits:]),
                     self.room.eq(~self.ended & ~(self.beat_valid & self.beat.last)
                                  & (in_use < slots))]
        for k in range(slots):
            with m.If(self.selected[k]):
                m.d.sync += self.data.word_select(k, 8 * width).eq(self.beat.data)
        with m.If(self.beat_valid):
            m.d.sync += [slot_index.eq(slot_index + 1), self.ended.eq(self.beat.last)]
        with m.If(self.finish):
            m.d.sync += self.ended.eq(0)
        # Where the held beat takes ``top``, registered at the take.
        self._top_at_take = Signal.like(self.top)
        m.d.comb += self._top_at_take.eq(Cat(Const(0, self._slot_bits), next_slot_address)
                                         + nbytes)
        self._copies = 0
        m.d.comb += self.top_next.eq(self._top_next_from(m, "top_at_beat", 0))
        m.d.sync += self.top.eq(Mux(self.finish, self.start, self.top_next))

    def _top_next_from(self, m, name, init):
        top_at_beat = Signal.like(self.top, name=name, init=init)
        m.d.sync += top_at_beat.eq(self._top_at_take)
        return Mux(self.beat_valid, top_at_beat, self.top)

    def top_next_copy(self, m, name):
        """``top_next`` from a register of its own, for one group of many readers, so that
        no net of ``top_next`` crosses them all. The register starts at a value of its own
        (never read: ``top_next`` reads it only while a beat is held, which sets it), so
        that yosys does not merge the copies."""
        self._copies += 1
        return self._top_next_from(m, name, (1 << len(self.top)) - self._copies)

    def offset(self, address):
        """The byte of ``address`` within its slot."""
        return address[:self._slot_bits]

    def slots_from(self, address, span):
        """The ``span`` slots (``span < slots``) from the one holding ``address``, first
        slot lowest."""
        slot_bits = 8 * self.width
        wrapped = Cat(self.data, self.data[:slot_bits * (span - 1)])
        index = address[self._slot_bits:self._slot_bits + exact_log2(self.slots)]
        return wrapped.bit_select(Cat(Const(0, exact_log2(slot_bits)), index), slot_bits * span)
