"""Byte packer: variable-length chunks in, full fixed-width AXI4-Stream beats out."""

from dataclasses import dataclass

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


@dataclass(slots=True)
class _Packing:
    """What the packer's stages share: the beats a placed chunk can touch
    (``field_beats``) and the window's (``window_beats``); from ``_input_chunk`` the
    next chunk's offset in a beat (and its bits) and the chunk at the input; from
    ``_rotate_stages`` the rotate stages' registers (the input chunk first) and the
    offset bits each resolves from (``lows``); from ``_window`` its whole beats, whether
    the beat after them has bytes, whether the message's final beat is in, its moves
    (``emit``, ``take``, ``joins``: one-hot, the beat the chunk joins at), the output's
    skid and the beat's last flag."""

    field_beats: int
    window_beats: int
    offset: Signal = None
    offset_bits: int = None
    chunk: Signal = None
    stages: list = None
    lows: list = None
    complete: Signal = None
    partial: Signal = None
    ending: Signal = None
    emit: Signal = None
    take: Signal = None
    joins: Signal = None
    out: SkidOutput = None
    out_last: Signal = None


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
        field_beats = -(-(width - 1 + size) // width)
        k = _Packing(field_beats=field_beats,
                     window_beats=field_beats + 2)      # chunks join at beat 0, 1 or 2
        self._input_chunk(m, k)
        self._rotate_stages(k)
        self._window(m, k)
        self._moves(m, k)
        return m

    def _stage_layout(self, k, nbytes):
        """A chunk as it goes down the rotate stages: what the window needs of it comes
        with it from the input (the beats it completes, ``added``; whether it ends inside
        a beat; the keep mask of the final beat if it ends the message)."""
        return data.StructLayout({"valid": 1, "data": unsigned(8 * nbytes),
                                  "offset": len(k.offset), "last": 1, "empty": 1,
                                  "added": range(k.field_beats + 2), "ends_partial": 1,
                                  "final_keep": self.beat_bytes})

    def _input_chunk(self, m, k):
        """The chunk at the input, with its offset in a beat (the running byte count of
        the message modulo the beat) and whether it is the whole of an empty message."""
        width, size = self.beat_bytes, self.chunk_bytes
        offset_bits = _offset_bits(width)
        offset = Signal(max(1, offset_bits))            # of the next chunk
        started = Signal()                              # the message has bytes already
        k.offset, k.offset_bits = offset, offset_bits
        chunk = Signal(self._stage_layout(k, size))
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
                         (end % width) > i for i in range(width)), (1 << width) - 1))),
                     chunk.valid.eq(self.i.valid), chunk.data.eq(source.data),
                     chunk.offset.eq(offset), chunk.last.eq(source.last),
                     chunk.empty.eq(empty), chunk.ends_partial.eq(ends_partial),
                     chunk.added.eq(end // width + (source.last & (ends_partial | empty))),
                     chunk.final_keep.eq(keep_if_final)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                offset.eq(Mux(source.last, 0, (offset + source.length) % width)),
                started.eq(~source.last & (started | (source.length != 0))),
            ]
        k.chunk = chunk

    def _rotate_stages(self, k):
        """The rotate stages' registers: the chunk shifted by its offset, ``ROTATE_BITS``
        bits of it per stage."""
        width = self.beat_bytes
        k.stages = [k.chunk]
        k.lows = list(range(0, max(1, k.offset_bits), ROTATE_BITS))
        shifted_bytes = self.chunk_bytes
        for low in k.lows:
            bits = max(0, min(ROTATE_BITS, k.offset_bits - low))
            shifted_bytes = min(shifted_bytes + ((1 << bits) - 1 << low),
                                k.field_beats * width)
            k.stages.append(Signal(self._stage_layout(k, shifted_bytes), name=f"rotate{low}"))

    def _window(self, m, k):
        """The window the placed chunks join and whole beats leave. Its moves (emit its
        first beat, take the chunk, and the beat the chunk joins at) are registers, set a
        cycle ahead from the next state (``_moves``), so the nets that steer its thousand
        bits start at flip-flops."""
        width = self.beat_bytes
        last_stage = k.stages[-1]
        field = Signal(8 * width * k.field_beats)
        m.d.comb += field.eq(last_stage.data)
        window = Signal(8 * width * k.window_beats)
        k.complete = Signal(range(k.window_beats + 1), name="complete")  # whole beats
        k.partial = Signal(name="partial")      # the beat after them has bytes
        k.ending = Signal(name="ending")        # the message's final beat is in
        final_keep = Signal(width)
        k.emit, k.take = Signal(name="emit"), Signal(name="take")
        k.joins = Signal(3, name="joins")       # one-hot: taken, joins at beat k
        k.out = out = SkidOutput.driving(m, self.o)
        # The beat's last flag in a signal of its own: a field of the beat computed from
        # another field of it is a loop through one Verilog vector (Verilator: UNOPTFLAT).
        k.out_last = out_last = Signal(name="out_last")
        m.d.comb += [
            out_last.eq(k.ending & (k.complete == 1)),
            out.write.eq(k.emit),
            out.payload.data.eq(window[:8 * width]),
            out.payload.last.eq(out_last),
            out.payload.keep.eq(Mux(out_last, final_keep, (1 << width) - 1)),
        ]
        # Constant shifts as wiring (``shift_left``/``shift_right``): ``<<`` by a constant
        # is an operator whose every output bit Amaranth's loop check takes to depend on
        # every input bit (millions of edges on this window).
        placed = 0
        for i in range(3):
            placed = placed | (field & k.joins[i].replicate(len(field))).shift_left(8 * width * i)
        m.d.sync += window.eq(Mux(k.emit, window.shift_right(8 * width), window) | placed)
        with m.If(k.take):
            m.d.sync += final_keep.eq(last_stage.final_keep)

    def _moves(self, m, k):
        """Each rotate stage takes its predecessor's content when it is empty or its own
        moves on (go-aheads that are registers too, set a cycle ahead with the window's
        moves); the window's next state, and from it the next cycle's moves."""
        stages, lows, last_stage = k.stages, k.lows, k.stages[-1]
        frees = [Signal(name=f"rotate{low}_free", init=1) for low in lows]
        for prev, nxt, free, low in zip(stages, stages[1:], frees, lows):
            amount = prev.offset[low:low + ROTATE_BITS]
            with m.If(free):
                m.d.sync += [getattr(nxt, name).eq(getattr(prev, name)) for name in _CARRIED]
                m.d.sync += nxt.data.eq(prev.data << Cat(Const(0, 3 + low), amount))
        m.d.comb += self.i.ready.eq(frees[0])
        complete_next = Signal.like(k.complete)
        partial_next, ending_next, chunk_next = Signal(), Signal(), Signal()
        m.d.comb += [
            complete_next.eq(k.complete - k.emit + Mux(k.take, last_stage.added, 0)),
            partial_next.eq(Mux(k.take, last_stage.ends_partial & ~last_stage.last,
                                k.partial)),
            ending_next.eq(Mux(k.take, last_stage.last, k.ending & ~(k.emit & k.out_last))),
        ]
        valids_next = [Mux(free, prev.valid, nxt.valid)
                       for prev, nxt, free in zip(stages, stages[1:], frees)]
        m.d.comb += chunk_next.eq(valids_next[-1])
        emit_next, take_next = Signal(), Signal()
        m.d.comb += [
            emit_next.eq(k.out.free_next & ((complete_next >= 2)
                                            | ((complete_next == 1) & partial_next)
                                            | ending_next)),
            take_next.eq(chunk_next & ~ending_next & (complete_next <= 2)),
        ]
        m.d.sync += [k.complete.eq(complete_next), k.partial.eq(partial_next),
                     k.ending.eq(ending_next), k.emit.eq(emit_next), k.take.eq(take_next),
                     k.joins.eq(Cat(take_next & (complete_next - emit_next == i)
                                    for i in range(3)))]
        leaves = take_next
        for free, valid_next in reversed(list(zip(frees, valids_next))):
            leaves = ~valid_next | leaves
            m.d.sync += free.eq(leaves)
