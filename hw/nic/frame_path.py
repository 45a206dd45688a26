"""Frame path: the packet rule (docs/semantics.md section 4) on a stream of Ethernet frames,
store and forward, with the INCEPTIONN-style engines rewriting gradient frames."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS, RAW_EXPONENT, SMALL_BITS
from codnn.golden.packets import (DEFAULT_MAX_FRAME, DIRECTIONS, ETH_HEADER, ETHERTYPE_IPV4,
                                  GRADIENT_TOS, IPPROTO_UDP, MIN_FRAME, UDP_HEADER)
from codnn.hw.nic.beat_width import Narrower
from codnn.hw.nic.compressor import InceptionnCompressor
from codnn.hw.nic.decompressor import InceptionnDecompressor
from codnn.hw.nic.frame_buffer import FrameBuffer, RangeReader
from codnn.hw.nic.inceptionn_format import clamp_bound_bits
from codnn.hw.nic.layouts import beat_bytes, frame_beat_layout

__all__ = ["FRAME_WIDTHS", "FramePath"]

#: Bytes per beat the frame path takes and gives (8 bits for 1 GbE, 64 for 10 GbE).
FRAME_WIDTHS = (1, 2, 4, 8)
#: Frame records the queue between the parser and the rewriter holds.
_QUEUE = 16
#: Frames the parser may hold past its input, each a record to come (its pipeline stages).
_IN_FLIGHT = 7


class _Action(enum.Enum, shape=2):
    DROP = 0
    PASS = 1
    REWRITE = 2


class _Stage2(enum.Enum, shape=3):
    IDLE = 0
    HEAD = 1
    BODY = 2
    PAD = 3
    END = 4


def _buffer_bytes(max_frame):
    return 1 << ceil_log2(2 * max_frame)


def _record_layout(max_frame):
    """What the parser learns of a frame, for the rewriting stage."""
    length = range(max_frame + 1)
    return data.StructLayout({
        "start": len(Signal(range(2 * _buffer_bytes(max_frame)))),   # its first byte in A
        "length": length,             # bytes in A (a frame longer than max_frame: some)
        "action": _Action, "flagged": 1,
        "ihl": 4, "payload": length,  # UDP payload bytes (the values or the message)
        "total": 16, "checksum": 16,  # the rewritten IPv4 total length and its checksum
        "out_length": length,         # bytes out (a rewritten frame's before a drop)
        "bound_bits": 4,
    })


class _Fields:
    """The parser's view of the frame going by: the header fields it captures, the sums it
    keeps, and the same, copied at a frame's end (``snap``), for the decision."""

    _CAPTURED = {"ethertype": (16, [12, 13]), "version_ihl": (8, [14]), "tos": (8, [15]),
                 "total": (16, [16, 17]), "fragment": (16, [20, 21]), "protocol": (8, [23])}

    def __init__(self, width, max_frame, direction):
        self.width, self.direction = width, direction
        for name, (bits, _) in self._CAPTURED.items():
            setattr(self, name, Signal(bits, name=name))
        self.udp_length, self.count_field = Signal(16), Signal(32)
        self.header_sum, self.sizes = Signal(24), Signal(range(4 * max_frame + 1))
        self.sampled = Signal(4, init=DEFAULT_BOUND_BITS)     # bound_bits at a first beat
        self.previous = Signal(8)               # the byte before the beat at P1

    def terms(self, m, masked, offset, count):
        """At P1: the beat's header bytes that the checksum adds (their sums at even and
        odd offsets) and (compressing) the compressed sizes of the values whose high byte
        it holds (a value's high byte is at an offset of 1 mod 4: the payload starts at
        ``22 + 4 * IHL``)."""
        bound_bits, _ = clamp_bound_bits(m, self.sampled)
        self.bound_bits = bound_bits
        udp = ETH_HEADER + 4 * self.version_ihl[:4]
        payload_at = udp + UDP_HEADER
        high, low, sizes = [], [], []
        for j in range(self.width):
            at = offset + j
            byte = masked[8 * j:8 * j + 8]
            kept = Const(j) < count
            in_header = kept & (at >= ETH_HEADER) & ((at < 34) | (at < udp)) \
                & (at != 16) & (at != 17) & (at != 24) & (at != 25)
            # A byte at an even offset is the high byte of its checksum word.
            if self.width > 1:
                (low if j % 2 else high).append(Mux(in_header, byte, 0))
            else:
                high.append(Mux(in_header & ~at[0], byte, 0))
                low.append(Mux(in_header & at[0], byte, 0))
            if self.direction == "compress":
                before = masked[8 * j - 8:8 * j] if j else self.previous
                exponent = Cat(before[7], byte[:7])
                in_payload = kept & (at[:2] == 1) & (at >= payload_at + 3) \
                    & (at < ETH_HEADER + self.total)
                size = Mux(exponent >= RAW_EXPONENT, 4,
                           Mux(exponent < RAW_EXPONENT - bound_bits, 0,
                               Mux(exponent < RAW_EXPONENT + SMALL_BITS - bound_bits, 1, 2)))
                sizes.append(Mux(in_payload, size, 0))
        bits = len(Signal(range(255 * self.width + 1)))
        out = [Signal(bits, name=name) for name in ("high", "low")] \
            + [Signal(range(4 * self.width + 1), name="size_terms")]
        m.d.comb += [out[0].eq(sum(high)), out[1].eq(sum(low)), out[2].eq(sum(sizes or [0]))]
        return out

    def accumulate(self, m, valid, first, data, offset, high, low, sizes, last):
        """At P2: capture the fields the beat holds, add its terms (from zero at a frame's
        first beat), and with ``last`` copy the frame's values into the snapshot."""
        width = self.width
        low_bits = exact_log2(width)
        udp = ETH_HEADER + 4 * self.version_ihl[:4]
        payload_at = udp + UDP_HEADER
        self.snap = _FieldsSnapshot(self)

        def byte_at(at):
            aligned = at & ~(width - 1) if isinstance(at, int) \
                else Cat(Const(0, low_bits), at[low_bits:])
            hit = valid & (offset == aligned)
            if width == 1:
                return hit, data
            lane = at % width if isinstance(at, int) else at[:low_bits]
            return hit, data.word_select(lane, 8)

        def capture(register, snapshot, offsets):
            new = Signal.like(register, name=f"{register.name}_next")
            m.d.comb += new.eq(register)
            for k, at in enumerate(offsets):        # big-endian: the first is high
                hit, value = byte_at(at)
                shift = 8 * (len(offsets) - 1 - k)
                with m.If(hit):
                    m.d.comb += new[shift:shift + 8].eq(value)
            m.d.sync += register.eq(new)
            with m.If(last):
                m.d.sync += snapshot.eq(new)

        for name, (_, offsets) in self._CAPTURED.items():
            capture(getattr(self, name), getattr(self.snap, name), offsets)
        capture(self.udp_length, self.snap.udp_length, [udp + 4, udp + 5])
        capture(self.count_field, self.snap.count_field,
                [payload_at + 3, payload_at + 2, payload_at + 1, payload_at])
        for total, snapshot, term in ((self.header_sum, self.snap.header_sum,
                                       (high << 8) + low),
                                      (self.sizes, self.snap.sizes, sizes)):
            new = Signal.like(total, name=f"{total.name}_next")
            m.d.comb += new.eq(Mux(first, 0, total) + term)
            with m.If(valid):
                m.d.sync += total.eq(new)
            with m.If(last):
                m.d.sync += snapshot.eq(new)


