"""A clock-crossing FIFO whose every flag and output is a register, for a fast read clock on
a slow part (``amaranth.lib.fifo.AsyncFIFOBuffered`` decides its read from a Gray-code
compare in the same cycle it moves its read pointer and reads its memory)."""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

__all__ = ["RegisteredAsyncFIFO"]


def _gray(value):
    return value ^ (value >> 1)


class RegisteredAsyncFIFO(wiring.Component):
    """``depth`` entries (a power of two) of ``shape`` from ``i`` in ``w_domain`` to ``o``
    in ``r_domain``, the entries in flip-flops.

    Each side keeps its pointer in binary and in Gray code and sees the other's Gray
    pointer through a two-stage synchronizer. ``i.ready`` (not full) and ``o.valid`` (an
    entry out) are registers computed from the pointers as they will be, and ``o.payload``
    is a register loaded with the entry to read next; the read side prepares both
    outcomes from registers, so a read's enable reaches only their final select.

    Latency: an entry is on ``o`` four or five ``r_domain`` cycles after it is written (the
    synchronizer and the output register). Throughput: an entry per cycle each side.
    """

    def __init__(self, shape, *, depth, w_domain, r_domain):
        exact_log2(depth)
        self._shape, self._depth = shape, depth
        self._w_domain, self._r_domain = w_domain, r_domain
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        depth, bits = self._depth, exact_log2(self._depth) + 1
        entries = Array(Signal(self._shape, name=f"entry{k}") for k in range(depth))
        write = m.d[self._w_domain]
        read = m.d[self._r_domain]

        w_bin, w_gray, r_gray_seen = Signal(bits), Signal(bits), Signal(bits)
        r_bin, r_gray, w_gray_seen = Signal(bits), Signal(bits), Signal(bits)
        m.submodules.r_to_w = FFSynchronizer(r_gray, r_gray_seen, o_domain=self._w_domain)
        m.submodules.w_to_r = FFSynchronizer(w_gray, w_gray_seen, o_domain=self._r_domain)

        # Write side: i.ready is "not full" for the pointer after this cycle's write (full:
        # the pointers differ by ``depth``, the Gray codes in their two top bits).
        written = self.i.valid & self.i.ready
        w_next = Signal(bits)
        m.d.comb += w_next.eq(w_bin + written)
        full_next = _gray(w_next) == (r_gray_seen ^ (0b11 << (bits - 2)))
        with m.If(written):
            write += entries[w_bin[:bits - 1]].eq(self.i.payload)
        write += [w_bin.eq(w_next), w_gray.eq(_gray(w_next)), self.i.ready.eq(~full_next)]

        # Read side: o.valid and o.payload for the pointer after this cycle's read (an
        # entry is read only once the write pointer that covers it has come through the
        # synchronizer, two cycles after the entry was written). Both outcomes are
        # prepared from registers; whether the current entry is taken picks one.
        taken = self.o.valid & self.o.ready
        r_plus = Signal(bits)
        m.d.comb += r_plus.eq(r_bin + 1)
        with m.If(taken):
            read += [r_bin.eq(r_plus), r_gray.eq(_gray(r_plus)),
                     self.o.valid.eq(_gray(r_plus) != w_gray_seen),
                     self.o.payload.eq(entries[r_plus[:bits - 1]])]
        with m.Else():
            read += [self.o.valid.eq(r_gray != w_gray_seen),
                     self.o.payload.eq(entries[r_bin[:bits - 1]])]
        return m
