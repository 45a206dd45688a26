"""Frame buffer: a ring of bytes in byte-wide banks, written and read ``width`` bytes at a
time from any byte address, and a reader that streams a byte range out of it."""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import Out
from amaranth.utils import exact_log2

from codnn.hw.nic.layouts import frame_beat_layout

__all__ = ["FrameBuffer", "RangeReader"]


class FrameBuffer(Elaboratable):
    """``size`` bytes (a power of two) in ``width`` banks (a power of two, 2 or more),
    bank ``j`` holding the bytes whose address is ``j`` modulo ``width``, so that any
    ``width`` consecutive bytes sit in different banks: an unaligned access is a byte
    rotation.

    Write port: ``w_data`` (byte ``i`` to address ``w_addr + i``), ``w_en`` (one bit per
    byte of ``w_data``). Read port: ``r_data`` holds the ``width`` bytes from the ``r_addr``
    of the last cycle with ``r_en`` high (byte ``i`` from ``r_addr + i``); a byte written
    in the cycle it is read, or the cycle before, reads as before. Addresses wrap modulo
    ``size``.

    Latency: a write is registered, then lands at the next clock edge; one cycle from
    ``r_addr`` to ``r_data``. Throughput: ``width`` bytes written and ``width`` read per
    cycle.
    """

    def __init__(self, *, width, size):
        exact_log2(width), exact_log2(size)
        if width < 2 or size < 2 * width:
            raise ValueError(f"A frame buffer needs at least {2 * width} bytes, not {size}")
        self.width, self.size = width, size
        self.w_addr, self.r_addr = Signal(exact_log2(size)), Signal(exact_log2(size))
        self.w_data, self.r_data = Signal(8 * width), Signal(8 * width)
        self.w_en, self.r_en = Signal(width), Signal(init=1)

    def elaborate(self, platform):
        m = Module()
        width, shift = self.width, exact_log2(self.width)
        rows = self.size // width

        def rotate(value, offset, bits):
            """``value`` (``width`` fields of ``bits``) rotated so field ``i`` lands at
            ``(i + offset) mod width``."""
            return Cat(value, value).bit_select(bits * (width - offset).as_unsigned(),
                                                bits * width)

        # The write is registered first, so that the writer's address arithmetic and the
        # byte rotation are in different cycles.
        w_addr, w_data, w_en = (Signal.like(self.w_addr), Signal.like(self.w_data),
                                Signal.like(self.w_en))
        m.d.sync += [w_addr.eq(self.w_addr), w_data.eq(self.w_data), w_en.eq(self.w_en)]
        w_low, r_low = w_addr[:shift], self.r_addr[:shift]
        r_low_held = Signal.like(r_low)
        with m.If(self.r_en):
            m.d.sync += r_low_held.eq(r_low)
        w_data, w_en = rotate(w_data, w_low, 8), rotate(w_en, w_low, 1)
        banks = []
        for j in range(width):
            bank = memory.Memory(shape=8, depth=rows, init=[])
            m.submodules[f"bank{j}"] = bank
            write, read = bank.write_port(), bank.read_port()
            # The banks before the access's first byte take it from the next row (the
            # last bank never: a comparison that is always false would trip Verilator).
            w_row = w_addr[shift:] + (w_low > j) if j < width - 1 else w_addr[shift:]
            r_row = self.r_addr[shift:] + (r_low > j) if j < width - 1 else self.r_addr[shift:]
            m.d.comb += [write.addr.eq(w_row), write.data.eq(w_data[8 * j:8 * j + 8]),
                         write.en.eq(w_en[j]), read.addr.eq(r_row), read.en.eq(self.r_en)]
            banks.append(read.data)
        data = Cat(banks)
        m.d.comb += self.r_data.eq(Cat(data, data).bit_select(8 * r_low_held, 8 * width))
        return m


class RangeReader(wiring.Component):
    """Stream ``length`` bytes of a ``FrameBuffer`` from byte pointer ``start`` as beats of
    the buffer's width (``o``: ``codnn.hw.nic.layouts.frame_beat_layout``; the last beat
    keeps the range's final bytes, ``last`` on it; every beat carries the range's ``user``
    bit). ``go`` (a cycle while ``idle``) starts a range, even while the previous range's
    last beat waits on ``o``; ``length`` 0 gives no beat. Pointers count bytes modulo
    twice the buffer's size; ``position`` is the next byte to read (every byte before it
    has been read).

    Latency: the first beat is valid three cycles after ``go``. Throughput: a beat per cycle
    while ``o`` takes them.

    Attributes
    ----------
    start, length, user, go : In
    idle : Out(1)
        No byte of the range is left to read.
    position : Out
    o : Out(stream.Signature(frame_beat_layout(width)))
    """

    def __init__(self, buffer, *, max_length):
        self._buffer = buffer
        pointer = len(buffer.w_addr) + 1
        super().__init__({"start": wiring.In(pointer), "length": wiring.In(range(max_length + 1)),
                          "user": wiring.In(1), "go": wiring.In(1), "idle": Out(1),
                          "position": Out(pointer),
                          "o": Out(stream.Signature(frame_beat_layout(buffer.width)))})

    def elaborate(self, platform):
        m = Module()
        buffer, width = self._buffer, self._buffer.width
        address = self.position
        remaining = Signal.like(self.length)
        user = Signal()
        # Beats as read (``read``), then a register stage (``o``), so that the memory's
        # output and its byte rotation reach no logic past the reader in the same cycle.
        read = stream.Signature(frame_beat_layout(width)).create()
        advance = Signal()
        m.d.comb += [advance.eq(~read.valid | read.ready),
                     buffer.r_en.eq(advance), buffer.r_addr.eq(address),
                     self.idle.eq(remaining == 0),
                     read.payload.data.eq(buffer.r_data),
                     read.ready.eq(~self.o.valid | self.o.ready)]
        with m.If(read.ready):
            m.d.sync += [self.o.valid.eq(read.valid), self.o.payload.eq(read.payload)]
        step = Signal(range(width + 1))
        m.d.comb += step.eq(Mux(remaining < width, remaining, width))
        with m.If(advance):
            m.d.sync += [read.valid.eq(remaining != 0),
                         read.payload.last.eq(remaining <= width),
                         read.payload.keep.eq(Cat(Const(i) < step for i in range(width))),
                         read.payload.user.eq(user),
                         address.eq(address + step), remaining.eq(remaining - step)]
        with m.If(self.go):
            m.d.sync += [address.eq(self.start), remaining.eq(self.length),
                         user.eq(self.user)]
        return m