class _FieldsSnapshot:
    """A frame's fields as ``_Fields`` had them after its last beat."""

    def __init__(self, fields):
        for name in (*fields._CAPTURED, "udp_length", "count_field", "header_sum", "sizes"):
            setattr(self, name, Signal.like(getattr(fields, name), name=f"snap_{name}"))
        self.bound_bits = Signal(4, name="snap_bound_bits")


@dataclass(frozen=True)
class _Rewriting:
    """What the rewriting stage's states share: the frame records, buffer A's reader,
    buffer B, the sender's entries (``leaving``), the engine; the record in hand,
    whether it is rewritten, its headers' bytes; the stage's state, where the frame
    starts in buffer B and the bytes written, room for the frame there; whether the
    engine's descriptor went (or is skipped), the engine's last beat and the frame's
    end seen, a bad message, a frame dropped now."""

    records: SyncFIFOBuffered
    reader: RangeReader
    buffer: FrameBuffer
    leaving: SyncFIFOBuffered
    engine: wiring.Component
    record: Signal
    rewrite: object
    header: Signal
    state: Signal
    write_at: Signal
    written: Signal
    room: Signal
    descriptor_sent: Signal
    skip_descriptor: Signal
    got_last: Signal
    got_end: Signal
    bad: Signal
    drop_now: Signal


