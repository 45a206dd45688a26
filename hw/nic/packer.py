"""Byte packer: variable-length chunks in, full fixed-width AXI4-Stream beats out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.params import positive_int
from hw.common.skid import SkidOutput
from hw.nic.layouts import beat_layout, chunk_layout

__all__ = ["BytePacker", "packer_latency"]

#: Offset bits the rotator resolves per register stage.
ROTATE_BITS = 3

#: What a chunk carries from stage to stage besides its data.
_CARRIED = ("valid", "length", "offset", "last", "empty")


def _offset_bits(beat_bytes):
    """Bits of a chunk's offset in a beat."""
    return (beat_bytes - 1).bit_length()


def packer_latency(beat_bytes):
    """Cycles from the chunk that releases a beat to that beat at the packer's output, for
    ``beat_bytes`` bytes per beat: the rotate stages, the window, then the output
    register."""
    return 2 + max(1, -(-_offset_bits(beat_bytes) // ROTATE_BITS))


class BytePacker(wiring.Component):
    """Append chunks of 0..``chunk_bytes`` bytes to the message's bytes and emit them
    ``beat_bytes`` at a time; a chunk marked ``last`` ends the message, whose final beat
    keeps what is left (a message of no bytes at all is one beat that keeps none).

    The chunk's place in the output does not depend on when beats leave: its offset in a
    beat is the running byte count modulo ``beat_bytes``. So the packer is a pipeline:

    - *rotate*: the chunk shifted to its offset in a field of whole beats, ``ROTATE_BITS``
      offset bits per register stage (the first stage takes the chunk), with its offset
      and length for the number of beats it completes;
    - *window*: the field ORed into a window of beats at its first incomplete one (one
      of three beat positions: the only choice inside the loop) while the window's first
      beat leaves. A complete beat waits until a byte more has arrived (so a message's
      final beat always has bytes) or the message has ended; chunks wait while the
      message's end is in the window;
    - *output*: a ``SkidOutput``, so ``o.ready`` drives only the output register and the
      window moves on a decision made from registers.

    Latency: ``packer_latency(beat_bytes)`` (``2 + ceil(log2(beat_bytes) / 3)``) cycles
    from the chunk that completes a beat and adds a byte more (or ends the message) to that
    beat. ``i.ready`` depends on registers only. Throughput: one chunk per cycle while
    chunks average at most ``beat_bytes`` bytes and ``o.ready`` stays high; a message end
    costs the cycles its tail takes to leave.

    Parameters
    ----------
    chunk_bytes, beat_bytes : int

    Attributes
    ----------
    i : In(stream.Signature(chunk_layout(chunk_bytes)))
    o : Out(stream.Signature(beat_layout(beat_bytes)))
    """

    def __init__(self, *, chunk_bytes, beat_bytes):
        positive_int(chunk_bytes, "Chunk size")
        positive_int(beat_bytes, "Beat size")
        self._chunk_bytes, self._beat_bytes = chunk_bytes, beat_bytes
        super().__init__({"i": In(stream.Signature(chunk_layout(chunk_bytes))),
                          "o": Out(stream.Signature(beat_layout(beat_bytes)))})

    chunk_bytes = property(lambda self: self._chunk_bytes, doc="Largest chunk, in bytes.")
    beat_bytes = property(lambda self: self._beat_bytes, doc="Output beat width, in bytes.")

    latency = property(lambda self: packer_latency(self.beat_bytes),
                       doc="Cycles from the chunk that releases a beat to that beat at ``o``.")

    def elaborate(self, platform):
        m = Module()
        width, size = self.beat_bytes, self.chunk_bytes
        field_beats = -(-(width - 1 + size) // width)   # beats a placed chunk can touch
        window_beats = field_beats + 2                   # chunks join at beat 0, 1 or 2

        # The chunk at the input, with its offset in a beat (the running byte count of the
        # message modulo the beat) and whether it is the whole of an empty message.
        offset_bits = _offset_bits(width)
        offset = Signal(max(1, offset_bits))            # of the next chunk
        started = Signal()                              # the message has bytes already

        def stage_layout(nbytes):
            return data.StructLayout({"valid": 1, "data": unsigned(8 * nbytes),
                                      "length": range(size + 1), "offset": len(offset),
                                      "last": 1, "empty": 1})

        chunk = Signal(stage_layout(size))
        source = self.i.payload
        m.d.comb += [chunk.valid.eq(self.i.valid), chunk.data.eq(source.data),
                     chunk.length.eq(source.length), chunk.offset.eq(offset),
                     chunk.last.eq(source.last),
                     chunk.empty.eq(source.last & ~started & (source.length == 0))]

        # Rotate: shift by the offset, ROTATE_BITS bits per register stage.
        stages, lows = [chunk], list(range(0, max(1, offset_bits), ROTATE_BITS))
        shifted_bytes = size
        for low in lows:
            bits = max(0, min(ROTATE_BITS, offset_bits - low))
            shifted_bytes = min(shifted_bytes + ((1 << bits) - 1 << low), field_beats * width)
            stages.append(Signal(stage_layout(shifted_bytes), name=f"rotate{low}"))

        # The last rotate stage's result: beats completed, final keep mask.
        last_stage = stages[-1]
        field = Signal(8 * width * field_beats)
        m.d.comb += field.eq(last_stage.data)
        end_last = Signal(range(width + size))
        m.d.comb += end_last.eq(last_stage.offset + last_stage.length)
        ends_partial = Signal()
        m.d.comb += ends_partial.eq(end_last % width != 0)

        # Window. Its moves (emit its first beat, take the chunk, and the beat the chunk
        # joins at) are registers, set a cycle ahead from the next state, so the nets that
        # steer its thousand bits start at flip-flops.
        window = Signal(8 * width * window_beats)
        complete = Signal(range(window_beats + 1))      # whole beats at its start
        partial = Signal()                              # the beat after them has bytes
        ending = Signal()                               # the message's final beat is in
        final_keep = Signal(width)
        emit, take = Signal(), Signal()
        joins = Signal(3)                               # one-hot: taken, joins at beat k
        out = SkidOutput(m, self.o)
        m.d.comb += [
            out.write.eq(emit),
            out.payload.data.eq(window[:8 * width]),
            out.payload.last.eq(ending & (complete == 1)),
            out.payload.keep.eq(Mux(out.payload.last, final_keep, (1 << width) - 1)),
        ]
        added = Signal.like(complete)
        m.d.comb += added.eq(end_last // width
                             + (last_stage.last & (ends_partial | last_stage.empty)))
        placed = 0
        for k in range(3):
            placed = placed | ((field & joins[k].replicate(len(field))) << (8 * width * k))
        m.d.sync += window.eq(Mux(emit, window >> (8 * width), window) | placed)
        with m.If(take):
            with m.If(last_stage.empty):
                m.d.sync += final_keep.eq(0)
            with m.Elif(ends_partial):
                m.d.sync += final_keep.eq(Cat((end_last % width) > k for k in range(width)))
            with m.Else():
                m.d.sync += final_keep.eq((1 << width) - 1)

        # Each stage takes its predecessor's content when it is empty or its own moves on.
        leaves = take
        frees = []
        for n, current in reversed(list(enumerate(stages[1:]))):
            frees.insert(0, Signal(name=f"rotate{lows[n]}_free"))
            m.d.comb += frees[0].eq(~current.valid | leaves)
            leaves = frees[0]
        for prev, nxt, free, low in zip(stages, stages[1:], frees, lows):
            amount = prev.offset[low:low + ROTATE_BITS]
            with m.If(free):
                m.d.sync += [getattr(nxt, name).eq(getattr(prev, name)) for name in _CARRIED]
                m.d.sync += nxt.data.eq(prev.data << Cat(Const(0, 3 + low), amount))
        m.d.comb += self.i.ready.eq(frees[0])

        # The window's next state, and from it the next cycle's moves.
        complete_next = Signal.like(complete)
        partial_next, ending_next, chunk_next = Signal(), Signal(), Signal()
        m.d.comb += [
            complete_next.eq(complete - emit + Mux(take, added, 0)),
            partial_next.eq(Mux(take, ends_partial & ~last_stage.last, partial)),
            ending_next.eq(Mux(take, last_stage.last, ending & ~(emit & out.payload.last))),
            chunk_next.eq(Mux(frees[-1], stages[-2].valid, last_stage.valid)),
        ]
        emit_next, take_next = Signal(), Signal()
        m.d.comb += [
            emit_next.eq(out.free_next & ((complete_next >= 2)
                                          | ((complete_next == 1) & partial_next)
                                          | ending_next)),
            take_next.eq(chunk_next & ~ending_next & (complete_next <= 2)),
        ]
        m.d.sync += [complete.eq(complete_next), partial.eq(partial_next),
                     ending.eq(ending_next), emit.eq(emit_next), take.eq(take_next),
                     joins.eq(Cat(take_next & (complete_next - emit_next == k)
                                  for k in range(3)))]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                offset.eq(Mux(source.last, 0, (offset + source.length) % width)),
                started.eq(~source.last & (started | (source.length != 0))),
            ]
        return m
