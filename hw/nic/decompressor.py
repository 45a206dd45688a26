"""INCEPTIONN-style gradient decompressor (SPEC.md section 4): compressed messages in,
``lanes`` float32 per cycle out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hw.common.skid import SkidOutput
from hw.nic.compressor import BLOCK_BYTES, block_offsets, block_size, clamp_bound_bits
from hw.nic.layouts import StreamEngine, count_errors
from hw.nic.window import ByteWindow

__all__ = ["InceptionnDecompressor", "decode_value"]


#: Groups between a take and the hold (in the two unpack stages or the queue). A group
#: holds its credit for 3 cycles at least (U1, U2, the queue's head), so 4 keep one group
#: per cycle moving.
_QUEUE_DEPTH = 4


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
    magnitude = Signal(15, name="magnitude")
    m.d.comb += magnitude.eq(Mux(small, payload[:7], payload[:15]))
    top = Signal(4, name="top_bit")
    for k in range(15):
        with m.If(magnitude[k]):
            m.d.comb += top.eq(k)
    shift = Signal(5, name="normalize")
    m.d.comb += shift.eq(23 - top)
    exponent = Signal(8, name="exponent")
    m.d.comb += exponent.eq(Mux(small, 127 - bound_bits, 112) + top)
    bits = Signal(32, name="value")
    with m.Switch(tag):
        with m.Case(3):
            m.d.comb += bits.eq(payload)
        with m.Case(1, 2):
            sign = Mux(small, payload[7], payload[15])
            with m.If(magnitude == 0):
                m.d.comb += bits.eq(Cat(Const(0, 31), sign))
            with m.Else():
                m.d.comb += bits.eq(Cat((magnitude << shift)[:23], exponent, sign))
    return bits


def _bytes_at(data, position, last, nbytes):
    """The ``nbytes`` bytes of ``data`` from byte ``position``, which is at most ``last``."""
    return data[:8 * (last + nbytes)].bit_select(Cat(Const(0, 3), position), 8 * nbytes)


def _select(m, values, index, name):
    """``values[index]``, as one multiplexer."""
    selected = Signal(max(len(value) for value in values), name=name)
    with m.Switch(index):
        for k, value in enumerate(values):
            with m.Case(k):
                m.d.comb += selected.eq(value)
    return selected


class InceptionnDecompressor(StreamEngine):
    """Decode INCEPTIONN-style messages into value messages, ``lanes`` values per beat.

    Input: compressed messages (4-byte count ``n``, then ``ceil(n/8)`` blocks), ``last``
    on each message's final beat, the valid bytes of a beat its lowest ones. Output: a
    descriptor beat with ``n`` (``hw.nic.layouts``), then ``ceil(n / lanes)`` value beats,
    ``last`` on the final one. ``bound_bits`` and ``bypass`` are read at the start of each
    message; in bypass its bytes pass through unchanged (repacked as full beats).

    Defined behaviour on bad input (each raises ``error`` (sticky) and counts in
    ``error_count``): a message cut before its count's blocks gives the values of every
    whole group of ``max(8, lanes)`` values received, then zeros up to ``n``; bytes past
    the last block, or a nonzero tag past the count, are dropped up to the input's
    ``last``; a message shorter than its count field gives no output. ``bound_bits``
    outside 7..15 is clamped. The next message is read normally either way.

    A group's tag words are parsed a cycle before the group is taken, so that taking it
    shifts the byte window by a registered size. A taken group is unpacked in a pipeline
    that never stalls, into a queue; a take needs room in the queue, counted by a
    register. ``o`` is driven through a ``hw.common.skid.SkidOutput``, so ``o.ready``
    reaches no parsing logic.

    Latency: ``LATENCY`` cycles from the cycle a group's bytes are all buffered to its
    first values on ``o`` (parse, take, 2 unpack stages, queue, hold; one less when its
    tag words came earlier). Throughput: ``lanes`` values per cycle while the input
    delivers the compressed bytes (on average at most ``4 * lanes`` per ``max(lanes, 8)``
    values) and the output is not backpressured; a message costs a few cycles more (its
    descriptor beat, and the switch from one message's bytes to the next).

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.

    Attributes
    ----------
    i : In(stream.Signature(beat_layout(4 * lanes)))
    o : Out(stream.Signature(beat_layout(4 * lanes)))
    bound_bits : In(4)
    bypass : In(1)
    error : Out(1)
    error_count : Out(16)
    """

    #: Cycles from a group's last byte buffered to its first values on ``o``.
    LATENCY = 6

    def __init__(self, *, lanes=8):
        super().__init__(lanes, {
            "bound_bits": In(4, init=10), "bypass": In(1),
            "error": Out(1), "error_count": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        width = 4 * lanes
        blocks = max(1, lanes // 8)
        group_values = 8 * blocks
        group_bytes = BLOCK_BYTES * blocks
        sub_beats = max(1, 8 // lanes)
        # Room for a parsed group, the next group's tag words and a beat being taken, and a
        # beat more: with less, compressible messages see gaps in the output.
        size = group_bytes + 2 * blocks + 2 * width

        state = Signal(_State)
        head_size = Signal(range(group_bytes + 1))    # the parsed group's bytes (see below)
        window = ByteWindow(m, self.i, size=size, discard=state == _State.DROP,
                            amounts=[Const(4), head_size])
        fill, ended = window.fill, window.ended
        out = SkidOutput(m, self.o)

        flag = Signal()
        count_errors(m, flag, self.error, self.error_count)

        # Taken groups (and descriptors, as a group of one raw value) go down a pipeline
        # that never stalls: U1 the group's bytes, U2 its payload offsets, then its values
        # into a queue whose head is the hold. ``pending`` counts them from the take to the
        # hold (at most the queue's depth, so the queue never overflows), so a take needs
        # only a register to know there is room.
        item = data.StructLayout({
            "tags": data.ArrayLayout(2, group_values), "values": range(group_values + 1),
            "final": 1, "descriptor": 1, "bound_bits": 4})
        pending = Signal(range(_QUEUE_DEPTH + 1))
        push, pop = Signal(), Signal()
        m.d.sync += pending.eq(pending + push - pop)
        room = Signal()
        m.d.comb += room.eq(pending < _QUEUE_DEPTH)

        u1, u2 = Signal(item), Signal(item)
        u1_valid, u2_valid = Signal(), Signal()
        u1_bytes, u2_bytes = Signal(8 * group_bytes), Signal(8 * group_bytes)
        u1_first = Signal(range(BLOCK_BYTES + 1))           # bytes of the first block
        u2_offsets = Signal(data.ArrayLayout(range(group_bytes), group_values))
        m.d.sync += [u1_valid.eq(push), u2_valid.eq(u1_valid), u2.eq(u1),
                     u2_bytes.eq(u1_bytes)]
        for j in range(blocks):
            tags = [u1.tags[8 * j + i] for i in range(8)]
            for i, offset in enumerate(block_offsets(tags)[:8]):
                m.d.sync += u2_offsets[8 * j + i].eq(offset if j == 0 else u1_first + offset)
        payloads = []
        for k in range(group_values):
            tag = u2.tags[k]
            raw = _bytes_at(u2_bytes, u2_offsets[k], BLOCK_BYTES * (k // 8) + 2 + 4 * (k % 8),
                            4)
            payload = Mux(tag == 3, raw, Mux(tag == 2, raw[:16], Mux(tag == 1, raw[:8], 0)))
            payloads.append(Mux(u2.descriptor, u2_bytes[:32], payload) if k == 0 else payload)
        m.submodules.queue = queue = SyncFIFO(width=len(u2.as_value()) + 32 * group_values,
                                              depth=_QUEUE_DEPTH)
        m.d.comb += [queue.w_en.eq(u2_valid), queue.w_data.eq(Cat(u2, *payloads))]

        # The hold: the queue's head group, sent out ``lanes`` values per beat.
        hold = Signal(item)
        hold_payloads = Signal(data.ArrayLayout(32, group_values))
        hold_valid = Signal()
        hold_sub = Signal(range(sub_beats))
        emit, last_beat = Signal(), Signal()         # last_beat: the hold's values all go
        m.d.comb += [emit.eq(hold_valid & out.free), last_beat.eq(hold.values <= lanes)]
        with m.If(emit):
            values = []
            for k in range(lanes):
                index = hold_sub * lanes + k if sub_beats > 1 else k
                values.append(decode_value(m, hold.tags[index], hold_payloads[index],
                                           hold.bound_bits))
            sent = Mux(hold.values < lanes, hold.values, lanes)
            m.d.comb += [
                out.write.eq(1), out.payload.data.eq(Cat(*values)),
                out.payload.keep.eq(Cat((sent > k).replicate(4) for k in range(lanes))),
                out.payload.last.eq(hold.final & last_beat),
            ]
            m.d.sync += [hold.values.eq(hold.values - sent),
                         hold_sub.eq(Mux(last_beat, 0, hold_sub + 1))]
            with m.If(last_beat):
                m.d.sync += hold_valid.eq(0)
        m.d.comb += [pop.eq(queue.r_rdy & (~hold_valid | (emit & last_beat))),
                     queue.r_en.eq(pop)]
        with m.If(pop):
            m.d.sync += [hold_valid.eq(1), hold_sub.eq(0),
                         Cat(hold, hold_payloads).eq(queue.r_data)]

        remaining = Signal(32)                  # values of the message not pushed yet
        bound_bits = Signal(4, init=10)
        clamped, out_of_range = clamp_bound_bits(m, self.bound_bits)
        this_group = Signal(range(group_values + 1))
        m.d.comb += this_group.eq(Mux(remaining < group_values, remaining, group_values))
        final = Signal()
        m.d.comb += final.eq(remaining <= group_values)

        def push_group(tags):
            m.d.comb += push.eq(1)
            m.d.sync += [u1.tags.eq(tags), u1.values.eq(this_group), u1.final.eq(final),
                         u1.descriptor.eq(0), u1.bound_bits.eq(bound_bits),
                         remaining.eq(remaining - this_group)]
            with m.If(final):
                m.d.sync += state.eq(_State.TAIL)

        # The parsed group: the window's first ``head_size`` bytes, its tags and block
        # sizes found a cycle ahead, so that taking it shifts the window by a register.
        head_valid, head_stray = Signal(), Signal()
        head_tags = Signal(data.ArrayLayout(2, group_values))
        head_first = Signal(range(BLOCK_BYTES + 1))          # its first block's bytes
        unparsed = Signal(32)                                # values of no parsed group yet

        # Parse the group after the head's, at head_size. The size of a block starting at
        # each byte the next group's blocks can start at comes from the window's registers,
        # so that the loop through head_size is a multiplexer.
        last_start = group_bytes + BLOCK_BYTES * (blocks - 1)
        sizes_at = [block_size([window.data[8 * p + 2 * i:8 * p + 2 * i + 2] for i in range(8)])
                    for p in range(last_start + 1)]
        tag_words, sizes, ends = [], [], []
        start = head_size
        for j in range(blocks):
            tag_word = Signal(16, name=f"next_tags{j}")
            m.d.comb += tag_word.eq(_bytes_at(window.data, start, group_bytes + BLOCK_BYTES * j,
                                              2))
            tag_words.append(tag_word)
            sizes.append(_select(m, sizes_at[:group_bytes + BLOCK_BYTES * j + 1], start,
                                 f"next_size{j}"))
            ends.append(start + 2)
            start = head_size + sizes[-1]
        two_blocks = unparsed > 8 if blocks == 2 else Const(0)
        next_size = Mux(two_blocks, sizes[0] + sizes[-1], sizes[0])
        tags_present = (fill >= ends[0]) & (~two_blocks | (fill >= ends[-1]))
        parse_group = Mux(unparsed < group_values, unparsed, group_values)
        parse_final = unparsed <= group_values
        group_tags = Mux(two_blocks, Cat(*tag_words), tag_words[0])
        # Tags of the values past the count in the message's last group must be 0.
        stray = parse_final & (group_tags >> (2 * parse_group)).any()

        in_blocks = state == _State.BLOCKS
        take, parse = Signal(), Signal()
        m.d.comb += [take.eq(in_blocks & head_valid & room & (fill >= head_size)),
                     parse.eq(in_blocks & (~head_valid | take) & (unparsed != 0)
                              & tags_present)]
        m.d.sync += u1_bytes.eq(window.data[:8 * group_bytes])
        with m.If(take):
            m.d.sync += [head_valid.eq(0), head_size.eq(0), u1_first.eq(head_first)]
        with m.If(parse):
            m.d.sync += [head_valid.eq(1), head_size.eq(next_size), head_stray.eq(stray),
                         head_tags.eq(Cat(*tag_words)), head_first.eq(sizes[0]),
                         unparsed.eq(unparsed - parse_group)]

        with m.Switch(state):
            with m.Case(_State.HEADER):
                with m.If((fill != 0) | ended):
                    with m.If(self.bypass):
                        m.d.sync += state.eq(_State.BYPASS)
                    with m.Elif(fill >= 4):
                        with m.If(room):
                            count = window.data[:32]
                            m.d.comb += [window.drop[0].eq(1), push.eq(1),
                                         flag.eq(out_of_range)]
                            m.d.sync += [
                                u1.tags.eq(3), u1.values.eq(lanes), u1.final.eq(count == 0),
                                u1.descriptor.eq(1), u1.bound_bits.eq(clamped),
                                bound_bits.eq(clamped), remaining.eq(count), unparsed.eq(count),
                                state.eq(Mux(count == 0, _State.TAIL, _State.BLOCKS)),
                            ]
                    with m.Elif(ended):
                        m.d.comb += [flag.eq(1), window.clear.eq(1), window.finish.eq(1)]
            with m.Case(_State.BLOCKS):
                with m.If(take):
                    m.d.comb += window.drop[1].eq(1)
                    push_group(head_tags)
                    with m.If(head_stray):
                        m.d.comb += flag.eq(1)
                        m.d.sync += state.eq(_State.DROP)
                with m.Elif(ended & Mux(head_valid, fill < head_size, ~tags_present)):
                    # Cut: the bytes the next group needs will not come.
                    m.d.comb += [flag.eq(1), window.clear.eq(1)]
                    m.d.sync += [state.eq(_State.PAD), head_valid.eq(0), head_size.eq(0)]
            with m.Case(_State.PAD):
                with m.If(room):
                    push_group(0)
            # Bypassed bytes go out once the previous message's values have.
            window.message_end_cases(m, state, _State, flag=flag, out=out,
                                     out_free=out.free & ~hold_valid & (pending == 0))
        return m