class FramePath(wiring.Component):
    """Ethernet frames (no FCS) in on ``i``, out on ``o`` (streams of
    ``codnn.hw.nic.layouts.frame_beat_layout(width)``); ``user`` on a frame's last beat
    flags it bad (the MAC's bad FCS). ``codnn.hw.nic.AxiStreamTop`` gives it AXI4-Stream
    ports (``s_axis_t*``, ``m_axis_t*``, ``tuser`` included). In the ``"compress"``
    direction gradient frames leave compressed, in ``"decompress"`` restored; every case
    is ``codnn.golden.packets.frame_path``'s, byte for byte.

    Three stages, each with its own buffer (docs/nic.md, "The frame path"): the parser
    writes a frame into buffer A while it reads the header fields, the checksum's sum and
    (compressing) the compressed size from each value's exponent; after the frame's last
    beat three register stages decide (drop, pass, rewrite) and queue a record, while the
    next frame comes in. The rewriter copies the frame into buffer B, a rewritten frame's
    header with its new lengths and checksum, then its payload through the engine
    (``InceptionnCompressor`` or ``InceptionnDecompressor`` of ``max(4, width) / 4``
    lanes), then pads it to 60 bytes; a message the decompressor finds bad is dropped from
    B; a dropped frame's bytes in A are given back. The sender streams B's frames out.
    Each buffer holds ``2 * max_frame`` bytes rounded up to a power of two; a frame longer
    than ``max_frame`` is taken to its ``last`` and dropped, and only a frame being
    written waits for room (``i.ready`` low), so nothing is lost to a full buffer
    and no frame corrupts another.

    Settings: ``bound_bits`` is sampled with a frame's first beat (clamped to 7..15).
    Counters (wrapping): ``passed``, ``changed``, ``dropped``, ``flagged``, as golden's.

    Latency: a frame starts leaving after all of it is in, the decision (about 6 cycles),
    and the rewriting stage's copy (a few cycles for a passed frame; the engine's latency
    more for a rewritten one). Throughput: the three stages overlap over frames; each
    moves a beat of ``max(4, width)`` bytes per cycle, with a few cycles per frame more
    in each stage (``benchmarks/frame_path.py`` measures it).

    Parameters
    ----------
    direction : str
        ``"compress"`` or ``"decompress"``.
    width : int
        Bytes per beat: 1, 2, 4 or 8.
    max_frame : int
        The largest frame in or out, in bytes without FCS (64..16384).
    drop_when_full : bool
        For an input that cannot wait (a MAC's receiver): ``i.ready`` stays high
        and a frame that finds no room in buffer A (or no place in the queue of frame
        records) is dropped and counted instead.
    """

    def __init__(self, *, direction="compress", width=8, max_frame=DEFAULT_MAX_FRAME,
                 drop_when_full=False):
        if direction not in DIRECTIONS:
            raise ValueError(f"Direction must be one of {', '.join(DIRECTIONS)}, "
                             f"not {direction!r}")
        if isinstance(width, bool) or width not in FRAME_WIDTHS:
            raise ValueError(f"Frame width must be one of "
                             f"{', '.join(map(str, FRAME_WIDTHS))} bytes, not {width!r}")
        if isinstance(max_frame, bool) or not isinstance(max_frame, int) \
                or not 64 <= max_frame <= 16384:
            raise ValueError(f"Largest frame must be 64..16384 bytes, not {max_frame!r}")
        self._direction, self._width, self._max_frame = direction, width, max_frame
        self._drop_when_full = bool(drop_when_full)
        beats = stream.Signature(frame_beat_layout(width))
        super().__init__({"i": In(beats), "o": Out(beats),
                          "bound_bits": In(4, init=DEFAULT_BOUND_BITS),
                          "passed": Out(32), "changed": Out(32), "dropped": Out(32),
                          "flagged": Out(32)})

    direction = property(lambda self: self._direction, doc="``compress`` or ``decompress``.")
    width = property(lambda self: self._width, doc="Bytes per beat.")
    max_frame = property(lambda self: self._max_frame, doc="The largest frame, in bytes.")

    @property
    def latency(self):
        """None: store and forward, a frame's latency depends on its length and the frames
        before it (see the class's docstring)."""
        return None

    @property
    def buffer_bytes(self):
        """Bytes of each of the two frame buffers."""
        return _buffer_bytes(self._max_frame)

    def elaborate(self, platform):
        m = Module()
        inner = max(4, self._width)
        size = self.buffer_bytes
        m.submodules.buffer_a = buffer_a = FrameBuffer(width=inner, size=size)
        m.submodules.buffer_b = buffer_b = FrameBuffer(width=inner, size=size)
        m.submodules.records = records = SyncFIFOBuffered(
            width=len(Signal(_record_layout(self._max_frame)).as_value()), depth=_QUEUE)
        m.submodules.leaving = leaving = SyncFIFOBuffered(
            width=len(Signal(range(self._max_frame + 1))) + 1, depth=_QUEUE)    # length, flag
        m.submodules.reader_a = reader_a = RangeReader(buffer_a, max_length=self._max_frame)
        m.submodules.reader_b = reader_b = RangeReader(buffer_b, max_length=self._max_frame)
        lost = Signal()
        self._parse(m, buffer_a, records, reader_a.position, lost)
        self._rewrite(m, records, reader_a, buffer_b, leaving, reader_b.position, lost)
        self._send(m, leaving, reader_b)
        return m

    # -- stage 1: parse into buffer A ------------------------------------------------------

    def _parse(self, m, buffer, records, released, lost):
        width, max_frame = self._width, self._max_frame
        pointer = len(released)

        # P1: the beat as taken. It is written into A here, at the frame's start plus its
        # offset; ``top`` is the address after the last byte written.
        p1, p1_valid, p1_first = Signal(frame_beat_layout(width)), Signal(), Signal()
        p1_offset = Signal(range(max_frame + 2 * width))
        offset = Signal.like(p1_offset)         # the next beat's offset in its frame
        first, giant = Signal(init=1), Signal()
        start, top = Signal(pointer), Signal(pointer)
        ready = Signal()
        used = Signal(pointer)
        queue_room = records.level <= _QUEUE - _IN_FLIGHT
        m.d.comb += [used.eq(top - released),
                     ready.eq(Const(1) if self._drop_when_full
                              else (used + 2 * width <= buffer.size) & queue_room),
                     self.i.ready.eq(ready)]
        beat = self.i.payload
        take = self.i.valid & ready
        m.d.sync += p1_valid.eq(take)
        with m.If(take):
            m.d.sync += [p1.eq(beat), p1_offset.eq(offset), p1_first.eq(first),
                         first.eq(beat.last), offset.eq(Mux(beat.last, 0, offset + width))]
        count, masked = beat_bytes(m, p1)
        over = Signal()
        m.d.comb += over.eq(Mux(p1_first, 0, giant) | (p1_offset + count > max_frame))
        if self._drop_when_full:            # no room for this beat, or for the frame's record
            m.d.comb += over.eq(Mux(p1_first, ~queue_room, giant)
                                | (p1_offset + count > max_frame)
                                | (used + width > buffer.size))
        stored = ~over
        m.d.comb += [buffer.w_addr.eq(start + p1_offset), buffer.w_data.eq(masked),
                     buffer.w_en.eq(Mux(p1_valid & stored,
                                        Cat(Const(i) < count for i in range(width)), 0))]
        after = Signal(pointer)
        m.d.comb += after.eq(Mux(stored, start + p1_offset + count, top))
        with m.If(p1_valid):
            m.d.sync += [giant.eq(over), top.eq(after)]
            with m.If(p1.last):
                m.d.sync += start.eq(after)

        # P2: what the beat adds (fields, the header's checksum bytes, the compressed
        # sizes of its values), from the fields of the beats before it (a field the beat
        # needs is always at least two beats earlier).
        p2_valid, p2_last, p2_first, p2_user, p2_giant = (Signal() for _ in range(5))
        p2_offset, p2_data = Signal.like(p1_offset), Signal.like(masked)
        p2_length, p2_start = Signal(range(max_frame + 2 * width)), Signal(pointer)
        fields = _Fields(width, max_frame, self._direction)
        high, low, sizes = fields.terms(m, masked, p1_offset, count)
        p2_bound = Signal(4)
        p2_high, p2_low, p2_sizes = Signal.like(high), Signal.like(low), Signal.like(sizes)
        m.d.sync += [p2_valid.eq(p1_valid), p2_last.eq(p1_valid & p1.last),
                     p2_first.eq(p1_first), p2_user.eq(p1.user), p2_giant.eq(over),
                     p2_offset.eq(p1_offset), p2_data.eq(masked),
                     p2_length.eq(after - start), p2_start.eq(start),
                     p2_high.eq(high), p2_low.eq(low), p2_sizes.eq(sizes),
                     p2_bound.eq(fields.bound_bits)]
        with m.If(take & first):
            m.d.sync += fields.sampled.eq(self.bound_bits)
        with m.If(p1_valid):
            m.d.sync += fields.previous.eq(masked[-8:])
        fields.accumulate(m, p2_valid, p2_first, p2_data, p2_offset, p2_high, p2_low, p2_sizes,
                          p2_last)

        # P3: the frame's fields as they were after its last beat (the next frame's first
        # beat may be at P2 already), then the decision's three stages.
        snapshot = fields.snap
        with m.If(p2_last):
            m.d.sync += snapshot.bound_bits.eq(p2_bound)
        p3_valid, p3_user, p3_giant = Signal(), Signal(), Signal()
        p3_length, p3_start = Signal.like(p2_length), Signal(pointer)
        m.d.sync += p3_valid.eq(p2_last)
        with m.If(p2_last):
            m.d.sync += [p3_user.eq(p2_user), p3_giant.eq(p2_giant),
                         p3_length.eq(p2_length), p3_start.eq(p2_start)]
        record, valid = self._decide(m, snapshot, p3_valid, p3_user, p3_giant, p3_length,
                                     p3_start)
        # A record finds no room only for a frame dropped whole for want of it (drop mode).
        m.d.comb += [records.w_data.eq(record), records.w_en.eq(valid),
                     lost.eq(valid & ~records.w_rdy)]

    def _decide(self, m, f, valid, flagged, giant, length, start):
        """The record of a frame from its fields ``f``, three register stages later, and its
        write enable: drop, pass or rewrite, and a rewritten frame's lengths and checksum."""
        max_frame = self._max_frame
        compressing = self._direction == "compress"
        # D1: the payload's length and the tests of single fields.
        ihl = f.version_ihl[:4]
        d1 = Signal(_record_layout(max_frame))
        d1_valid, d1_flagged, d1_giant, d1_header_ok = Signal(), Signal(), Signal(), Signal()
        d1_total_ok, d1_sum = Signal(), Signal(17)
        d1_payload_at = Signal(range(ETH_HEADER + 4 * 15 + UDP_HEADER + 1))
        d1_sizes, d1_count = Signal.like(f.sizes), Signal.like(f.count_field)
        d1_udp_length, d1_total = Signal(16), Signal(16)
        header_ok = ((length >= ETH_HEADER + 28) & (f.ethertype == ETHERTYPE_IPV4)
                     & (f.version_ihl[4:] == 4) & (ihl >= 5) & (f.tos == GRADIENT_TOS)
                     & (f.protocol == IPPROTO_UDP) & (f.fragment[:14] == 0))
        m.d.sync += [d1_valid.eq(valid), d1_flagged.eq(flagged),
                     d1_giant.eq(giant | (length == 0)), d1_header_ok.eq(header_ok),
                     d1_total_ok.eq((f.total >= 4 * ihl + UDP_HEADER)
                                    & (ETH_HEADER + f.total <= length)),
                     d1_sum.eq(f.header_sum[:16] + f.header_sum[16:]),
                     d1_payload_at.eq(ETH_HEADER + 4 * ihl + UDP_HEADER),
                     d1_sizes.eq(f.sizes), d1_count.eq(f.count_field),
                     d1_udp_length.eq(f.udp_length), d1_total.eq(f.total - 4 * ihl),
                     d1.start.eq(start), d1.length.eq(length), d1.ihl.eq(ihl),
                     d1.payload.eq(f.total - 4 * ihl - UDP_HEADER),
                     d1.bound_bits.eq(f.bound_bits)]
        # D2: the rewritten frame's length before padding, and whether the rule applies.
        d2 = Signal(_record_layout(max_frame))
        d2_valid, d2_flagged, d2_giant, d2_consistent = Signal(), Signal(), Signal(), Signal()
        d2_usable, d2_sum, d2_body = Signal(), Signal(17), Signal(range(1 << 36))
        if compressing:
            values = d1.payload[2:]
            body = d1_payload_at + 4 + 2 * ((values + 7) >> 3) + d1_sizes
            usable = d1.payload[:2] == 0
        else:
            body = d1_payload_at + 4 * d1_count
            usable = d1.payload >= 4
        m.d.sync += [d2.eq(d1), d2_valid.eq(d1_valid), d2_flagged.eq(d1_flagged),
                     d2_giant.eq(d1_giant), d2_sum.eq(d1_sum), d2_body.eq(body),
                     d2_usable.eq(usable),
                     d2_consistent.eq(d1_header_ok & d1_total_ok
                                      & (d1_udp_length == d1_total))]
        # D3: the action, the new total length and the checksum's sum.
        out_length = Mux(d2_body < MIN_FRAME, MIN_FRAME, d2_body)
        fits = out_length <= max_frame
        refused = _Action.PASS if compressing else _Action.DROP
        action = Mux(d2_giant, _Action.DROP,
                     Mux(d2_flagged | ~d2_consistent, _Action.PASS,
                         Mux(d2_usable & fits, _Action.REWRITE, refused)))
        new_total = (d2_body - ETH_HEADER)[:16]
        record, record_valid, folded = Signal(_record_layout(max_frame)), Signal(), Signal(17)
        m.d.sync += [record.eq(d2), record_valid.eq(d2_valid), record.flagged.eq(d2_flagged),
                     record.action.eq(action), record.total.eq(new_total),
                     folded.eq(d2_sum + new_total),
                     record.out_length.eq(Mux(action == _Action.REWRITE, out_length,
                                              d2.length))]
        out = Signal(_record_layout(max_frame))
        m.d.comb += [out.eq(record), out.checksum.eq(~(folded[:16] + folded[16]))]
        return out, record_valid

    # -- stage 2: rewrite into buffer B ----------------------------------------------------

    def _rewrite(self, m, records, reader, buffer, leaving, released, lost):
        """The rewriting stage: each frame record's bytes from buffer A (``reader``) into
        buffer B: a passed frame as it is, a rewritten one's header patched and its
        payload through the engine, then padding to the smallest frame; the frame's
        entry for the sender (``leaving``), and the counters."""
        inner, max_frame = buffer.width, self._max_frame
        compressing = self._direction == "compress"
        engine = (InceptionnCompressor if compressing else InceptionnDecompressor)(
            lanes=inner // 4, max_values=max_frame // 4)
        m.submodules.engine = engine
        record = Signal(_record_layout(max_frame))
        m.d.comb += [record.eq(records.r_data), engine.bound_bits.eq(record.bound_bits)]
        header = Signal(range(ETH_HEADER + 69))
        m.d.comb += header.eq(ETH_HEADER + 4 * record.ihl + UDP_HEADER)
        state = Signal(_Stage2)
        write_at = Signal(len(released))         # and in buffer B
        written = Signal(range(max_frame + 1))
        used = Signal.like(released)            # bytes B holds (modulo the pointers)
        room = Signal()
        m.d.comb += [used.eq(write_at - released),
                     room.eq(used + record.out_length <= buffer.size)]
        m.d.comb += buffer.w_addr.eq(write_at + written)
        descriptor_sent, skip_descriptor = Signal(), Signal()
        got_last, got_end, bad = Signal(), Signal(), Signal()
        drop_now = Signal()
        m.d.sync += self.dropped.eq(self.dropped + drop_now + lost)
        k = _Rewriting(
            records=records, reader=reader, buffer=buffer, leaving=leaving, engine=engine,
            record=record, rewrite=record.action == _Action.REWRITE, header=header,
            state=state, write_at=write_at, written=written, room=room,
            descriptor_sent=descriptor_sent, skip_descriptor=skip_descriptor,
            got_last=got_last, got_end=got_end, bad=bad, drop_now=drop_now)
        with m.Switch(state):
            with m.Case(_Stage2.IDLE):
                self._next_record(m, k)
            with m.Case(_Stage2.HEAD):
                count, masked = beat_bytes(m, reader.o.payload)
                patched = self._patch(m, masked, written, record)
                m.d.comb += reader.o.ready.eq(1)
                taken = reader.o.valid
                self._write(m, k, Mux(k.rewrite, patched, masked), count, taken)
                m.d.comb += [reader.start.eq(record.start + header),
                             reader.length.eq(record.payload)]
                with m.If(taken & reader.o.payload.last):
                    with m.If(k.rewrite):
                        m.d.comb += reader.go.eq(1)
                        m.d.sync += state.eq(_Stage2.BODY)
                    with m.Else():
                        m.d.sync += state.eq(_Stage2.END)
            with m.Case(_Stage2.BODY):
                self._body(m, k)
            with m.Case(_Stage2.PAD):
                short = written < MIN_FRAME
                gap = MIN_FRAME - written
                self._write(m, k, 0, Mux(gap < inner, gap, inner), short)
                with m.If(~short):
                    m.d.sync += state.eq(_Stage2.END)
            with m.Case(_Stage2.END):
                self._frame_done(m, k)

    @staticmethod
    def _write(m, k, beat_data, nbytes, enable):
        """Write ``nbytes`` of a beat into buffer B at the frame's next byte."""
        inner = k.buffer.width
        m.d.comb += [k.buffer.w_data.eq(beat_data),
                     k.buffer.w_en.eq(Mux(enable, Cat(Const(i) < nbytes
                                                      for i in range(inner)), 0))]
        with m.If(enable):
            m.d.sync += k.written.eq(k.written + nbytes)

    @staticmethod
    def _next_record(m, k):
        """IDLE: the next record; a dropped frame's bytes are given back (the reader moves
        past them), another starts once B has room for it."""
        record, reader, records = k.record, k.reader, k.records
        drop = record.action == _Action.DROP
        m.d.comb += [reader.start.eq(Mux(drop, record.start + record.length, record.start)),
                     reader.length.eq(Mux(drop, 0, Mux(k.rewrite, k.header, record.length))),
                     reader.user.eq(record.flagged)]
        with m.If(records.r_rdy & drop & reader.idle):
            m.d.comb += [reader.go.eq(1), records.r_en.eq(1), k.drop_now.eq(1)]
        with m.Elif(records.r_rdy & k.room & k.leaving.w_rdy & reader.idle):
            m.d.comb += reader.go.eq(1)
            m.d.sync += [k.state.eq(_Stage2.HEAD), k.written.eq(0),
                         k.descriptor_sent.eq(0), k.skip_descriptor.eq(1),
                         k.got_last.eq(0), k.got_end.eq(0), k.bad.eq(0)]

    def _body(self, m, k):
        """BODY: into the engine (compressing: a descriptor beat with the value count,
        then the payload); out of the engine (decompressing: but its descriptor beat)
        into B, until the engine's message has ended."""
        engine, reader, record = k.engine, k.reader, k.record
        compressing = self._direction == "compress"
        if compressing:
            values = record.payload[2:]
            with m.If(~k.descriptor_sent):
                m.d.comb += [engine.i.payload.data.eq(values),
                             engine.i.payload.keep.eq(-1),
                             engine.i.payload.last.eq(values == 0),
                             engine.i.valid.eq(1)]
                with m.If(engine.i.ready):
                    m.d.sync += k.descriptor_sent.eq(1)
            feeding = k.descriptor_sent
        else:
            feeding = Const(1)
        with m.If(feeding):
            m.d.comb += [engine.i.payload.data.eq(reader.o.payload.data),
                         engine.i.payload.keep.eq(reader.o.payload.keep),
                         engine.i.payload.last.eq(reader.o.payload.last),
                         engine.i.valid.eq(reader.o.valid),
                         reader.o.ready.eq(engine.i.ready)]
        count, masked = beat_bytes(m, engine.o.payload)
        m.d.comb += engine.o.ready.eq(1)
        taken = engine.o.valid
        keep = taken if compressing else taken & ~k.skip_descriptor
        self._write(m, k, masked, count, keep)
        with m.If(taken):
            m.d.sync += k.skip_descriptor.eq(0)
        last = k.got_last | (taken & engine.o.payload.last)
        end = Const(1) if compressing else k.got_end | engine.message_end
        with m.If(taken & engine.o.payload.last):
            m.d.sync += k.got_last.eq(1)
        if not compressing:
            with m.If(engine.message_end):
                m.d.sync += k.got_end.eq(1)
            with m.If(engine.message_bad):
                m.d.sync += k.bad.eq(1)
        with m.If(last & end):
            m.d.sync += k.state.eq(_Stage2.PAD)

    def _frame_done(self, m, k):
        """END: the frame's entry for the sender (unless the engine found its message
        bad: then it is dropped from B), the record taken, the counters."""
        record, rewrite = k.record, k.rewrite
        keep = ~rewrite | ~k.bad
        m.d.comb += [k.records.r_en.eq(1),
                     k.leaving.w_data.eq(Cat(k.written, record.flagged)),
                     k.leaving.w_en.eq(keep)]
        m.d.sync += k.state.eq(_Stage2.IDLE)
        m.d.comb += k.drop_now.eq(~keep)
        with m.If(keep):
            m.d.sync += k.write_at.eq(k.write_at + k.written)
        with m.If(record.flagged):
            m.d.sync += self.flagged.eq(self.flagged + 1)
        with m.Elif(~rewrite):
            m.d.sync += self.passed.eq(self.passed + 1)
        with m.Elif(keep):
            m.d.sync += self.changed.eq(self.changed + 1)

    def _patch(self, m, masked, written, record):
        """A rewritten frame's header beat (``masked``, at byte ``written`` of the frame)
        with the new IPv4 total length and checksum, UDP length and a zero UDP checksum.
        The UDP fields' place depends on IHL: one subtraction a beat (``to_udp``) and a
        small comparison a byte find them."""
        inner = len(masked) // 8
        udp_length = Signal(16)
        m.d.comb += udp_length.eq(record.total - 4 * record.ihl)
        to_udp = Signal(signed(len(written) + 1))        # from this beat to the UDP length
        m.d.comb += to_udp.eq(ETH_HEADER + 4 * record.ihl + 4 - written)
        fixed = [(16, record.total[8:]), (17, record.total[:8]),
                 (24, record.checksum[8:]), (25, record.checksum[:8])]
        relative = [udp_length[8:], udp_length[:8], Const(0, 8), Const(0, 8)]
        out = []
        for j in range(inner):
            byte = masked[8 * j:8 * j + 8]
            for offset, value in fixed:
                if offset >= j:
                    byte = Mux(written == offset - j, value, byte)
            for c, value in enumerate(relative):
                byte = Mux(to_udp == j - c, value, byte)
            out.append(byte)
        return Cat(out)

    # -- stage 3: send from buffer B -------------------------------------------------------

    def _send(self, m, leaving, reader):
        width, inner = self._width, max(4, self._width)
        length_bits = len(leaving.r_data) - 1
        m.d.comb += [reader.start.eq(reader.position),
                     reader.length.eq(leaving.r_data[:length_bits]),
                     reader.user.eq(leaving.r_data[length_bits])]
        with m.If(leaving.r_rdy & reader.idle):
            m.d.comb += [reader.go.eq(1), leaving.r_en.eq(1)]
        # Each beat of the buffer's width leaves as beats of ours.
        m.submodules.narrower = narrower = Narrower(inner, width)
        wiring.connect(m, reader.o, narrower.i)
        wiring.connect(m, narrower.o, wiring.flipped(self.o))
