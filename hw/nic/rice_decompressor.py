"""Rice-coded gradient decompressor (docs/semantics.md section 10): the codec's messages in,
value messages out, one value per cycle."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream
from amaranth.lib.wiring import Out

from codnn.golden.inceptionn import BOUND_BITS
from codnn.golden.rice import BLOCK, ESCAPE_QUOTIENT, HEADER_BYTES, MAX_MAGNITUDE
from codnn.hw.common.crc import CRC32_RESIDUE, crc32_update, crc32_update_word
from codnn.hw.common.pipeline import StallPipeline
from codnn.hw.common.skid import SkidOutput
from codnn.hw.nic.engine_base import NicEngineBase, count_errors
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.window import ByteWindow

__all__ = ["RiceDecompressor", "RICE_DECOMPRESSOR_LATENCY"]

#: Bits of a value's longest code (an escape).
_ESCAPE_BITS = ESCAPE_QUOTIENT + 32
#: The bit buffer; a word of the stream goes in while at most ``_BUFFER_BITS - 32`` wait.
_BUFFER_BITS = 96
#: Register stages from a decoded code to its value: the code, the float32.
_DEPTH = 2
#: ``RiceDecompressor.latency``: the pipeline (``_DEPTH``), the output register (1).
RICE_DECOMPRESSOR_LATENCY = _DEPTH + 1

_Item = data.StructLayout({
    "descriptor": 1,        # the message's count (else a value)
    "word": 32,             # the count, an escape's bits, or the zigzagged integer z
    "escape": 1,
    "last": 1,              # the message's last beat ends here
})


class _Front(enum.Enum, shape=3):
    HEADER = 0          # waiting for a message's count and settings byte
    SETTINGS = 1
    STREAM = 2          # stream bytes into the bit buffer, the last 4 held back
    CHECK = 3           # the last 4 bytes (the CRC) through the CRC
    WAIT = 4            # the decoder finishes the message
    DROP = 5            # a count above ``max_values``: discard up to ``last``


class _Decode(enum.Enum, shape=3):
    IDLE = 0
    DESCRIPTOR = 1
    BLOCK = 2           # a block's header
    VALUES = 3          # its 16 codes, one a cycle
    PAD = 4             # zeros up to the count; the rest of the stream discarded
    TRAIL = 5           # after the last block: only zero padding may follow
    DONE = 6


class RiceDecompressor(NicEngineBase):
    """Decode the Rice-coded codec's messages (``codnn.golden.rice``) into value messages.

    Input: messages (count ``n``, settings byte, the blocks' bit stream, CRC-32), ``last``
    on each message's final beat (its valid bytes the lowest ``keep`` bits; every other
    beat is taken whole). Output: a descriptor beat with ``n``, then ``ceil(n / lanes)``
    value beats, each value as ``codnn.golden.rice.decompress`` gives it (an escape's 32 bits
    as they came, NaN payloads included).

    Defined behaviour on any input (``codnn.golden.rice.received_values``; a bad message raises
    ``error`` (sticky) and counts once in ``error_count``): the stream is the message
    less its first 5 and its last 4 bytes (the decoder holds 4 bytes back until the
    message ends); its codes decode in order up to the first one the stream cuts or a
    block whose parameter is 15, then zeros up to ``n``; a settings byte with a reserved
    bit or a bound outside 7..15 gives zeros; a value past the coded range decodes all
    the same. Bad: any of those, a nonzero value past ``n``, a byte or nonzero bit after
    the last block, a wrong CRC (known only at the message's end, after its values). A
    message shorter than 5 bytes, or whose count is above ``max_values``, gives no output
    (dropped up to its ``last``). The next message is read normally either way.

    Structure: a byte window takes the input beats; the stream goes 4 bytes a cycle (at
    the message's end a byte a cycle) through the CRC into a 96-bit buffer, from which a
    block's header or one code a cycle is decoded (the run of ones, the ``k`` low bits);
    its integer goes through two register stages (the code, then the float32 ``q *
    2**(1-b)``, or ``2**-b`` stochastic) into an output beat.

    Latency: ``latency`` (3) cycles from the edge that takes a code out of the bit buffer
    to its value on ``o`` (a beat goes out once ``lanes`` values, or the message's last,
    are in it). Throughput: one value per cycle (so one beat every ``lanes`` cycles)
    while the input keeps up (a code of ``L`` bits needs ``L`` bits a cycle; the input
    brings 32) and the output is not backpressured; a block takes a cycle more for its
    header (an all-zero block none: its 16 zeros take 16 cycles); a message costs its
    header, its descriptor and its last bytes (about 10 cycles).

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1).

    Attributes
    ----------
    i, o : In/Out(stream.Signature(beat_layout(4 * lanes)))
    error : Out(1)
    error_count : Out(16)
    """

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"error": Out(1), "error_count": Out(16)}

    def __init__(self, *, lanes=1, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    @property
    def latency(self):
        """Cycles from the edge that takes a code from the bit buffer to its value on
        ``o``: the pipeline (``_DEPTH``), the output register (1)."""
        return RICE_DECOMPRESSOR_LATENCY

    def elaborate(self, platform):
        m = Module()
        width = 4 * self.lanes
        front = Signal(_Front, name="front_state")
        front_flag, decode_flag = Signal(name="front_bad"), Signal(name="decode_bad")
        count_errors(m, front_flag | decode_flag, self.error, self.error_count,
                     between=front == _Front.HEADER)
        window = ByteWindow(m, self.i, size=max(8, width) + width,
                            discard=front == _Front.DROP, amounts=[Const(4), Const(1)],
                            beat_amount=False)
        # The bit buffer: ``fill`` bits of ``bits`` wait (the bits above them are 0). Each
        # cycle the front appends ``new_bits`` bits of ``new`` and the decoder takes
        # ``used``.
        bits = Signal(_BUFFER_BITS, name="bit_buffer")
        fill = Signal(range(_BUFFER_BITS + 1), name="bit_fill")
        new = Signal(32, name="new_bits")
        new_bits = Signal(range(33), name="new_bit_count")
        used = Signal(range(_BUFFER_BITS + 1), name="used_bits")
        m.d.sync += [bits.eq(((bits | (new << fill))[:_BUFFER_BITS]) >> used),
                     fill.eq(fill + new_bits - used)]

        message = Signal(data.StructLayout({"count": 32, "valid": 1, "bound": 4,
                                            "stochastic": 1}), name="message")
        start = Signal(name="decode_start")             # the settings byte is in
        finished = Signal(name="decode_finished")       # the decoder is done
        self._front(m, front, window, message, start, finished, front_flag, fill, new,
                    new_bits)
        items = stream.Signature(_Item).create(path=("decoded",))
        self._decoder(m, message, start, finished, front == _Front.WAIT, bits, fill, used,
                      items, decode_flag)
        self._values(m, items, message)
        return m

    def _front(self, m, state, window, message, start, finished, flag, fill, new, new_bits):
        """The header, the stream into the bit buffer with 4 bytes held back, the CRC."""
        crc = Signal(32, init=0xFFFF_FFFF, name="crc")
        word, byte = window.data[:32], window.data[:8]

        def take(amount):
            m.d.comb += window.drop[amount == 1].eq(1)
            update = crc32_update_word(crc, word) if amount == 4 else crc32_update(crc, byte)
            m.d.sync += crc.eq(update)

        with m.Switch(state):
            with m.Case(_Front.HEADER):
                with m.If(window.fill >= HEADER_BYTES):
                    with m.If(word > self.max_values):
                        m.d.comb += flag.eq(1)
                        m.d.sync += state.eq(_Front.DROP)
                    with m.Else():
                        take(4)
                        m.d.sync += [message.count.eq(word), state.eq(_Front.SETTINGS)]
                with m.Elif(window.ended):                      # no whole header
                    m.d.comb += [flag.eq(1), window.clear.eq(1), window.finish.eq(1)]
            with m.Case(_Front.SETTINGS):
                take(1)
                bound = byte[:5]
                valid = (byte[5:7] == 0) & (bound >= BOUND_BITS.start) \
                    & (bound < BOUND_BITS.stop)
                m.d.comb += [flag.eq(~valid), start.eq(1)]
                m.d.sync += [message.valid.eq(valid), message.bound.eq(bound[:4]),
                             message.stochastic.eq(byte[7]), state.eq(_Front.STREAM)]
            with m.Case(_Front.STREAM):
                with m.If(window.fill >= 8):                    # 4 bytes stay behind
                    with m.If(fill <= _BUFFER_BITS - 32):
                        take(4)
                        m.d.comb += [new.eq(word), new_bits.eq(32)]
                with m.Elif(window.ended & (window.fill > 4)):
                    with m.If(fill <= _BUFFER_BITS - 8):
                        take(1)
                        m.d.comb += [new.eq(byte), new_bits.eq(8)]
                with m.Elif(window.ended):
                    m.d.sync += state.eq(_Front.CHECK)
            with m.Case(_Front.CHECK):
                # What is left is the CRC (fewer than 4 bytes: a message too short).
                good = (window.fill == 4) & (crc32_update_word(crc, word) == CRC32_RESIDUE)
                m.d.comb += [flag.eq(~good), window.clear.eq(1), window.finish.eq(1)]
                m.d.sync += [crc.eq(0xFFFF_FFFF), state.eq(_Front.WAIT)]
            with m.Case(_Front.WAIT):
                with m.If(finished):
                    m.d.sync += state.eq(_Front.HEADER)
            with m.Case(_Front.DROP):
                m.d.comb += window.clear.eq(1)
                i = self.i
                with m.If(window.ended | (i.valid & i.ready & i.payload.last)):
                    m.d.comb += window.finish.eq(1)
                    m.d.sync += state.eq(_Front.HEADER)

    def _decoder(self, m, message, start, finished, stream_in, bits, fill, used, items, flag):
        """Block headers and codes from the bit buffer, one a cycle, as items: the
        descriptor, then a value per index below the count. ``stream_in``: every stream
        byte is in the bit buffer."""
        state = Signal(_Decode, name="decode_state")
        index = Signal(32, name="value_index")          # of the next value
        pos = Signal(range(BLOCK), name="block_pos")
        k = Signal(4, name="rice_k")
        zero_block = Signal(name="zero_block")
        blocks_left = Signal(29, name="blocks_left")    # after the current one
        item = items.payload
        counted = index < message.count
        m.d.comb += item.last.eq(index == message.count - 1)
        m.d.comb += finished.eq(state == _Decode.DONE)

        # The code at the buffer's start: ``u`` ones (15: an escape), a zero, ``k`` bits.
        u = Signal(4, name="ones")
        m.d.comb += u.eq(ESCAPE_QUOTIENT)
        for n in reversed(range(ESCAPE_QUOTIENT)):
            with m.If(~bits[n]):
                m.d.comb += u.eq(n)
        escape = u == ESCAPE_QUOTIENT
        low = (bits[:ESCAPE_QUOTIENT + 14] >> (u + 1))[:14] & ((Const(1, 15) << k) - 1)[:14]
        z = Signal(18, name="z")
        m.d.comb += z.eq((u << k) | low)
        length = Mux(escape, _ESCAPE_BITS, u + 1 + k)
        whole = length <= fill

        def next_value():
            m.d.sync += [index.eq(index + 1), pos.eq(pos + 1)]
            with m.If(pos == BLOCK - 1):
                m.d.sync += [blocks_left.eq(blocks_left - 1),
                             state.eq(Mux(blocks_left == 0, _Decode.TRAIL, _Decode.BLOCK))]

        with m.Switch(state):
            with m.Case(_Decode.IDLE):
                with m.If(start):
                    m.d.sync += state.eq(_Decode.DESCRIPTOR)
            with m.Case(_Decode.DESCRIPTOR):
                count = message.count
                m.d.comb += [items.valid.eq(1), item.descriptor.eq(1), item.word.eq(count),
                             item.last.eq(count == 0)]
                with m.If(items.ready):
                    m.d.sync += [index.eq(0), pos.eq(0),
                                 blocks_left.eq((count + BLOCK - 1)[4:] - 1),
                                 state.eq(Mux(count == 0, _Decode.TRAIL,
                                              Mux(message.valid, _Decode.BLOCK,
                                                  _Decode.PAD)))]
            with m.Case(_Decode.BLOCK):
                with m.If(fill != 0):
                    with m.If(~bits[0]):
                        m.d.comb += used.eq(1)
                        m.d.sync += [zero_block.eq(1), state.eq(_Decode.VALUES)]
                    with m.Elif(fill >= 5):
                        m.d.comb += used.eq(5)
                        m.d.sync += [zero_block.eq(0), k.eq(bits[1:5])]
                        with m.If(bits[1:5] == 15):
                            m.d.comb += flag.eq(1)
                            m.d.sync += state.eq(_Decode.PAD)
                        with m.Else():
                            m.d.sync += state.eq(_Decode.VALUES)
                    with m.Elif(stream_in):                     # the header is cut
                        m.d.comb += flag.eq(1)
                        m.d.sync += state.eq(_Decode.PAD)
                with m.Elif(stream_in):
                    m.d.comb += flag.eq(1)
                    m.d.sync += state.eq(_Decode.PAD)
            with m.Case(_Decode.VALUES):
                with m.If(zero_block):
                    m.d.comb += [items.valid.eq(counted), item.word.eq(0)]
                    with m.If(items.ready | ~counted):
                        next_value()
                with m.Elif(whole):
                    m.d.comb += [items.valid.eq(counted), item.escape.eq(escape),
                                 item.word.eq(Mux(escape, bits[ESCAPE_QUOTIENT:_ESCAPE_BITS],
                                                  z))]
                    with m.If(items.ready | ~counted):
                        m.d.comb += used.eq(length)
                        # Past the count only zeros may be coded; none past the range.
                        m.d.comb += flag.eq(Mux(counted, ~escape & (z >= 2 * MAX_MAGNITUDE - 1),
                                                escape | (z != 0)))
                        next_value()
                with m.Elif(stream_in):                         # the code is cut
                    m.d.comb += flag.eq(1)
                    m.d.sync += state.eq(_Decode.PAD)
            with m.Case(_Decode.PAD):
                m.d.comb += [used.eq(fill), items.valid.eq(counted), item.word.eq(0)]
                with m.If(counted & items.ready):
                    m.d.sync += index.eq(index + 1)
                with m.If(~counted & stream_in):
                    m.d.sync += state.eq(_Decode.DONE)
            with m.Case(_Decode.TRAIL):
                m.d.comb += [used.eq(fill), flag.eq((fill >= 8) | (bits[:8] != 0))]
                with m.If(stream_in):
                    m.d.sync += state.eq(_Decode.DONE)
            with m.Case(_Decode.DONE):
                m.d.sync += state.eq(_Decode.IDLE)

    def _values(self, m, items, message):
        """Items through the code and float32 stages into output beats."""
        lanes = self.lanes
        out = SkidOutput.driving(m, self.o)
        staged = stream.Signature(_Item).create(path=("staged",))
        pipe = StallPipeline(m, items, staged, _DEPTH)
        item = pipe.register(items.payload, "item")
        # The float32 of ``q * 2**step``: ``|q|`` from the zigzag, its top bit, the
        # significand shifted under it.
        z = item.word[:18]
        magnitude = (z + z[0])[1:18]
        top = Signal(range(17), name="top_bit")
        for n in range(17):
            with m.If(magnitude[n]):
                m.d.comb += top.eq(n)
        exponent, gap = Signal(8, name="exponent"), Signal(5, name="gap")
        m.d.comb += [exponent.eq(127 + ~message.stochastic + top - message.bound),
                     gap.eq(23 - top)]
        significand = (magnitude << gap)[:23]
        value = Mux(magnitude == 0, 0, Cat(significand, exponent, z[0]))
        staged_word = Mux(item.descriptor | item.escape, item.word, value)
        m.d.comb += staged.payload.eq(pipe.register(Cat(item.descriptor, staged_word,
                                                        item.escape, item.last), "staged"))
        s = staged.payload
        lane = Signal(range(lanes), name="out_lane")
        held = Signal(32 * lanes, name="out_beat")
        ends_beat = s.descriptor | s.last | (lane == lanes - 1)
        m.d.comb += staged.ready.eq(~ends_beat | out.free)
        with m.If(staged.valid & staged.ready):
            with m.If(s.descriptor):
                m.d.comb += [out.payload.data.eq(s.word), out.payload.last.eq(s.last)]
            with m.Else():
                m.d.comb += [out.payload.data.eq(Cat(Mux(lane == n, s.word,
                                                         held.word_select(n, 32))
                                                     for n in range(lanes))),
                             out.payload.last.eq(s.last)]
                m.d.sync += held.word_select(lane, 32).eq(s.word)
                m.d.sync += lane.eq(Mux(ends_beat, 0, lane + 1))
            m.d.comb += [out.write.eq(ends_beat),
                         out.payload.keep.eq(Mux(s.descriptor | ~s.last, Const(-1, 4 * lanes),
                                                 Cat((lane >= n if n else Const(1)).replicate(4)
                                                     for n in range(lanes))))]
