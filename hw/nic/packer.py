"""Byte packer: variable-length chunks in, full fixed-width AXI4-Stream beats out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.params import positive_int
from hw.nic.layouts import beat_layout, chunk_layout

__all__ = ["BytePacker", "packer_latency"]

#: Offset bits the rotator resolves per register stage.
ROTATE_BITS = 3

#: What a chunk carries from stage to stage besides its data.
_CARRIED = ("valid", "length", "offset", "last", "empty")


def packer_latency(beat_bytes):
    """Cycles from the chunk that releases a beat to that beat at the packer's output, for
    ``beat_bytes`` bytes per beat: place, the rotate stages, the window."""
    return 2 + -(-(beat_bytes - 1).bit_length() // ROTATE_BITS)


class BytePacker(wiring.Component):
    """Append chunks of 0..``chunk_bytes`` bytes to the message's bytes and emit them
    ``beat_bytes`` at a time; a chunk marked ``last`` ends the message, whose final beat
    keeps what is left (a message of no bytes at all is one beat that keeps none).

    The chunk's place in the output does not depend on when beats leave: its offset in a
    beat is the running byte count modulo ``beat_bytes``. So the packer is a pipeline:

    - *place* (behind a skid register, so ``i.ready`` is a register): the chunk's offset
      and whether it ends or is the whole of an empty message;
    - *rotate*: the chunk shifted to its offset in a field of whole beats, ``ROTATE_BITS``
      offset bits per register stage, with the number of beats it completes;
    - *window*: the field ORed into a window of beats at its first incomplete one (one
      of three beat positions: the only choice inside the loop) while the window's first
      beat leaves. A complete beat waits until a byte more has arrived (so a message's
      final beat always has bytes) or the message has ended; chunks wait while the
      message's end is in the window.

    Latency: ``packer_latency(beat_bytes)`` (``2 + ceil(log2(beat_bytes) / 3)``) cycles from
    the chunk that completes a beat and adds a byte more (or ends the message) to that beat. Throughput:
    one chunk per cycle while chunks average at most ``beat_bytes`` bytes and ``o.ready``
    stays high; a message end costs the cycles its tail takes to leave.

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

    @property
    def offset_bits(self):
        """Bits of a chunk's offset in its first beat."""
        return (self.beat_bytes - 1).bit_length()

    latency = property(lambda self: packer_latency(self.beat_bytes),
                       doc="Cycles from the chunk that releases a beat to that beat at ``o``.")

    def elaborate(self, platform):
        m = Module()
        width, size = self.beat_bytes, self.chunk_bytes
        field_beats = -(-(width - 1 + size) // width)   # beats a placed chunk can touch
        window_beats = field_beats + 2                   # chunks join at beat 0, 1 or 2

        # Place: the chunk (from the skid register if it holds one), its offset in a beat,
        # whether it ends the message and whether that message has no bytes at all.
        skid = Signal.like(self.i.payload)
        skid_valid = Signal()
        m.d.comb += self.i.ready.eq(~skid_valid)
        source = Signal.like(self.i.payload)
        source_valid = Signal()
        m.d.comb += [source.eq(Mux(skid_valid, skid, self.i.payload)),
                     source_valid.eq(skid_valid | self.i.valid)]

        offset = Signal(max(1, self.offset_bits))       # of the next chunk
        started = Signal()                              # the message has bytes already
        stage = Signal(data.StructLayout({
            "valid": 1, "data": unsigned(8 * size), "length": range(size + 1),
            "offset": len(offset), "last": 1, "empty": 1}))
        stages, shifts, lows = [stage], [], []
        end = Signal(range(width + size))
        m.d.comb += end.eq(offset + source.length)

        # Rotate: shift by the offset, a few bits per stage.
        shifted_bytes = size
        for low in range(0, self.offset_bits, ROTATE_BITS):
            bits = min(ROTATE_BITS, self.offset_bits - low)
            prev = stages[-1]
            shifted_bytes = min(shifted_bytes + ((1 << bits) - 1 << low), field_beats * width)
            nxt = Signal(data.StructLayout({
                "valid": 1, "data": unsigned(8 * shifted_bytes), "length": range(size + 1),
                "offset": len(offset), "last": 1, "empty": 1}), name=f"rotate{low}")
            stages.append(nxt)
            shifts.append(prev.offset[low:low + bits])
            lows.append(low)

        # The last rotate stage's result: beats completed, final keep mask.
        last_stage = stages[-1]
        field = Signal(8 * width * field_beats)
        m.d.comb += field.eq(last_stage.data)
        end_last = Signal(range(width + size))
        m.d.comb += end_last.eq(last_stage.offset + last_stage.length)
        ends_partial = Signal()
        m.d.comb += ends_partial.eq(end_last % width != 0)

        # Window.
        window = Signal(8 * width * window_beats)
        complete = Signal(range(window_beats + 1))      # whole beats at its start
        partial = Signal()                              # the beat after them has bytes
        ending = Signal()                               # the message's final beat is in
        final_keep = Signal(width)
        m.d.comb += [
            self.o.valid.eq((complete >= 2) | ((complete == 1) & partial) | ending),
            self.o.payload.data.eq(window[:8 * width]),
            self.o.payload.last.eq(ending & (complete == 1)),
            self.o.payload.keep.eq(Mux(self.o.payload.last, final_keep, (1 << width) - 1)),
        ]
        emit = Signal()
        take = Signal()
        m.d.comb += [emit.eq(self.o.valid & self.o.ready),
                     take.eq(last_stage.valid & ~ending & (complete <= 2))]
        kept = Signal.like(window)
        m.d.comb += kept.eq(Mux(emit, window >> (8 * width), window))
        base = Signal(2)                                # the beat the chunk joins at
        m.d.comb += base.eq(complete - emit)
        added = Signal.like(complete)
        m.d.comb += added.eq(end_last // width
                             + (last_stage.last & (ends_partial | last_stage.empty)))
        with m.If(take):
            placed = Signal.like(window)
            with m.Switch(base):
                for k in range(3):
                    with m.Case(k):
                        m.d.comb += placed.eq(field << (8 * width * k))
            m.d.sync += [window.eq(kept | placed), complete.eq(complete - emit + added),
                         partial.eq(ends_partial & ~last_stage.last),
                         ending.eq(last_stage.last)]
            with m.If(last_stage.empty):
                m.d.sync += final_keep.eq(0)
            with m.Elif(ends_partial):
                m.d.sync += final_keep.eq(Cat((end_last % width) > k for k in range(width)))
            with m.Else():
                m.d.sync += final_keep.eq((1 << width) - 1)
        with m.Else():
            m.d.sync += [window.eq(kept), complete.eq(complete - emit)]
            with m.If(emit & self.o.payload.last):
                m.d.sync += ending.eq(0)

        # Each stage takes its predecessor's content when it is empty or its own moves on.
        leaves = take
        frees = []
        for n, current in reversed(list(enumerate(stages))):
            frees.insert(0, Signal(name=f"stage{n}_free"))
            m.d.comb += frees[0].eq(~current.valid | leaves)
            leaves = frees[0]
        for prev, nxt, free, amount, low in zip(stages, stages[1:], frees[1:], shifts, lows):
            with m.If(free):
                m.d.sync += [getattr(nxt, name).eq(getattr(prev, name)) for name in _CARRIED]
                m.d.sync += nxt.data.eq(prev.data << Cat(Const(0, 3 + low), amount))
        with m.If(frees[0]):
            m.d.sync += [stage.valid.eq(source_valid), skid_valid.eq(0)]
            with m.If(source_valid):
                m.d.sync += [
                    stage.data.eq(source.data), stage.length.eq(source.length),
                    stage.offset.eq(offset), stage.last.eq(source.last),
                    stage.empty.eq(source.last & ~started & (source.length == 0)),
                    offset.eq(Mux(source.last, 0, end % width)),
                    started.eq(~source.last & (started | (source.length != 0))),
                ]
        with m.Elif(self.i.valid & self.i.ready):
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m
