"""INCEPTIONN-style gradient decompressor (docs/semantics.md section 4): compressed messages in,
``lanes`` float32 per cycle out."""

from dataclasses import dataclass
from typing import NamedTuple

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from codnn.golden.inceptionn import (
    BLOCK,
    DEFAULT_BOUND_BITS,
    LARGE_BITS,
    MAX_BLOCK_BYTES,
    RAW_EXPONENT,
    SMALL_BITS,
)
from codnn.hw.common.counters import counter
from codnn.hw.common.skid import SkidOutput
from codnn.hw.nic.engine_base import NicEngineBase, count_errors
from codnn.hw.nic.inceptionn_format import (
    block_size,
    clamp_bound_bits,
    half_prefixes,
    offsets_from_halves,
)
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.ring import ByteRing

__all__ = ["DECOMPRESSOR_LATENCY", "InceptionnDecompressor", "decode_value"]


#: ``InceptionnDecompressor.latency``, at every lane count.
DECOMPRESSOR_LATENCY = 11

#: Groups between a push and the hold (in the six unpack stages or the queue). A group
#: holds its credit for 7 cycles at least (U1 to U6, the queue's head), so 8 keep one
#: group per cycle moving.
_QUEUE_DEPTH = 8


class _Geometry(NamedTuple):
    lanes: int
    width: int              # bytes per beat
    blocks: int             # blocks per group
    group_values: int
    group_bytes: int        # the largest group
    sub_beats: int          # output beats per group
    span: int               # ring slots a group can touch
    slots: int              # ring slots


def _pushed_layout(g):
    """A group as the parser pushes it (a descriptor: one raw value, its count)."""
    return data.StructLayout({
        "values": range(g.group_values + 1), "final": 1, "descriptor": 1, "zero": 1,
        "bound_bits": 4, "first": range(MAX_BLOCK_BYTES + 1)})     # first: block 0's bytes


def _queued_layout(g):
    return data.StructLayout({"values": range(g.group_values + 1), "final": 1})


class _State(enum.Enum, shape=3):
    HEADER = 0          # waiting for a message's 4-byte count
    BLOCKS = 1
    TAIL = 2            # all blocks read: the message must end here
    PAD = 3             # the message ended early: zeros up to the count
    DROP = 4            # discard the rest of a bad message
    BYPASS = 5


def decode_value(m, tag, payload, bound_bits):
    """The float32 bits of one tag and payload, for ``bound_bits`` in 7..15."""
    small = tag == 1
    magnitude = Signal(LARGE_BITS, name="magnitude")
    m.d.comb += magnitude.eq(Mux(small, payload[:SMALL_BITS], payload[:LARGE_BITS]))
    top = Signal(4, name="top_bit")
    for k in range(LARGE_BITS):
        with m.If(magnitude[k]):
            m.d.comb += top.eq(k)
    shift = Signal(5, name="normalize")
    m.d.comb += shift.eq(23 - top)
    exponent = Signal(8, name="exponent")
    m.d.comb += exponent.eq(Mux(small, RAW_EXPONENT - bound_bits, RAW_EXPONENT - LARGE_BITS)
                            + top)
    bits = Signal(32, name="value")
    with m.Switch(tag):
        with m.Case(3):
            m.d.comb += bits.eq(payload)
        with m.Case(1, 2):
            sign = Mux(small, payload[SMALL_BITS], payload[LARGE_BITS])
            with m.If(magnitude == 0):
                m.d.comb += bits.eq(Cat(Const(0, 31), sign))
            with m.Else():
                m.d.comb += bits.eq(Cat((magnitude << shift)[:23], exponent, sign))
    return bits


def _bytes_at(data, position, last, nbytes):
    """The ``nbytes`` bytes of ``data`` from byte ``position``, which is at most ``last``."""
    return data[:8 * (last + nbytes)].bit_select(Cat(Const(0, 3), position), 8 * nbytes)


