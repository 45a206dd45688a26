"""The host link's answers, proved at the byte level (``codnn.hw.soc.link_frames``): any
bytes get an answer or are dropped within a bound, every frame sent is whole, and a
frame is taken exactly when its CRC and length are right."""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, Signal, Value

from codnn.hw.common.crc import crc16_update
from codnn.hw.soc.link_frames import LinkFrames
from codnn.hw.soc.protocol import MAX_PAYLOAD, SYNC, Status

__all__ = ["check_answer_bounds", "link_answers_top"]

#: The statuses the link answers with by itself.
LINK_ERRORS = (Status.BAD_CRC, Status.BAD_LENGTH, Status.TRUNCATED)


def check_answer_bounds(timeout, stall, answer):
    """Raise ``ValueError`` unless ``link_answers_top`` takes these: a sink's ``stall``
    of 0 or more, a bound ``answer`` of 1 to ``MAX_PAYLOAD``, and a link ``timeout``
    past it."""
    if stall < 0 or answer < 1:
        raise ValueError(f"The sink's stall must be 0 or more and the answer's bound 1 or "
                         f"more cycles, not {stall} and {answer}")
    if timeout <= answer:
        raise ValueError(f"The link's timeout ({timeout} cycles) must outlast its error "
                         f"answer ({answer} cycles), as HostLink's does")
    if answer > MAX_PAYLOAD:
        # A frame too long is dropped after MAX_PAYLOAD + 3 bytes or more, here a cycle
        # apart at the fastest: the answer must end before (through the UART, both take
        # byte times, so it does).
        raise ValueError(f"The answer's bound must be at most {MAX_PAYLOAD} cycles with "
                         f"bytes a cycle apart, not {answer}")


def link_answers_top(frames, stall, answer):
    """The host link's frames (``LinkFrames``) with any bytes at any cycles on ``rx``; its
    ``tx`` sink ready at least once in every ``stall + 1`` cycles; an executor that
    takes requests, reads the buffer, clears the counters and sends response bytes
    anyhow, but gives a response header only for a request it took and once; a reset
    at any cycle. The properties (``_LinkAnswers``):

    - every frame sent is whole: SYNC, status, length, that many bytes, their CRC; one
      the link sends on its own (no request served) is an error answer with no payload;
    - a frame being received decides (a request, or an error answer) by its
      ``MAX_PAYLOAD + 6``-th byte from the SYNC, and one dropped as too long ends by its
      ``length + 6``-th; while either goes on, the line has been quiet for at most
      ``timeout`` cycles;
    - an error the link finds is answered (the answer's last byte sent) within
      ``answer`` cycles;
    - the line quiet for ``timeout + answer + 2`` cycles with no request on offer or
      being served: the link waits for a SYNC;
    - a frame is offered as a request exactly when the CRC it carries is a ghost CRC-16
      of its bytes, else answered ``BAD_CRC``; one whose length is above
      ``MAX_PAYLOAD`` is dropped with ``BAD_LENGTH``.
    """
    if not isinstance(frames, LinkFrames):
        raise ValueError("The link's answer proof takes the link's frames (LinkFrames)")
    check_answer_bounds(frames.timeout, stall, answer)
    m = Module()
    m.submodules.dut = frames
    for port in (frames.rx.valid, frames.rx.payload, frames.tx.ready, frames.request.ready,
                 frames.buffer_addr, frames.response.valid, frames.response.payload,
                 frames.response_data.valid, frames.response_data.payload, frames.clear):
        m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
    m.submodules.answers = _LinkAnswers(frames, stall, answer)
    return m


def _link_error(status):
    """High while ``status`` is one the link answers with by itself."""
    return sum(status == code for code in LINK_ERRORS) == 1


def _parsing(rcv):
    """High while the link's receiver (its state flags) is inside a frame it parses."""
    return rcv.CODE | rcv.LEN0 | rcv.LEN1 | rcv.PAYLOAD | rcv.CRC0 | rcv.CRC1


