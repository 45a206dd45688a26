"""Beat width converters for frame streams (``frame_beat_layout``: data, keep, last, user):
a wide beat out as several narrow ones, narrow beats packed into wide ones."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.nic.layouts import frame_beat_layout

__all__ = ["Narrower", "Widener"]


class Narrower(wiring.Component):
    """Each beat of ``wide`` bytes on ``i`` leaves ``o`` as ``wide / narrow`` beats of
    ``narrow`` bytes, but a frame's last beat only as far as its kept bytes (which are its
    lowest); ``last`` and ``user`` go on the final part.

    Latency: none (combinational). Throughput: a narrow beat per cycle.
    """

    def __init__(self, wide, narrow):
        self._wide, self._narrow = wide, narrow
        super().__init__({"i": In(stream.Signature(frame_beat_layout(wide))),
                          "o": Out(stream.Signature(frame_beat_layout(narrow)))})

    def elaborate(self, platform):
        m = Module()
        wide, narrow = self._wide, self._narrow
        beat = self.i.payload
        parts = wide // narrow
        if parts == 1:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
            return m
        part = Signal(range(parts))
        next_kept = beat.keep.bit_select(part * narrow + narrow, 1)
        final = beat.last & ((part == parts - 1) | ~next_kept)
        final_part = (part == parts - 1) | final
        m.d.comb += [self.o.payload.data.eq(beat.data.word_select(part, 8 * narrow)),
                     self.o.payload.keep.eq(beat.keep.word_select(part, narrow)),
                     self.o.payload.last.eq(final), self.o.payload.user.eq(beat.user & final),
                     self.o.valid.eq(self.i.valid),
                     self.i.ready.eq(self.o.ready & final_part)]
        with m.If(self.i.valid & self.o.ready):
            m.d.sync += part.eq(Mux(final_part, 0, part + 1))
        return m


class Widener(wiring.Component):
    """Beats of ``narrow`` bytes on ``i`` packed into beats of ``wide`` bytes on ``o``: a
    wide beat leaves when full or at a frame's last beat (keeping the bytes it has, its
    lowest); ``i`` is taken whole except on a frame's last beat (its kept bytes).

    Latency: one cycle after a wide beat's last part. Throughput: a narrow beat per cycle
    while ``o`` takes the wide ones.
    """

    def __init__(self, narrow, wide):
        self._wide, self._narrow = wide, narrow
        super().__init__({"i": In(stream.Signature(frame_beat_layout(narrow))),
                          "o": Out(stream.Signature(frame_beat_layout(wide)))})

    def elaborate(self, platform):
        m = Module()
        wide, narrow = self._wide, self._narrow
        parts = wide // narrow
        part = Signal(range(parts))
        data, keep = Signal(8 * wide), Signal(wide)      # the parts before ``part``
        beat = self.i.payload
        kept = Mux(beat.last, beat.keep, Const((1 << narrow) - 1, narrow))
        # The wide beat with this narrow beat in its place (and nothing after it).
        merged_data = Cat(Mux(part == k, beat.data, data.word_select(k, 8 * narrow))
                          for k in range(parts))
        merged_keep = Cat(Mux(part == k, kept, Mux(part > k, keep.word_select(k, narrow), 0))
                          if k < parts - 1 else Mux(part == k, kept, 0) for k in range(parts))
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [data.eq(merged_data), keep.eq(merged_keep)]
            with m.If(beat.last | (part == parts - 1)):
                m.d.sync += [part.eq(0), self.o.valid.eq(1),
                             self.o.payload.data.eq(merged_data),
                             self.o.payload.keep.eq(merged_keep),
                             self.o.payload.last.eq(beat.last),
                             self.o.payload.user.eq(beat.user)]
            with m.Else():
                m.d.sync += part.eq(part + 1)
        return m
