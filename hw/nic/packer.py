"""Byte packer: variable-length chunks in, full fixed-width AXI4-Stream beats out."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.params import positive_int
from hw.nic.layouts import beat_layout, chunk_layout

__all__ = ["BytePacker"]


class BytePacker(wiring.Component):
    """Append chunks of 0..``chunk_bytes`` bytes to a buffer and emit it ``beat_bytes`` at a
    time; a chunk marked ``last`` ends the message, whose final beat keeps what is left.

    The buffer holds ``chunk_bytes + 2 * beat_bytes`` bytes. A chunk is taken whenever at
    most ``2 * beat_bytes`` are buffered and no message end is pending (``i.ready`` depends
    on registers only), so chunks of at most ``beat_bytes`` never wait. A full beat leaves
    once a byte more is buffered (so the message's final beat is always one with bytes),
    and the rest when the message has ended; a message of no bytes at all is one beat that
    keeps none.

    Latency: 1 cycle from the chunk that completes a beat (and one byte more) or ends the
    message to that beat. Throughput: one chunk per cycle while chunks average at most
    ``beat_bytes`` bytes and ``o.ready`` stays high; a message end costs the cycles its
    tail takes to leave.

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

    def elaborate(self, platform):
        m = Module()
        width = self.beat_bytes
        size = self.chunk_bytes + 2 * width
        buffer = Signal(8 * size)
        fill = Signal(range(size + 1))
        ending = Signal()                      # the buffer holds the end of a message

        final = Signal()
        m.d.comb += [
            final.eq(ending & (fill <= width)),
            self.o.valid.eq((fill > width) | ending),
            self.o.payload.data.eq(buffer[:8 * width]),
            self.o.payload.keep.eq(Cat(fill > k for k in range(width))),
            self.o.payload.last.eq(final),
            self.i.ready.eq(~ending & (fill <= 2 * width)),
        ]

        # What stays after this cycle's output beat, then the chunk appended at its end.
        kept = Signal(8 * size)
        kept_fill = Signal.like(fill)
        m.d.comb += [kept.eq(buffer), kept_fill.eq(fill)]
        with m.If(self.o.valid & self.o.ready):
            m.d.comb += kept.eq(buffer >> (8 * width))
            with m.If(final):
                m.d.comb += kept_fill.eq(0)
            with m.Else():
                m.d.comb += kept_fill.eq(fill - width)
            m.d.sync += ending.eq(ending & ~final)
        m.d.sync += [buffer.eq(kept), fill.eq(kept_fill)]
        with m.If(self.i.valid & self.i.ready):
            shift = Cat(Const(0, 3), kept_fill)
            m.d.sync += [
                buffer.eq(kept | (self.i.payload.data << shift)),
                fill.eq(kept_fill + self.i.payload.length),
                ending.eq(self.i.payload.last),
            ]
        return m
