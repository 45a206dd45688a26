"""Byte packer: variable-length chunks in, full fixed-width AXI4-Stream beats out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.params import positive_int
from codnn.hw.common.skid import SkidOutput
from codnn.hw.nic.layouts import beat_layout, chunk_layout

__all__ = ["BytePacker", "packer_latency"]

#: Offset bits the rotator resolves per register stage.
ROTATE_BITS = 3

#: What a chunk carries from stage to stage besides its data.
_CARRIED = ("valid", "offset", "last", "empty", "added", "ends_partial", "final_keep")


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
    beat. ``i.ready`` is a register. Throughput: one chunk per cycle while
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

        # What the window needs of a chunk comes with it from the input: the beats it
        # completes (``added``), whether it ends inside a beat, and the keep mask of the
        # final beat if it ends the message.
        def stage_layout(nbytes):
            return data.StructLayout({"valid": 1, "data": unsigned(8 * nbytes),
                                      "offset": len(offset), "last": 1, "empty": 1,
                                      "added": range(field_beats + 2), "ends_partial": 1,
                                      "final_keep": width})

        chunk = Signal(stage_layout(size))
        source = self.i.payload
        # (Separate signals, not fields read back from ``chunk``: a Verilog process that
        # reads what it writes is not re-run by Icarus.)
        end = Signal(range(width + size))
        empty, ends_partial = Signal(), Signal()
        keep_if_final = Signal(width)
        m.d.comb += [end.eq(offset + source.length),
                     empty.eq(source.last & ~started & (source.length == 0)),
                     ends_partial.eq(end % width != 0),
                     keep_if_final.eq(Mux(empty, 0, Mux(ends_partial, Cat(
                         (end % width) > k for k in range(width)), (1 << width) - 1))),
                     chunk.valid.eq(self.i.valid), chunk.data.eq(source.data),
                     chunk.offset.eq(offset), chunk.last.eq(source.last),
                     chunk.empty.eq(empty), chunk.ends_partial.eq(ends_partial),
                     chunk.added.eq(end // width + (source.last & (ends_partial | empty))),
                     chunk.final_keep.eq(keep_if_final)]

        # Rotate: shift by the offset, ROTATE_BITS bits per register stage.
        stages, lows = [chunk], list(range(0, max(1, offset_bits), ROTATE_BITS))
        shifted_bytes = size
        for low in lows:
            bits = max(0, min(ROTATE_BITS, offset_bits - low))
            shifted_bytes = min(shifted_bytes + ((1 << bits) - 1 << low), field_beats * width)
            stages.append(Signal(stage_layout(shifted_bytes), name=f"rotate{low}"))

        last_stage = stages[-1]
        field = Signal(8 * width * field_beats)
        m.d.comb += field.eq(last_stage.data)

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
        out = SkidOutput.driving(m, self.o)
        # The beat's last flag in a signal of its own: a field of the beat computed from
        # another field of it is a loop through one Verilog vector (Verilator: UNOPTFLAT).
        out_last = Signal()
        m.d.comb += [
            out_last.eq(ending & (complete == 1)),
            out.write.eq(emit),
            out.payload.data.eq(window[:8 * width]),
            out.payload.last.eq(out_last),
            out.payload.keep.eq(Mux(out_last, final_keep, (1 << width) - 1)),
        ]
        placed = 0
        for k in range(3):
            placed = placed | ((field & joins[k].replicate(len(field))) << (8 * width * k))
        m.d.sync += window.eq(Mux(emit, window >> (8 * width), window) | placed)
        with m.If(take):
            m.d.sync += final_keep.eq(last_stage.final_keep)

        # Each stage takes its predecessor's content when it is empty or its own moves on.
        # Those go-aheads are registers too, set a cycle ahead with the window's moves.
        frees = [Signal(name=f"rotate{low}_free", init=1) for low in lows]
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
            complete_next.eq(complete - emit + Mux(take, last_stage.added, 0)),
            partial_next.eq(Mux(take, last_stage.ends_partial & ~last_stage.last, partial)),
            ending_next.eq(Mux(take, last_stage.last, ending & ~(emit & out_last))),
        ]
        valids_next = [Mux(free, prev.valid, nxt.valid)
                       for prev, nxt, free in zip(stages, stages[1:], frees)]
        m.d.comb += chunk_next.eq(valids_next[-1])
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
        leaves = take_next
        for free, valid_next in reversed(list(zip(frees, valids_next))):
            leaves = ~valid_next | leaves
            m.d.sync += free.eq(leaves)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                offset.eq(Mux(source.last, 0, (offset + source.length) % width)),
                started.eq(~source.last & (started | (source.length != 0))),
            ]
        return m
