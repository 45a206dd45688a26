"""INCEPTIONN-style gradient decompressor (SPEC.md section 4): compressed messages in,
``lanes`` float32 per cycle out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum
from amaranth.lib.wiring import In, Out

from hw.nic.compressor import BLOCK_BYTES
from hw.nic.layouts import StreamEngine, count_errors
from hw.nic.window import ByteWindow

__all__ = ["InceptionnDecompressor", "decode_value"]


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


def _block_size(m, tag_word, name):
    """Bytes of a block (2..34) from its tag word."""
    size = Signal(range(BLOCK_BYTES + 1), name=name)
    m.d.comb += size.eq(2 + sum(Mux(tag_word[2 * i:2 * i + 2] == 3, 4, tag_word[2 * i:2 * i + 2])
                                for i in range(8)))
    return size


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

    Latency: 2 cycles from the cycle a block's last byte is buffered to its first values
    in an output beat. Throughput: ``lanes`` values per cycle while the input delivers the
    compressed bytes (on average at most ``4 * lanes`` per ``max(lanes, 8)`` values) and
    the output is not backpressured; a message costs 2 cycles more (its descriptor beat and
    its end).

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

    #: Cycles from a block's last byte buffered to its values in an output beat.
    LATENCY = 2

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
        sub_beats = max(1, 8 // lanes)
        size = BLOCK_BYTES * blocks + 2 * width      # room to take a beat while a block waits

        state = Signal(_State)
        window = ByteWindow(m, self.i, size=size, discard=state == _State.DROP)
        fill, ended, consume, clear = window.fill, window.ended, window.consume, window.clear

        flag = Signal()
        count_errors(m, flag, self.error, self.error_count)

        # The hold: one parsed group, sent out ``lanes`` values per beat.
        hold_tags = Signal(data.ArrayLayout(2, group_values))
        hold_payloads = Signal(data.ArrayLayout(32, group_values))
        hold_valid, hold_final = Signal(), Signal()
        hold_left = Signal(range(group_values + 1))      # values of the group not yet sent
        hold_sub = Signal(range(sub_beats))
        bound_bits = Signal(4, init=10)
        out_free = Signal()
        m.d.comb += out_free.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        emit = Signal()
        m.d.comb += emit.eq(hold_valid & out_free)
        hold_free = Signal()
        m.d.comb += hold_free.eq(~hold_valid | (emit & (hold_left <= lanes)))
        with m.If(emit):
            values = []
            for k in range(lanes):
                index = hold_sub * lanes + k if sub_beats > 1 else k
                values.append(decode_value(m, hold_tags[index], hold_payloads[index],
                                           bound_bits))
            sent = Mux(hold_left < lanes, hold_left, lanes)
            m.d.sync += [
                self.o.valid.eq(1), self.o.payload.data.eq(Cat(*values)),
                self.o.payload.keep.eq(Cat((sent > k).replicate(4) for k in range(lanes))),
                self.o.payload.last.eq(hold_final & (hold_left <= lanes)),
                hold_left.eq(hold_left - sent),
                hold_sub.eq(Mux(hold_left <= lanes, 0, hold_sub + 1)),
            ]
            with m.If(hold_left <= lanes):
                m.d.sync += hold_valid.eq(0)

        remaining = Signal(32)
        this_group = Signal(range(group_values + 1))
        m.d.comb += this_group.eq(Mux(remaining < group_values, remaining, group_values))
        final = Signal()
        m.d.comb += final.eq(remaining <= group_values)

        def load_hold(tags, payloads):
            m.d.sync += [hold_valid.eq(1), hold_final.eq(final), hold_left.eq(this_group),
                         hold_sub.eq(0), remaining.eq(remaining - this_group),
                         hold_tags.eq(tags), hold_payloads.eq(payloads)]
            with m.If(final):
                m.d.sync += state.eq(_State.TAIL)

        # Parse the blocks at the window's head.
        parsed_tags, parsed_payloads = [], []
        base = Const(0, 6)
        sizes = []
        for j in range(blocks):
            block = Signal(8 * BLOCK_BYTES, name=f"block{j}")
            m.d.comb += block.eq(window.data >> Cat(Const(0, 3), base))
            tag_word = block[:16]
            sizes.append(_block_size(m, tag_word, f"block{j}_size"))
            offset = Const(2, 6)
            for i in range(8):
                tag = tag_word[2 * i:2 * i + 2]
                nbytes = Mux(tag == 3, 4, tag)
                field = Signal(32, name=f"block{j}_payload{i}")
                raw = (block >> Cat(Const(0, 3), offset))[:32]
                m.d.comb += field.eq(Mux(tag == 3, raw, Mux(tag == 2, raw[:16],
                                                             Mux(tag == 1, raw[:8], 0))))
                parsed_tags.append(tag)
                parsed_payloads.append(field)
                next_offset = Signal(6, name=f"block{j}_offset{i + 1}")
                m.d.comb += next_offset.eq(offset + nbytes)
                offset = next_offset
            base = sizes[0]
        wanted = Signal(range(BLOCK_BYTES * blocks + 1))        # bytes of this group's blocks
        present = Signal()                                       # all of them buffered
        first_present = (fill >= 2) & (fill >= sizes[0])
        m.d.comb += [wanted.eq(sizes[0]), present.eq(first_present)]
        if blocks == 2:
            with m.If(remaining > 8):
                m.d.comb += [wanted.eq(sizes[0] + sizes[1]),
                             present.eq(first_present & (fill >= sizes[0] + 2)
                                        & (fill >= sizes[0] + sizes[1]))]
        # Tags of the values past the count in the message's last group must be 0.
        group_tags = Signal(2 * group_values)
        m.d.comb += group_tags.eq(Cat(*parsed_tags[:8]))
        if blocks == 2:
            with m.If(remaining > 8):
                m.d.comb += group_tags.eq(Cat(*parsed_tags))
        stray = Signal()
        m.d.comb += stray.eq(final & (group_tags >> (2 * this_group)).any())

        with m.Switch(state):
            with m.Case(_State.HEADER):
                with m.If((fill != 0) | ended):
                    with m.If(self.bypass):
                        m.d.sync += state.eq(_State.BYPASS)
                    with m.Elif(fill >= 4):
                        with m.If(~hold_valid & out_free):
                            count = window.data[:32]
                            requested = self.bound_bits
                            m.d.comb += [consume.eq(4), flag.eq((requested < 7)
                                                                | (requested > 15))]
                            m.d.sync += [
                                bound_bits.eq(Mux(requested < 7, 7,
                                                  Mux(requested > 15, 15, requested))),
                                remaining.eq(count),
                                state.eq(Mux(count == 0, _State.TAIL, _State.BLOCKS)),
                                self.o.valid.eq(1), self.o.payload.data.eq(count),
                                self.o.payload.keep.eq(Const(-1, width)),
                                self.o.payload.last.eq(count == 0),
                            ]
                    with m.Elif(ended):
                        m.d.comb += [flag.eq(1), clear.eq(1), window.finish.eq(1)]
            with m.Case(_State.BLOCKS):
                with m.If(present & hold_free):
                    m.d.comb += consume.eq(wanted)
                    load_hold(Cat(*parsed_tags), Cat(*parsed_payloads))
                    with m.If(stray):
                        m.d.comb += flag.eq(1)
                        m.d.sync += state.eq(_State.DROP)
                with m.Elif(ended & ~present):
                    m.d.comb += [flag.eq(1), clear.eq(1)]
                    m.d.sync += state.eq(_State.PAD)
            with m.Case(_State.PAD):
                with m.If(hold_free):
                    load_hold(0, 0)
            window.message_end_cases(m, state, _State, flag=flag, out=self.o,
                                     out_free=out_free & ~hold_valid)
        return m
