"""Frame path: the packet rule (docs/semantics.md section 4) on a stream of Ethernet frames,
store and forward, with the INCEPTIONN-style engines rewriting gradient frames."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS
from codnn.golden.packets import DEFAULT_MAX_FRAME, DIRECTIONS, GRADIENT_TOS, MIN_FRAME
from codnn.hw.nic.axis import axis_ports
from codnn.hw.nic.compressor import InceptionnCompressor, clamp_bound_bits
from codnn.hw.nic.decompressor import InceptionnDecompressor
from codnn.hw.nic.frame_buffer import FrameBuffer, RangeReader
from codnn.hw.nic.layouts import beat_bytes, beat_layout

__all__ = ["FRAME_WIDTHS", "FramePath"]

#: Bytes per beat the frame path takes and gives (8 bits for 1 GbE, 64 for 10 GbE).
FRAME_WIDTHS = (1, 2, 4, 8, 16)
#: Frames between the stages' buffers and their queues of frame records.
_QUEUE = 16
_ETH_HEADER = 14
_UDP_HEADER = 8


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


def _record_layout(max_frame):
    """What the parser learns of a frame, for the rewriting stage."""
    length = range(max_frame + 1)
    return data.StructLayout({
        "length": length,             # bytes in
        "action": _Action, "flagged": 1,
        "ihl": 4, "payload": length,  # UDP payload bytes (the values or the message)
        "total": 16, "checksum": 16,  # the rewritten IPv4 total length and its checksum
        "out_length": length,         # bytes out (a rewritten frame's before a drop)
        "bound_bits": 4,
    })


class FramePath(wiring.Component):
    """Ethernet frames (no FCS) in on ``s_axis``, out on ``m_axis``, ``width`` bytes per
    beat; ``tuser`` on a frame's last beat flags it bad (the MAC's bad FCS). In the
    ``"compress"`` direction gradient frames leave compressed, in ``"decompress"``
    restored; every case is ``golden.packets.frame_path``'s, byte for byte.

    Three stages, each with its own buffer: the parser writes a frame into buffer A while
    it reads the header fields, the checksum's sum and (compressing) the compressed size
    from each value's exponent; after the frame's last beat it decides (drop, pass,
    rewrite) and queues a record. The rewriter copies the frame into buffer B, a rewritten
    frame's header with its new lengths and checksum, then its payload through the engine
    (``InceptionnCompressor`` or ``InceptionnDecompressor`` of ``max(4, width) / 4``
    lanes), then pads it to 60 bytes; a message the decompressor finds bad is dropped from
    B. The sender streams B's frames out. Each buffer holds ``2 * max_frame`` bytes
    rounded up to a power of two; a frame longer than ``max_frame`` is taken to its
    ``tlast`` and dropped, and only a frame being written waits for room (``s_axis_tready``
    low), so nothing is lost to a full buffer and no frame corrupts another.

    Settings: ``bound_bits`` is sampled with a frame's first beat (clamped to 7..15).
    Counters (wrapping): ``passed``, ``changed``, ``dropped``, ``flagged``, as golden's.

    Latency: a frame starts leaving after all of it is in, the parse's decision and the
    rewriting stage's copy (a few cycles for a passed frame; the engine's latency more for a
    rewritten one). Throughput: the three stages overlap over frames; each moves a beat of
    ``max(4, width)`` bytes per cycle, with a few cycles per frame more in each stage.

    Parameters
    ----------
    direction : str
        ``"compress"`` or ``"decompress"``.
    width : int
        Bytes per beat: 1, 2, 4, 8 or 16.
    max_frame : int
        The largest frame in or out, in bytes without FCS (64..16384).
    """

    def __init__(self, *, direction="compress", width=8, max_frame=DEFAULT_MAX_FRAME):
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
        members = axis_ports(width)
        members.update({"s_axis_tuser": In(1), "m_axis_tuser": Out(1),
                        "bound_bits": In(4, init=DEFAULT_BOUND_BITS),
                        "passed": Out(32), "changed": Out(32), "dropped": Out(32),
                        "flagged": Out(32)})
        super().__init__(members)

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
        return 1 << ceil_log2(2 * self._max_frame)

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
        dropped_parse, dropped_rewrite = Signal(), Signal()
        m.d.sync += self.dropped.eq(self.dropped + dropped_parse + dropped_rewrite)
        self._parse(m, buffer_a, records, reader_a.position, dropped_parse)
        self._rewrite(m, records, reader_a, buffer_b, leaving, reader_b.position,
                      dropped_rewrite)
        self._send(m, leaving, reader_b)
        return m

    # -- stage 1: parse into buffer A ------------------------------------------------------

    def _parse(self, m, buffer, records, released, dropped):
        width, max_frame = self._width, self._max_frame
        pointer = len(released)
        size = buffer.size
        beat = Signal(beat_layout(width))
        m.d.comb += [beat.data.eq(self.s_axis_tdata), beat.keep.eq(self.s_axis_tkeep),
                     beat.last.eq(self.s_axis_tlast)]
        count, masked = beat_bytes(m, beat)

        start = Signal(pointer)                 # the frame's first byte in buffer A
        position = Signal(range(max_frame + 1))  # its bytes so far
        giant, flagged, decide = Signal(), Signal(), Signal()
        used = Signal(pointer)
        m.d.comb += used.eq(start - released)
        room = Signal()
        m.d.comb += room.eq(used + position + width <= size)
        ready = Signal()
        m.d.comb += [ready.eq(~decide & records.w_rdy & (giant | room)),
                     self.s_axis_tready.eq(ready)]
        take = Signal()
        m.d.comb += take.eq(self.s_axis_tvalid & ready)
        over = Signal()
        m.d.comb += over.eq(giant | (position + count > max_frame))
        m.d.comb += [buffer.w_addr.eq(start + position), buffer.w_data.eq(masked),
                     buffer.w_en.eq(Mux(take & ~over,
                                        Cat(Const(i) < count for i in range(width)), 0))]
        with m.If(take):
            m.d.sync += giant.eq(over)
            with m.If(~over):
                m.d.sync += position.eq(position + count)
            with m.If(self.s_axis_tlast):
                m.d.sync += [decide.eq(1), flagged.eq(self.s_axis_tuser)]

        # Header fields, captured as their bytes go by.
        def byte_at(offset):
            """(taken now, value) of the frame's byte ``offset`` (an int or a Value)."""
            low = exact_log2(width)
            aligned = offset & ~(width - 1) if isinstance(offset, int) \
                else Cat(Const(0, low), offset[low:])
            hit = take & (position == aligned)
            value = masked.word_select(offset % width if isinstance(offset, int)
                                       else offset[:low], 8) if width > 1 else masked
            return hit, value

        def capture(register, offsets):
            for k, offset in enumerate(offsets):        # big-endian: the first is high
                hit, value = byte_at(offset)
                shift = 8 * (len(offsets) - 1 - k)
                with m.If(hit):
                    m.d.sync += register[shift:shift + 8].eq(value)

        ethertype, version_ihl, tos, total = Signal(16), Signal(8), Signal(8), Signal(16)
        fragment, protocol, udp_length = Signal(16), Signal(8), Signal(16)
        count_field = Signal(32)                # decompress: the message's value count
        capture(ethertype, [12, 13])
        capture(version_ihl, [14])
        capture(tos, [15])
        capture(total, [16, 17])
        capture(fragment, [20, 21])
        capture(protocol, [23])
        ihl = version_ihl[:4]
        udp = Signal(range(_ETH_HEADER + 61))
        payload_at = Signal(range(_ETH_HEADER + 69))
        m.d.comb += [udp.eq(_ETH_HEADER + 4 * ihl), payload_at.eq(udp + _UDP_HEADER)]
        capture(udp_length, [udp + 4, udp + 5])
        capture(count_field, [payload_at + 3, payload_at + 2, payload_at + 1, payload_at])

        # The header's checksum sum without its total length and checksum fields, and
        # (compressing) the compressed payload's size from each value's exponent.
        sampled = Signal(4, init=DEFAULT_BOUND_BITS)
        bound_bits, _ = clamp_bound_bits(m, sampled)
        with m.If(take & (position == 0)):
            m.d.sync += sampled.eq(self.bound_bits)
        header_sum, sizes = Signal(24), Signal(range(4 * max_frame + 1))
        previous = Signal(8)                    # the byte before this beat's first
        terms, size_terms = [], []
        for j in range(width):
            offset = position + j
            byte = masked[8 * j:8 * j + 8]
            in_frame = Const(j) < count
            in_header = (offset >= _ETH_HEADER) & ((offset < 34) | (offset < udp)) \
                & (offset != 16) & (offset != 17) & (offset != 24) & (offset != 25)
            terms.append(Mux(in_frame & in_header,
                             Mux(offset[0], byte, Cat(Const(0, 8), byte)), 0))
            if self._direction == "compress":
                before = masked[8 * j - 8:8 * j] if j else previous
                exponent = Cat(before[7], byte[:7])
                in_payload = (offset >= payload_at + 3) & (offset < _ETH_HEADER + total) \
                    & (offset[:2] == 1)
                size = Mux(exponent >= 127, 4,
                           Mux(exponent < 127 - bound_bits, 0,
                               Mux(exponent < 134 - bound_bits, 1, 2)))
                size_terms.append(Mux(in_frame & in_payload, size, 0))
        with m.If(take):
            m.d.sync += [header_sum.eq(header_sum + sum(terms)),
                         previous.eq(masked[-8:])]
            if size_terms:
                m.d.sync += sizes.eq(sizes + sum(size_terms))

        # The decision, the cycle after the last beat.
        payload = Signal(17)
        m.d.comb += payload.eq(total - 4 * ihl - _UDP_HEADER)
        consistent = ((position >= _ETH_HEADER + 28) & (ethertype == 0x0800)
                      & (version_ihl[4:] == 4) & (ihl >= 5) & (tos == GRADIENT_TOS)
                      & (protocol == 17) & (fragment[:14] == 0)
                      & (total >= 4 * ihl + _UDP_HEADER) & (_ETH_HEADER + total <= position)
                      & (udp_length == total - 4 * ihl))
        body = Signal(range(max(1 << 36, 8 * max_frame)))
        if self._direction == "compress":
            values = payload[2:]
            m.d.comb += body.eq(payload_at + 4 + 2 * ((values + 7) >> 3) + sizes)
            usable = consistent & (payload[:2] == 0)
        else:
            m.d.comb += body.eq(payload_at + 4 * count_field)
            usable = consistent & (payload >= 4)
        out_length = Signal(range(max(1 << 36, 8 * max_frame)))
        m.d.comb += out_length.eq(Mux(body < MIN_FRAME, MIN_FRAME, body))
        new_total = Signal(16)
        m.d.comb += new_total.eq(body - _ETH_HEADER)
        folded = Signal(17)
        m.d.comb += folded.eq(header_sum[:16] + header_sum[16:] + new_total)
        checksum = Signal(16)
        m.d.comb += checksum.eq(~(folded[:16] + folded[16]))

        record = Signal(_record_layout(max_frame))
        action = Signal(_Action)
        fits = out_length <= max_frame
        # Compressing, a frame that cannot be rewritten passes; decompressing, a frame
        # with ToS 0x28 and consistent lengths that cannot be restored is dropped.
        refused = _Action.PASS if self._direction == "compress" else _Action.DROP
        with m.If((position == 0) | giant):
            m.d.comb += action.eq(_Action.DROP)
        with m.Elif(flagged | ~consistent):
            m.d.comb += action.eq(_Action.PASS)
        with m.Else():
            m.d.comb += action.eq(Mux(usable & fits, _Action.REWRITE, refused))
        m.d.comb += [record.length.eq(position), record.action.eq(action),
                     record.flagged.eq(flagged), record.ihl.eq(ihl),
                     record.payload.eq(payload), record.total.eq(new_total),
                     record.checksum.eq(checksum),
                     record.out_length.eq(Mux(action == _Action.REWRITE, out_length,
                                              position)),
                     record.bound_bits.eq(bound_bits),
                     records.w_data.eq(record),
                     records.w_en.eq(decide & (action != _Action.DROP)),
                     dropped.eq(decide & (action == _Action.DROP))]
        with m.If(decide):
            m.d.sync += [decide.eq(0), position.eq(0), giant.eq(0), header_sum.eq(0),
                         sizes.eq(0)]
            with m.If(action != _Action.DROP):
                m.d.sync += start.eq(start + position)

    # -- stage 2: rewrite into buffer B ----------------------------------------------------

    def _rewrite(self, m, records, reader, buffer, leaving, released, dropped):
        inner, max_frame = buffer.width, self._max_frame
        lanes = inner // 4
        compressing = self._direction == "compress"
        engine = (InceptionnCompressor if compressing else InceptionnDecompressor)(
            lanes=lanes, max_values=max_frame // 4)
        m.submodules.engine = engine
        record = Signal(_record_layout(max_frame))
        m.d.comb += [record.eq(records.r_data), engine.bound_bits.eq(record.bound_bits)]
        rewrite = record.action == _Action.REWRITE
        header = Signal(range(_ETH_HEADER + 69))
        m.d.comb += header.eq(_ETH_HEADER + 4 * record.ihl + _UDP_HEADER)

        state = Signal(_Stage2)
        read_at = Signal(len(released))          # the frame's first byte in buffer A
        write_at = Signal(len(released))         # and in buffer B
        written = Signal(range(max_frame + 1))
        used = Signal.like(released)            # bytes B holds (modulo the pointers)
        room = Signal()
        m.d.comb += [used.eq(write_at - released),
                     room.eq(used + record.out_length <= buffer.size)]
        m.d.comb += buffer.w_addr.eq(write_at + written)

        descriptor_sent, skip_descriptor = Signal(), Signal()
        got_last, got_end, bad = Signal(), Signal(), Signal()

        def write(beat_data, nbytes, enable):
            m.d.comb += [buffer.w_data.eq(beat_data),
                         buffer.w_en.eq(Mux(enable, Cat(Const(i) < nbytes
                                                        for i in range(inner)), 0))]
            with m.If(enable):
                m.d.sync += written.eq(written + nbytes)

        with m.Switch(state):
            with m.Case(_Stage2.IDLE):
                m.d.comb += [reader.start.eq(read_at),
                             reader.length.eq(Mux(rewrite, header, record.length)),
                             reader.user.eq(record.flagged)]
                with m.If(records.r_rdy & room & leaving.w_rdy & reader.idle):
                    m.d.comb += reader.go.eq(1)
                    m.d.sync += [state.eq(_Stage2.HEAD), written.eq(0),
                                 descriptor_sent.eq(0), skip_descriptor.eq(1),
                                 got_last.eq(0), got_end.eq(0), bad.eq(0)]
            with m.Case(_Stage2.HEAD):
                count, masked = beat_bytes(m, reader.o.payload)
                patched = self._patch(m, masked, written, record)
                m.d.comb += reader.o.ready.eq(1)
                taken = reader.o.valid
                write(Mux(rewrite, patched, masked), count, taken)
                m.d.comb += [reader.start.eq(read_at + header),
                             reader.length.eq(record.payload)]
                with m.If(taken & reader.o.payload.last):
                    with m.If(rewrite):
                        m.d.comb += reader.go.eq(1)
                        m.d.sync += state.eq(_Stage2.BODY)
                    with m.Else():
                        m.d.sync += state.eq(_Stage2.END)
            with m.Case(_Stage2.BODY):
                # Into the engine: (compressing) a descriptor beat with the value count,
                # then the payload.
                if compressing:
                    values = record.payload[2:]
                    with m.If(~descriptor_sent):
                        m.d.comb += [engine.i.payload.data.eq(values),
                                     engine.i.payload.keep.eq(-1),
                                     engine.i.payload.last.eq(values == 0),
                                     engine.i.valid.eq(1)]
                        with m.If(engine.i.ready):
                            m.d.sync += descriptor_sent.eq(1)
                    feeding = descriptor_sent
                else:
                    feeding = Const(1)
                with m.If(feeding):
                    m.d.comb += [engine.i.payload.data.eq(reader.o.payload.data),
                                 engine.i.payload.keep.eq(reader.o.payload.keep),
                                 engine.i.payload.last.eq(reader.o.payload.last),
                                 engine.i.valid.eq(reader.o.valid),
                                 reader.o.ready.eq(engine.i.ready)]
                # Out of the engine (decompressing: but its descriptor beat) into B.
                count, masked = beat_bytes(m, engine.o.payload)
                m.d.comb += engine.o.ready.eq(1)
                taken = engine.o.valid
                keep = taken if compressing else taken & ~skip_descriptor
                write(masked, count, keep)
                with m.If(taken):
                    m.d.sync += skip_descriptor.eq(0)
                last = got_last | (taken & engine.o.payload.last)
                end = Const(1) if compressing else got_end | engine.message_end
                with m.If(taken & engine.o.payload.last):
                    m.d.sync += got_last.eq(1)
                if not compressing:
                    with m.If(engine.message_end):
                        m.d.sync += got_end.eq(1)
                    with m.If(engine.message_bad):
                        m.d.sync += bad.eq(1)
                with m.If(last & end):
                    m.d.sync += state.eq(_Stage2.PAD)
            with m.Case(_Stage2.PAD):
                short = written < MIN_FRAME
                gap = MIN_FRAME - written
                write(0, Mux(gap < inner, gap, inner), short)
                with m.If(~short):
                    m.d.sync += state.eq(_Stage2.END)
            with m.Case(_Stage2.END):
                keep = ~rewrite | ~bad
                m.d.comb += [records.r_en.eq(1), leaving.w_data.eq(Cat(written, record.flagged)),
                             leaving.w_en.eq(keep), dropped.eq(~keep)]
                m.d.sync += [state.eq(_Stage2.IDLE), read_at.eq(read_at + record.length)]
                with m.If(keep):
                    m.d.sync += write_at.eq(write_at + written)
                with m.If(record.flagged):
                    m.d.sync += self.flagged.eq(self.flagged + 1)
                with m.Elif(~rewrite):
                    m.d.sync += self.passed.eq(self.passed + 1)
                with m.Elif(keep):
                    m.d.sync += self.changed.eq(self.changed + 1)

    def _patch(self, m, masked, written, record):
        """A rewritten frame's header beat (``masked``, at byte ``written`` of the frame)
        with the new IPv4 total length and checksum, UDP length and a zero UDP checksum."""
        inner = len(masked) // 8
        udp = _ETH_HEADER + 4 * record.ihl
        udp_length = Signal(16)
        m.d.comb += udp_length.eq(record.total - 4 * record.ihl)
        patches = [(16, record.total[8:]), (17, record.total[:8]),
                   (24, record.checksum[8:]), (25, record.checksum[:8]),
                   (udp + 4, udp_length[8:]), (udp + 5, udp_length[:8]),
                   (udp + 6, Const(0, 8)), (udp + 7, Const(0, 8))]
        out = []
        for j in range(inner):
            byte = masked[8 * j:8 * j + 8]
            for offset, value in patches:
                byte = Mux(written + j == offset, value, byte)
            out.append(byte)
        return Cat(out)

    # -- stage 3: send from buffer B -------------------------------------------------------

    def _send(self, m, leaving, reader):
        width, inner = self._width, max(4, self._width)
        length_bits = len(leaving.r_data) - 1
        m.d.comb += [reader.start.eq(reader.position), reader.length.eq(leaving.r_data[:length_bits]),
                     reader.user.eq(leaving.r_data[length_bits])]
        with m.If(leaving.r_rdy & reader.idle):
            m.d.comb += [reader.go.eq(1), leaving.r_en.eq(1)]
        beat = reader.o.payload
        if width == inner:
            m.d.comb += [self.m_axis_tdata.eq(beat.data), self.m_axis_tkeep.eq(beat.keep),
                         self.m_axis_tlast.eq(beat.last), self.m_axis_tuser.eq(beat.user & beat.last),
                         self.m_axis_tvalid.eq(reader.o.valid),
                         reader.o.ready.eq(self.m_axis_tready)]
            return
        # Narrower than the buffer: each beat leaves in ``inner / width`` parts.
        parts = inner // width
        part = Signal(range(parts))
        keep = beat.keep.word_select(part, width)
        final = beat.last & ((part == parts - 1)
                             | ~beat.keep.bit_select(part * width + width, 1)
                             if parts > 1 else 1)
        final_part = (part == parts - 1) | final
        m.d.comb += [self.m_axis_tdata.eq(beat.data.word_select(part, 8 * width)),
                     self.m_axis_tkeep.eq(keep), self.m_axis_tlast.eq(final),
                     self.m_axis_tuser.eq(beat.user & final),
                     self.m_axis_tvalid.eq(reader.o.valid),
                     reader.o.ready.eq(self.m_axis_tready & final_part)]
        with m.If(reader.o.valid & self.m_axis_tready):
            m.d.sync += part.eq(Mux(final_part, 0, part + 1))