@dataclass(slots=True)
class _Parsing:
    """What the decompressor's stages share. From ``_message``: the geometry ``g``, the
    message's state, the next group's first byte (``parse_at``, and the parse loop's
    copy), the input's byte ring, the output's skid, the bad message strobe
    (``flag``); the group pushed (or a ``header``'s descriptor) into the unpack
    pipeline, the groups ``pending`` from the push to the hold, ``push``, ``room``
    for one more, the final group's stray tags (``check_pending``, ``stray_seen``),
    the hold's valid; the values left, the bound in force, the one requested (sampled
    at the first beat) clamped and whether it was out of range, the values of this
    group and whether it is the ``final`` one. From ``_parse_loop``: the next group's
    first tag word, its address after (``after``), whether its bytes are ``in_ring``
    and the bytes stored from ``parse_at`` on (``ahead``)."""

    g: _Geometry
    state: Signal
    parse_at: Signal
    parse_at_loop: Signal
    ring: ByteRing
    out: SkidOutput
    flag: Signal
    pushed: Signal
    header: Signal
    pending: Signal
    push: Signal
    room: Signal
    check_pending: Signal
    stray_seen: Signal
    hold_valid: Signal
    remaining: Signal
    bound_bits: Signal
    requested: Signal
    clamped: Value
    out_of_range: Value
    this_group: Signal
    final: Signal
    first: Signal = None
    after: Signal = None
    in_ring: Signal = None
    ahead: Signal = None