class _LinkAnswers(Elaboratable):
    """``link_answers_top``'s environment rules, ghosts and properties, built once the
    link's frames have been elaborated for the formal platform (``formal_state``)."""

    def __init__(self, frames, stall, answer):
        self.frames, self.stall, self.answer = frames, stall, answer
        self.quiet_limit = frames.timeout + answer + 2      # quiet cycles that end all

    def elaborate(self, platform):
        m, f = Module(), self.frames
        k, timeout = f.formal_state, f.timeout
        rcv, snd = k.receiver, k.sender
        # The sink: ready at least once in every stall + 1 cycles.
        stalled = Signal(range(self.stall + 1), name="ghost_stalled")
        m.d.sync += stalled.eq(Mux(f.tx.ready, 0, stalled + 1))
        m.d.comb += Assume(f.tx.ready | (stalled < self.stall))
        m.d.comb += Assert(stalled <= self.stall)
        # The executor: a response header only for a request taken, once.
        serving, answered = Signal(name="ghost_serving"), Signal(name="ghost_answered")
        with m.If(f.request.valid & f.request.ready):
            m.d.sync += serving.eq(1)
        with m.If(f.response.valid & f.response.ready):
            m.d.sync += answered.eq(1)
        m.d.comb += Assume(~f.response.valid | (serving & ~answered))
        ended, at = self._frames_sent(m, f, k, serving)
        with m.If(ended & serving):
            m.d.sync += [serving.eq(0), answered.eq(0)]
        owed, age = self._errors_answered(m, k, ended, serving, at, stalled)
        since = self._frames_received(m, f, k)
        self._decisions(m, f, k)
        # The line quiet long enough, nothing requested: the link hunts for a SYNC.
        m.d.comb += Assert(~((since == self.quiet_limit) & ~serving & ~f.request.valid)
                           | rcv.HUNT)
        # The invariants that tie the ghosts to the link: a request served, an error owed
        # or nothing; a frame too long is still dropped while its error is answered.
        owing = owed | k.error_pending
        free = rcv.HUNT | _parsing(rcv)
        m.d.comb += [*(Assert(sum(vars(fsm).values()) == 1) for fsm in (rcv, snd)),
                     Assert(~serving | rcv.RESPOND & ~owing), Assert(~answered | serving),
                     Assert(~(serving & ~answered) | snd.IDLE),
                     Assert(~(~serving & ~owed) | snd.IDLE),
                     Assert(~owing | rcv.RESPOND | rcv.DISCARD),
                     Assert(~rcv.RESPOND | serving | owing),
                     Assert(~k.error_pending | ~owed & _link_error(k.error_status)),
                     Assert(~(free | rcv.REQUEST) | ~serving & ~owing),
                     Assert(~rcv.REQUEST | f.request.valid),
                     Assert(~k.error_pending | (since <= timeout + 1)),
                     Assert(~owed | (since <= timeout + 2 + age)),
                     Assert(~(owed & rcv.DISCARD) | (k.index <= age + 1) & (since <= age + 1))]
        return m

    def _decisions(self, m, f, k):
        """Which frames the link takes: a ghost CRC-16 of the frame being received (its
        command, length and payload bytes) and its received CRC; a frame whose length
        byte makes it longer than ``MAX_PAYLOAD`` is dropped with ``BAD_LENGTH``, and
        one whose last CRC byte arrives is offered as a request exactly when the CRC it
        carries is the ghost's, else answered with ``BAD_CRC``."""
        rcv, byte, got = k.receiver, f.rx.payload, f.rx.valid
        crc = Signal(16, name="ghost_in_crc")
        first = Signal(8, name="ghost_in_crc0")         # the CRC's first byte received
        with m.If(rcv.HUNT & got & (byte == SYNC)):
            m.d.sync += crc.eq(0xFFFF)
        with m.Elif(got & (rcv.CODE | rcv.LEN0 | rcv.LEN1 | rcv.PAYLOAD)):
            m.d.sync += crc.eq(crc16_update(crc, byte))
        with m.If(got & rcv.CRC0):
            m.d.sync += first.eq(byte)
        # The ghosts are the link's registers while a frame is parsed (the invariant).
        m.d.comb += [Assert(~(rcv.CODE | rcv.LEN0 | rcv.LEN1 | rcv.PAYLOAD | rcv.CRC0
                              | rcv.CRC1) | (k.crc == crc)),
                     Assert(~rcv.CRC1 | (k.received_crc == first))]
        # The decisions, checked the cycle after the byte that makes them.
        length = byte << 8 | f.request.payload.length[:8]
        crc_byte = Signal(name="ghost_crc_decided")
        crc_good = Signal(name="ghost_crc_good")
        length_byte = Signal(name="ghost_length_decided")
        too_long = Signal(name="ghost_too_long")
        m.d.sync += [crc_byte.eq(got & rcv.CRC1), crc_good.eq((byte << 8 | first) == crc),
                     length_byte.eq(got & rcv.LEN1), too_long.eq(length > MAX_PAYLOAD)]
        with m.If(crc_byte):
            m.d.comb += [Assert(rcv.REQUEST == crc_good),
                         Assert(crc_good | k.error_pending
                                & (k.error_status == Status.BAD_CRC))]
        with m.If(length_byte):
            m.d.comb += [Assert(rcv.DISCARD == too_long),
                         Assert(~too_long | k.error_pending
                                & (k.error_status == Status.BAD_LENGTH))]

    def _frames_sent(self, m, f, k, serving):
        """A parser of the frames on ``tx``: each must be whole; one sent while no request
        is served must be an error answer with no payload. Returns ``ended``, high as a
        frame's last byte is taken, and ``at``, the parser's position in the frame."""
        o, snd = f.tx, k.sender
        taken, byte = o.valid & o.ready, o.payload
        at = Signal(range(7), name="ghost_out_at")    # SYNC, status, length 0, 1, data, CRC
        crc = Signal(16, name="ghost_out_crc")
        length = Signal(16, name="ghost_out_length")
        left = Signal(16, name="ghost_out_left")
        ended = Signal(name="ghost_out_ended")
        m.d.comb += ended.eq(taken & (at == 6))
        with m.If(taken):
            with m.Switch(at):
                with m.Case(0):
                    m.d.comb += Assert(byte == SYNC)
                    m.d.sync += [crc.eq(0xFFFF), at.eq(1)]
                with m.Case(1):
                    with m.If(~serving):
                        m.d.comb += Assert(_link_error(byte))
                    m.d.sync += at.eq(2)
                with m.Case(2):
                    m.d.sync += [length[:8].eq(byte), at.eq(3)]
                with m.Case(3):
                    whole = byte << 8 | length[:8]
                    m.d.comb += Assert(serving | (whole == 0))
                    m.d.sync += [length[8:].eq(byte), left.eq(whole),
                                 at.eq(Mux(whole == 0, 5, 4))]
                with m.Case(4):
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.d.sync += at.eq(5)
                with m.Case(5):
                    m.d.comb += Assert(byte == crc[:8])
                    m.d.sync += at.eq(6)
                with m.Case(6):
                    m.d.comb += Assert(byte == crc[8:])
                    m.d.sync += at.eq(0)
            with m.If((at != 0) & (at < 5)):
                m.d.sync += crc.eq(crc16_update(crc, byte))
        # The sender's state is the parser's.
        m.d.comb += [
            Assert((snd.IDLE | snd.SYNC) == (at == 0)), Assert(snd.CODE == (at == 1)),
            Assert(snd.LEN0 == (at == 2)), Assert(snd.LEN1 == (at == 3)),
            Assert(snd.DATA == (at == 4)), Assert(snd.CRC0 == (at == 5)),
            Assert(snd.CRC1 == (at == 6)),
            Assert((at == 0) | (crc == k.out_crc)),
            Assert((at < 3) | (length[:8] == k.out_length[:8])),
            Assert((at < 4) | (length == k.out_length)),
            Assert((at == 0) | (at >= 4) | (k.left == k.out_length)),
            Assert((at != 4) | (left == k.left) & (left != 0)),
        ]
        return ended, at

    def _errors_answered(self, m, k, ended, serving, at, stalled):
        """An error the link finds (``error_pending``) is owed until its answer ends, at
        most ``answer`` cycles later (the invariant: the bytes of the answer still to
        send, ``at`` on, fit the time left). Returns ``owed`` and its age (cycles since
        the one after ``error_pending``)."""
        owed = Signal(name="ghost_owed")
        age = Signal(range(self.answer + 1), name="ghost_owed_age")
        with m.If(k.error_pending):
            m.d.sync += [owed.eq(1), age.eq(0)]
        with m.Elif(ended & ~serving):
            m.d.sync += owed.eq(0)
            m.d.comb += Cover(age == self.answer - 1)
        with m.Elif(owed):
            m.d.sync += age.eq(age + 1)
            m.d.comb += Assert(age < self.answer - 1)
        m.d.comb += Assert(age <= self.answer)
        after = Mux(at <= 3, 5 - at, 6 - at)         # answer bytes after the one at ``at``
        m.d.comb += [Assert(~owed | ~k.sender.IDLE & (at != 4) & (k.out_length == 0)
                            & _link_error(k.out_status)),
                     Assert(~owed | (age + 1 + self.stall + after * (self.stall + 1)
                                     <= self.answer + stalled))]
        return owed, age

    def _frames_received(self, m, f, k):
        """The bytes of the frame being received, from its SYNC, and the cycles since the
        last byte: bounded while a frame is received or dropped. Returns those cycles
        (``since``, saturating at ``timeout + answer + 2``)."""
        rcv, timeout = k.receiver, f.timeout
        got = f.rx.valid
        limit = self.quiet_limit
        since = Signal(range(limit + 1), name="ghost_since_byte")
        with m.If(got):
            m.d.sync += since.eq(0)
        with m.Elif(since != limit):
            m.d.sync += since.eq(since + 1)
        m.d.comb += Assert(since <= limit)
        count = Signal(17, name="ghost_frame_bytes")     # from the SYNC, the SYNC included
        with m.If(rcv.HUNT):
            m.d.sync += count.eq(1)
        with m.Elif(got & (count != (1 << 17) - 1)):
            m.d.sync += count.eq(count + 1)
        length = f.request.payload.length
        parsing = _parsing(rcv)
        m.d.comb += [
            Assert(~(parsing | rcv.DISCARD) | (since <= timeout)),
            Assert(~parsing | (count <= MAX_PAYLOAD + 5)),
            Assert(~rcv.DISCARD | (count <= length + 5)),
            # The invariants: the link's quiet count, and the bytes in each state.
            Assert(k.quiet == Mux(since > timeout, timeout, since)),
            Assert(~rcv.CODE | (count == 1)), Assert(~rcv.LEN0 | (count == 2)),
            Assert(~rcv.LEN1 | (count == 3)),
            Assert(~rcv.PAYLOAD | (count == 4 + k.index) & (k.index < length)
                   & (length <= MAX_PAYLOAD)),
            Assert(~rcv.CRC0 | (count == 4 + length) & (length <= MAX_PAYLOAD)),
            Assert(~rcv.CRC1 | (count == 5 + length) & (length <= MAX_PAYLOAD)),
            Assert(~rcv.DISCARD | (count == 4 + k.index) & (k.index < length + 2)
                   & (length > MAX_PAYLOAD)),
        ]
        return since