class InceptionnDecompressor(NicEngineBase):
    """Decode INCEPTIONN-style messages into value messages, ``lanes`` values per beat.

    Input: compressed messages (4-byte count ``n``, then ``ceil(n/8)`` blocks), ``last``
    on each message's final beat. The valid bytes of that beat are its lowest ones; every
    other beat is read whole (its ``keep`` is ignored). Output: a descriptor beat with
    ``n`` (``codnn.hw.nic.layouts``), then ``ceil(n / lanes)`` value beats, ``last`` on the final
    one. ``bound_bits`` and ``bypass`` are sampled at the clock edge that takes the
    message's first beat (so they may change from the next cycle on); in bypass its beats
    pass through unchanged (``keep`` all ones but on the last).

    Defined behaviour on bad input (a bad message raises ``error`` (sticky) and counts
    once in ``error_count``): a message cut before its count's blocks gives the values of
    every whole group of ``max(8, lanes)`` values received, then zeros up to ``n``; bytes
    past the last block, or a nonzero tag past the count, are dropped up to the input's
    ``last``; a message shorter than its count field, or whose count is above
    ``max_values``, gives no output (dropped up to its ``last``). ``bound_bits`` outside
    7..15 is clamped. The next message is read normally either way.

    Beats are stored in place in a ``codnn.hw.nic.ring.ByteRing``. Register tables, written
    with each beat, hold the size of a block starting at each byte of the ring and the
    address it ends at, and a register per byte whether that block is all stored, so the
    parse loop (the next group's address) is one table read per block. A parsed group is
    unpacked in a pipeline that never stalls (U1 its slots, U2 its bytes from the 4-byte
    word of its first, U3 its bytes from its first and its tags, U4 the payload bytes
    before each value in its half block, U5 its payload offsets, U6 its payloads) into a
    queue of decoded values; a parse needs room in the queue, counted by a register.
    ``o`` is driven through a ``codnn.hw.common.skid.SkidOutput``, so ``o.ready`` reaches no
    parsing logic.

    Latency: ``latency`` cycles from the take of a group's last input beat to its first
    values on ``o`` (held beat, ring and size table, parse, 6 unpack stages, queue,
    hold). Throughput: ``lanes`` values per cycle while the input delivers the compressed
    bytes (on average at most ``4 * lanes`` per ``max(lanes, 8)`` values) and the output
    is not backpressured; a message costs a few cycles more (its descriptor beat, and
    the switch from one message's bytes to the next).

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1).

    Attributes
    ----------
    i : In(stream.Signature(beat_layout(4 * lanes)))
    o : Out(stream.Signature(beat_layout(4 * lanes)))
    bound_bits : In(4)
    bypass : In(1)
    error : Out(1)
    error_count : Out(16)
    """

    @property
    def latency(self):
        """Cycles from the take of a group's last input beat to its first values on ``o``."""
        return DECOMPRESSOR_LATENCY

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"bound_bits": In(4, init=DEFAULT_BOUND_BITS), "bypass": In(1),
             "error": Out(1), "error_count": Out(16)}

    def __init__(self, *, lanes=8, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)
        #: High in the cycle the engine is done with a message's bytes, every fault of it
        #: counted (for a parent such as ``codnn.hw.nic.frame_path``; not a port of the top).
        self.message_end = Signal()
        #: High in the cycle a message is counted bad (at or before its ``message_end``).
        self.message_bad = Signal()

    def _geometry(self):
        lanes = self.lanes
        width = 4 * lanes
        blocks = max(1, lanes // BLOCK)
        group_bytes = MAX_BLOCK_BYTES * blocks
        # A group starts at any byte of a slot, so it spans up to ``span`` slots; with a
        # slot more, beats come in while a group is parsed.
        span = -(-(group_bytes + width - 1) // width)
        return _Geometry(lanes=lanes, width=width, blocks=blocks, group_values=BLOCK * blocks,
                         group_bytes=group_bytes, sub_beats=max(1, BLOCK // lanes),
                         span=span, slots=1 << ceil_log2(span + 1))

    def elaborate(self, platform):
        m = Module()
        g = self._geometry()
        k = self._message(m, g)
        self._parse_loop(m, k)
        take = Signal()
        m.d.comb += [take.eq(self.i.valid & self.i.ready),
                     k.ring.take.eq(take & (k.state != _State.BYPASS))]
        with m.If((k.state == _State.HEADER) & ~k.ring.beat_valid & take):
            m.d.sync += k.requested.eq(self.bound_bits)
        with m.Switch(k.state):
            with m.Case(_State.HEADER):
                self._header(m, k)
            self._group_states(m, k)
            with m.Case(_State.BYPASS):
                # The beat is offered whatever the handshake, so only the state selects it.
                passing = k.out.free
                m.d.comb += [self.i.ready.eq(passing), k.out.payload.eq(self.i.payload)]
                with m.If(~self.i.payload.last):
                    m.d.comb += k.out.payload.keep.eq(Const(-1, g.width))
                with m.If(self.i.valid & passing):          # not through ``take``'s logic
                    m.d.comb += k.out.write.eq(1)
                    with m.If(self.i.payload.last):
                        m.d.sync += k.state.eq(_State.HEADER)
        return m

    def _message(self, m, g):
        """The message's state and parse address, the input's byte ring, the output's
        skid, the bad messages counted; the unpack pipeline (``_unpack``) and its queue's
        sender (``_send``); the values left and the bound. Returns them (``_Parsing``)."""
        state = Signal(_State)
        parse_at = Signal(ceil_log2(g.slots * g.width) + 1)  # the next group's first byte
        # The parse loop's own copy, which the placer can keep by the tables it reads (its
        # initial value, never used, differs, so that yosys does not merge the two).
        parse_at_loop = Signal.like(parse_at, init=-1)
        ring = ByteRing(m, self.i, slots=g.slots, release=parse_at)
        out = SkidOutput.driving(m, self.o)
        flag = Signal()
        m.d.comb += self.message_bad.eq(
            count_errors(m, flag, self.error, self.error_count, between=state == _State.HEADER))
        # Pushed groups (and descriptors, as a group of one raw value) go down a pipeline
        # that never stalls, then into a queue whose head is the hold. ``pending`` counts
        # them from the push to the hold (at most the queue's depth, so the queue never
        # overflows), so a push needs only a register to know there is room.
        pushed, header = Signal(_pushed_layout(g)), Signal()
        pending = Signal(range(_QUEUE_DEPTH + 1))
        push, pop = Signal(), Signal()
        m.d.sync += pending.eq(pending + push - pop)
        room = Signal()
        m.d.comb += room.eq(pending < _QUEUE_DEPTH)
        check_pending, stray_seen = Signal(), Signal()      # the final group's stray tags
        queue = self._unpack(m, g, ring, parse_at, pushed, header, push,
                             check_pending, stray_seen)
        hold_valid = self._send(m, g, queue, out, pop)
        remaining = Signal(32)                  # values of the message not pushed yet
        bound_bits = Signal(4, init=DEFAULT_BOUND_BITS)
        requested = Signal(4, init=DEFAULT_BOUND_BITS)  # sampled at the first beat's take
        clamped, out_of_range = clamp_bound_bits(m, requested)
        this_group = Signal(range(g.group_values + 1))
        m.d.comb += this_group.eq(Mux(remaining < g.group_values, remaining, g.group_values))
        final = Signal()
        m.d.comb += final.eq(remaining <= g.group_values)
        return _Parsing(
            g=g, state=state, parse_at=parse_at, parse_at_loop=parse_at_loop, ring=ring,
            out=out, flag=flag, pushed=pushed, header=header, pending=pending, push=push,
            room=room,
            check_pending=check_pending, stray_seen=stray_seen, hold_valid=hold_valid,
            remaining=remaining, bound_bits=bound_bits, requested=requested,
            clamped=clamped, out_of_range=out_of_range, this_group=this_group, final=final)

    def _parse_loop(self, m, k):
        """The parse loop: the next group's address (``after``), its first block's tag
        word (``first``), and whether its bytes are in the ring (``in_ring``)."""
        g, ring, parse_at, parse_at_loop = k.g, k.ring, k.parse_at, k.parse_at_loop
        table, complete, after_block = self._block_tables(m, g, ring)
        index_bits = exact_log2(ring.size)
        first = Signal(6)
        m.d.comb += first.eq(table[parse_at[:index_bits]])
        after_first, after = Signal.like(parse_at), Signal.like(parse_at)
        m.d.comb += after_first.eq(after_block(parse_at_loop))
        in_ring = Signal()
        ahead = Signal.like(parse_at)           # bytes stored from parse_at on
        m.d.comb += ahead.eq(ring.top - parse_at_loop)
        full = ahead == ring.size
        if g.blocks == 2:
            second_at = after_first[:index_bits]
            m.d.comb += [
                after.eq(Mux(k.remaining > BLOCK, after_block(after_first), after_first)),
                in_ring.eq(full | (complete.bit_select(parse_at_loop[:index_bits], 1)
                                   & ((k.remaining <= BLOCK)
                                      | complete.bit_select(second_at, 1)))),
            ]
        else:
            m.d.comb += [after.eq(after_first),
                         in_ring.eq(full | complete.bit_select(parse_at_loop[:index_bits], 1))]
        k.first, k.after, k.in_ring, k.ahead = first, after, in_ring, ahead

    @staticmethod
    def _move_parse(m, k, address):
        m.d.sync += [k.parse_at.eq(address), k.parse_at_loop.eq(address)]

    def _finish(self, m, k):
        """The message ends: its bytes leave the ring, the next is awaited."""
        m.d.comb += [k.ring.finish.eq(1), self.message_end.eq(1)]
        m.d.sync += k.state.eq(_State.HEADER)
        self._move_parse(m, k, k.ring.start)

    def _header(self, m, k):
        """HEADER: the message's count, checked; its descriptor pushed, or the message
        dropped; or bypass."""
        ring, pushed = k.ring, k.pushed
        count = ring.beat.data[:32]
        # ``bypass`` counts until the first beat is taken (it is held then).
        m.d.comb += [self.i.ready.eq((ring.beat_valid | ~self.bypass) & k.room & ring.room),
                     k.header.eq(1), pushed.values.eq(k.g.lanes),
                     pushed.final.eq(count == 0), pushed.descriptor.eq(1),
                     pushed.bound_bits.eq(k.clamped)]
        # Bypass starts once the previous message's values have all gone, so that in
        # BYPASS only the input drives ``out``.
        with m.If(self.i.valid & self.bypass & ~ring.beat_valid & ~k.hold_valid
                  & (k.pending == 0)):
            m.d.sync += k.state.eq(_State.BYPASS)
        with m.If(ring.beat_valid & ring.beat.last & (ring.beat_bytes < 4)):
            m.d.comb += k.flag.eq(1)            # shorter than its count: no output
            self._finish(m, k)
        with m.Elif(ring.beat_valid & (count > self.max_values)):
            m.d.comb += k.flag.eq(1)            # dropped, no output
            m.d.sync += k.state.eq(_State.DROP)
        with m.Elif(ring.beat_valid):
            m.d.comb += [k.push.eq(1), k.flag.eq(k.out_of_range)]
            m.d.sync += [k.bound_bits.eq(k.clamped), k.remaining.eq(count),
                         k.stray_seen.eq(0),
                         k.state.eq(Mux(count == 0, _State.TAIL, _State.BLOCKS))]
            self._move_parse(m, k, ring.start + 4)

    def _group_states(self, m, k):
        """BLOCKS (a group pushed once its bytes are in), PAD (zeros for a cut message),
        TAIL (the message must end after its last group, and that group's tags past the
        count must be 0), DROP: cases of ``elaborate``'s switch."""
        ring, pushed, state = k.ring, k.pushed, k.state

        def offer_group(zero):
            # A state offers its group's fields to U1 whether or not it pushes, so that
            # only the state selects them and U1's valid bit alone waits for the decision.
            m.d.comb += [pushed.values.eq(k.this_group), pushed.final.eq(k.final),
                         pushed.zero.eq(zero), pushed.bound_bits.eq(k.bound_bits),
                         pushed.first.eq(k.first)]

        def push_group():
            m.d.comb += k.push.eq(1)
            m.d.sync += k.remaining.eq(k.remaining - k.this_group)
            with m.If(k.final):
                m.d.sync += [state.eq(_State.TAIL), k.check_pending.eq(1)]

        with m.Case(_State.BLOCKS):
            m.d.comb += self.i.ready.eq(ring.room)
            offer_group(0)
            with m.If(k.in_ring):
                with m.If(k.room):
                    push_group()
                    self._move_parse(m, k, k.after)
            with m.Elif(ring.ended):
                # Cut: the bytes the next group needs will not come.
                m.d.comb += k.flag.eq(1)
                m.d.sync += state.eq(_State.PAD)
                self._move_parse(m, k, ring.top)
        with m.Case(_State.PAD):
            offer_group(1)
            with m.If(k.room):
                push_group()
        with m.Case(_State.TAIL):
            m.d.comb += self.i.ready.eq(ring.room)
            with m.If(~k.check_pending):
                with m.If(k.stray_seen | (k.ahead != 0)):
                    m.d.comb += k.flag.eq(1)
                    m.d.sync += state.eq(_State.DROP)
                with m.Elif(ring.ended):
                    self._finish(m, k)
        with m.Case(_State.DROP):
            held_last = ring.beat_valid & ring.beat.last
            m.d.comb += self.i.ready.eq(~ring.ended & ~held_last)
            with m.If(ring.ended | held_last):
                self._finish(m, k)

    def _unpack(self, m, g, ring, parse_at, pushed, header, push, check_pending, stray_seen):
        """The unpack pipeline (U1 to U6, one stage a cycle, never stalled) from a pushed
        group to the queue of decoded values, which it returns; U3 records whether the
        final group has nonzero tags past the count (``stray_seen``)."""
        width, group_values, group_bytes = g.width, g.group_values, g.group_bytes
        # U1: the slots holding the group (a descriptor: its count, from the held beat).
        u1, u2, u3 = Signal(pushed.shape()), Signal(pushed.shape()), Signal(pushed.shape())
        u1_valid, u2_valid, u3_valid = Signal(), Signal(), Signal()
        u1_slots = Signal(8 * width * g.span)
        u1_offset = Signal(range(width))
        from_parse_at = Signal.like(u1_slots)
        m.d.comb += from_parse_at.eq(ring.slots_from(parse_at, g.span))
        m.d.sync += [u1_valid.eq(push), u1.eq(pushed),
                     u1_slots.eq(from_parse_at),
                     u1_slots[:32].eq(Mux(header, ring.beat.data[:32], from_parse_at[:32])),
                     u1_offset.eq(Mux(header, 0, ring.offset(parse_at)))]
        # U2: the group's bytes from the 4-byte word holding its first (two shifts of a
        # few levels each rather than one of many).
        u2_bytes = Signal(8 * (group_bytes + 3))
        u2_offset = Signal(2)
        m.d.sync += [u2_valid.eq(u1_valid), u2.eq(u1), u2_offset.eq(u1_offset[:2]),
                     u2_bytes.eq(u1_slots.bit_select(Cat(Const(0, 5), u1_offset[2:]),
                                                     len(u2_bytes)))]
        # U3: the group's bytes from its first; its tags (after the count: all 0).
        u3_bytes = Signal(8 * group_bytes)
        m.d.sync += [u3_valid.eq(u2_valid), u3.eq(u2),
                     u3_bytes.eq(u2_bytes.bit_select(Cat(Const(0, 3), u2_offset),
                                                     8 * group_bytes))]
        tag_words = [u3_bytes[:16]]
        if g.blocks == 2:
            tag_words.append(Mux(u3.values > BLOCK,
                                 _bytes_at(u3_bytes, u3.first, MAX_BLOCK_BYTES, 2), 0))
        tags = Signal(2 * group_values)
        m.d.comb += tags.eq(Mux(u3.descriptor, 3, Mux(u3.zero, 0, Cat(*tag_words))))
        with m.If(u3_valid & u3.final & ~u3.descriptor):
            m.d.sync += [check_pending.eq(0),
                         stray_seen.eq((tags >> (2 * u3.values)).any())]
        # U4: each half block's payload bytes before each of its values.
        item = data.StructLayout({
            "tags": data.ArrayLayout(2, group_values), "values": range(group_values + 1),
            "final": 1, "descriptor": 1, "bound_bits": 4})
        u4 = Signal(item)
        u4_valid, u4_bytes, u4_first = Signal(), Signal(8 * group_bytes), Signal.like(u3.first)
        m.d.sync += [u4_valid.eq(u3_valid), u4_bytes.eq(u3_bytes), u4_first.eq(u3.first),
                     u4.tags.eq(tags), u4.values.eq(u3.values), u4.final.eq(u3.final),
                     u4.descriptor.eq(u3.descriptor), u4.bound_bits.eq(u3.bound_bits)]
        u4_halves = []
        for j in range(g.blocks):
            block_tags = [tags[2 * (BLOCK * j + i):2 * (BLOCK * j + i) + 2]
                          for i in range(BLOCK)]
            halves = [[Signal(total.shape(), name=f"u4_before_b{j}_h{h}_{i}")
                       for i, total in enumerate(sums)]
                      for h, sums in enumerate(half_prefixes(block_tags))]
            for regs, sums in zip(halves, half_prefixes(block_tags)):
                m.d.sync += [reg.eq(total) for reg, total in zip(regs, sums)]
            u4_halves.append(halves)
        # U5: the payload offsets.
        u5 = Signal(item)
        u5_valid, u5_bytes = Signal(), Signal(8 * group_bytes)
        u5_offsets = Signal(data.ArrayLayout(range(group_bytes), group_values))
        m.d.sync += [u5_valid.eq(u4_valid), u5_bytes.eq(u4_bytes), u5.eq(u4)]
        for j, halves in enumerate(u4_halves):
            for i, offset in enumerate(offsets_from_halves(halves)[:BLOCK]):
                m.d.sync += u5_offsets[BLOCK * j + i].eq(offset if j == 0
                                                         else u4_first + offset)
        # U6: the payloads; their float32 values go into the queue.
        u6 = Signal(item)
        u6_valid = Signal()
        u6_payloads = Signal(data.ArrayLayout(32, group_values))
        m.d.sync += [u6_valid.eq(u5_valid), u6.eq(u5)]
        for k in range(group_values):
            tag = u5.tags[k]
            block, i = divmod(k, BLOCK)
            raw = _bytes_at(u5_bytes, u5_offsets[k], MAX_BLOCK_BYTES * block + 2 + 4 * i, 4)
            payload = Mux(tag == 3, raw, Mux(tag == 2, raw[:16], Mux(tag == 1, raw[:8], 0)))
            m.d.sync += u6_payloads[k].eq(Mux(u5.descriptor, u5_bytes[:32], payload) if k == 0
                                          else payload)
        m.submodules.queue = queue = SyncFIFO(width=_queued_layout(g).size + 32 * group_values,
                                              depth=_QUEUE_DEPTH)
        m.d.comb += [queue.w_en.eq(u6_valid),
                     queue.w_data.eq(Cat(u6.values, u6.final,
                                         *(decode_value(m, u6.tags[k], u6_payloads[k],
                                                       u6.bound_bits)
                                           for k in range(group_values))))]
        return queue

    def _send(self, m, g, queue, out, pop):
        """The hold: the queue's head group, sent to ``out`` ``lanes`` values per beat;
        drives ``pop`` and returns whether the hold has values to send."""
        lanes = g.lanes
        hold = Signal(_queued_layout(g))
        hold_values = Signal(32 * g.group_values)
        hold_valid = Signal()
        hold_sub = counter(g.sub_beats)
        emit, last_beat = Signal(), Signal()         # last_beat: the hold's values all go
        m.d.comb += [emit.eq(hold_valid & out.free), last_beat.eq(hold.values <= lanes)]
        sent = Mux(hold.values < lanes, hold.values, lanes)
        m.d.comb += [
            out.payload.data.eq(hold_values.word_select(hold_sub, 32 * lanes)),
            out.payload.keep.eq(Cat((sent > k).replicate(4) for k in range(lanes))),
            out.payload.last.eq(hold.final & last_beat),
        ]
        with m.If(emit):
            m.d.comb += out.write.eq(1)
            m.d.sync += [hold.values.eq(hold.values - sent),
                         hold_sub.eq(Mux(last_beat, 0, hold_sub + 1))]
            with m.If(last_beat):
                m.d.sync += hold_valid.eq(0)
        m.d.comb += [pop.eq(queue.r_rdy & (~hold_valid | (emit & last_beat))),
                     queue.r_en.eq(pop)]
        with m.If(pop):
            m.d.sync += [hold_valid.eq(1), hold_sub.eq(0),
                         Cat(hold, hold_values).eq(queue.r_data)]
        return hold_valid

    def _block_tables(self, m, g, ring):
        """The size of a block starting at each byte of the ring (``table``), whether that
        block is all stored (``complete``, a bit per byte) and ``after_block(address)``,
        the address after the block at ``address``: a table read, no adder."""
        width, slots = g.width, g.slots
        # The address each block ends at (``jump``: below twice the ring's size, so its top
        # bit says the block wraps) is a second register table; both are written with each
        # beat: at its bytes but the last, and at the byte before it (the previous slot's
        # last byte, and the beat's first). The sizes are computed from the input beat as it
        # is taken and held with it.
        index_bits = exact_log2(ring.size)
        slot_bits = exact_log2(width)
        # Every computed size is 2 or more; so is the initial value, so that a byte whose
        # block was never written reads as incomplete while nothing is stored after it.
        table = Signal(data.ArrayLayout(6, ring.size), init=[2] * ring.size)
        table_next = Signal(data.ArrayLayout(6, ring.size))
        jump = Signal(data.ArrayLayout(index_bits + 1, ring.size))
        incoming = self.i.payload.data
        last_byte = Signal(8)                   # of the beat taken before
        with m.If(ring.take):
            m.d.sync += last_byte.eq(incoming[-8:])

        def size_of(word, j, name):
            """The held size of the block with tag word ``word`` and the held byte where it
            ends, from byte ``j`` of a slot."""
            size, reach = Signal(6, name=name), Signal(range(width + 35), name=f"{name}_end")
            computed = Signal(6, name=f"{name}_in")
            m.d.comb += computed.eq(block_size([word[2 * t:2 * t + 2] for t in range(BLOCK)]))
            m.d.sync += [size.eq(computed), reach.eq(j + computed)]
            return size, reach

        in_beat = [size_of(incoming[8 * j:8 * j + 16], j, f"size_in_beat{j}")
                   for j in range(width - 1)]
        before = size_of(Cat(last_byte, incoming[:8]), width - 1, "size_before")
        for q in range(ring.size):
            slot, j = divmod(q, width)
            if j < width - 1:
                (new, reach), selected = in_beat[j], ring.selected[slot]
            else:
                (new, reach), selected = before, ring.selected[(slot + 1) % slots]
            m.d.comb += table_next[q].eq(Mux(selected, new, table[q]))
            with m.If(selected):
                m.d.sync += jump[q].eq(Cat(reach[:slot_bits], reach[slot_bits:] + slot))
        m.d.sync += table.eq(table_next)

        # ``complete`` is computed from the table's and ``top``'s next values, so that no
        # comparison is in the parse loop. Read only at ``parse_at``, which is at most a
        # ring behind ``top``: at exactly a ring (0 apart modulo the ring) the ring is full,
        # so the group is in. ``top_next`` reaches them through a copy per 32 bytes.
        complete = Signal(ring.size)
        top_next = [ring.top_next_copy(m, f"top_at_beat_{k}")
                    for k in range(-(-ring.size // 32))]
        for q in range(ring.size):
            m.d.sync += complete[q].eq((top_next[q // 32][:index_bits] - q)[:index_bits]
                                       >= table_next[q])

        def after_block(address):
            end = jump[address[:index_bits]]
            return Cat(end[:index_bits], address[index_bits] ^ end[index_bits])

        return table, complete, after_block
