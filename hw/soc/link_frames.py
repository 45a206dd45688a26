"""The host link's frames at the byte level: requests parsed from the bytes received,
responses framed into the bytes to send (the UART is ``codnn.hw.soc.link.HostLink``'s)."""

from dataclasses import dataclass

from amaranth.hdl import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.crc import crc16_update
from codnn.hw.common.fsm_flags import state_flags
from codnn.hw.common.params import positive_int

from .protocol import MAX_PAYLOAD, SYNC, Status

__all__ = ["LinkFrames", "REQUEST", "RESPONSE", "executor_ports"]

REQUEST = data.StructLayout({"command": 8, "length": 16})
RESPONSE = data.StructLayout({"status": 8, "length": 16})


@dataclass(slots=True)
class _Frames:
    """What the receiver and the sender share (and the answer proof reads as
    ``formal_state``): an error response owed (its status) and the response's last byte
    sent; the receiver's CRC, payload index, quiet cycles, first CRC byte received and
    states; the sender's CRC, status, length, bytes left and states."""

    error_pending: Signal
    error_status: Signal
    sent: Signal
    crc: Signal = None
    index: Signal = None
    quiet: Signal = None
    received_crc: Signal = None
    receiver: object = None             # state_flags of the receiver's FSM
    out_crc: Signal = None
    out_status: Signal = None
    out_length: Signal = None
    left: Signal = None
    sender: object = None               # state_flags of the sender's FSM


def executor_ports():
    """The link's ports on the executor's side (``LinkFrames``' and ``HostLink``'s), by
    name: a fresh dict for a component's signature."""
    return {"request": Out(stream.Signature(REQUEST)),
            "buffer_addr": In(range(MAX_PAYLOAD)), "buffer_data": Out(8),
            "response": In(stream.Signature(RESPONSE)),
            "response_data": In(stream.Signature(8)),
            "clear": In(1), "frames_ok": Out(16), "frames_bad": Out(16)}


class LinkFrames(wiring.Component):
    """Receive request frames (``codnn.hw.soc.protocol``) from the bytes on ``rx``, send
    response frames as the bytes of ``tx``.

    A frame's payload goes into a ``MAX_PAYLOAD``-byte buffer; only when its CRC matches
    is it offered on ``request``, and the executor reads its payload through
    ``buffer_addr``/``buffer_data`` (one cycle from address to data). The executor then
    answers with one ``response`` header and exactly ``length`` bytes on
    ``response_data``; the link adds SYNC and CRC. The link answers by itself, with an
    empty payload, a bad CRC (``BAD_CRC``), a length above ``MAX_PAYLOAD`` (``BAD_LENGTH``;
    the frame's remaining ``length + 2`` bytes are dropped) and a frame cut short
    (``TRUNCATED``: no byte for ``timeout`` cycles in the middle of a frame). Bytes
    before a SYNC, and bytes that arrive while a request executes or an error is
    answered, are dropped. The link takes the next frame once the response has been
    sent.

    Latency: a byte is parsed in the cycle it arrives; a good frame is offered the cycle
    after its last CRC byte, the link's own error answer begins the cycle after the
    error is found. Throughput: a byte a cycle each way.

    Parameters
    ----------
    timeout : int
        Cycles without a byte that end a frame cut short (and the dropping of a frame too
        long). Longer than the link's error answer takes to leave at ``tx``'s pace, so
        that a frame too long is still being dropped when its answer has gone
        (``HostLink``'s 16 byte times or more are).

    Attributes
    ----------
    rx : In(stream.Signature(8, always_ready=True))
    tx : Out(stream.Signature(8))
    request : Out(stream.Signature(StructLayout({"command": 8, "length": 16})))
    buffer_addr : In(range(MAX_PAYLOAD))
    buffer_data : Out(8)
    response : In(stream.Signature(StructLayout({"status": 8, "length": 16})))
    response_data : In(stream.Signature(8))
    clear : In(1)
        Zero the counters.
    frames_ok, frames_bad : Out(16)
        Requests received with a good CRC; frames answered with an error by the link.

    Elaborated for the ``"formal"`` platform, the link keeps its receiver's and sender's
    states in ``formal_state`` (read by ``codnn.hw.formal.link_answers``).
    """

    def __init__(self, *, timeout):
        positive_int(timeout, "Timeout (cycles)")
        self._timeout = timeout
        super().__init__({
            "rx": In(stream.Signature(8, always_ready=True)),
            "tx": Out(stream.Signature(8)), **executor_ports()})

    timeout = property(lambda self: self._timeout,
                       doc="Cycles without a byte that end a frame cut short.")

    def elaborate(self, platform):
        m = Module()
        # Between the receiver and the sender: an error response the link owes (its
        # status), and the response's last byte sent.
        k = _Frames(error_pending=Signal(name="error_pending"),
                    error_status=Signal(8, name="error_status"), sent=Signal(name="sent"))
        self._receiver(m, k)
        self._sender(m, k)
        if platform == "formal":
            self.formal_state = k       # read by the link's answer proof, elaborated next
        return m

    def _receiver(self, m, k):
        """Request frames from the bytes received: SYNC, command, length, the payload into
        the buffer, the CRC; a good frame offered on ``request``, a bad one answered
        through ``error_pending``; the next frame taken once the response is ``sent``."""
        m.submodules.buffer = buffer = memory.Memory(shape=8, depth=MAX_PAYLOAD, init=[])
        write = buffer.write_port()
        read = buffer.read_port(transparent_for=())
        m.d.comb += [read.addr.eq(self.buffer_addr), self.buffer_data.eq(read.data)]
        byte = self.rx.payload
        got = self.rx.valid
        crc = k.crc = Signal(16, name="crc")
        index = k.index = Signal(17, name="index")  # payload bytes (CRC bytes discarded)
        quiet = k.quiet = Signal(range(self._timeout + 1), name="quiet")
        timed_out = quiet == self._timeout
        received_crc = k.received_crc = Signal(8, name="received_crc")
        with m.If(got):
            m.d.sync += [quiet.eq(0), crc.eq(crc16_update(crc, byte))]
        with m.Elif(~timed_out):
            m.d.sync += quiet.eq(quiet + 1)

        def fail(status, then):
            m.d.sync += [k.error_pending.eq(1), k.error_status.eq(status),
                         self.frames_bad.eq(self.frames_bad + 1)]
            m.next = then

        with m.FSM() as fsm:
            with m.State("HUNT"):
                with m.If(got & (byte == SYNC)):
                    m.d.sync += crc.eq(0xFFFF)
                    m.next = "CODE"
            with m.State("CODE"):
                with m.If(got):
                    m.d.sync += self.request.payload.command.eq(byte)
                    m.next = "LEN0"
                with m.Elif(timed_out):
                    fail(Status.TRUNCATED, "RESPOND")
            with m.State("LEN0"):
                with m.If(got):
                    m.d.sync += self.request.payload.length[:8].eq(byte)
                    m.next = "LEN1"
                with m.Elif(timed_out):
                    fail(Status.TRUNCATED, "RESPOND")
            with m.State("LEN1"):
                length = byte << 8 | self.request.payload.length[:8]
                with m.If(got):
                    m.d.sync += [self.request.payload.length[8:].eq(byte), index.eq(0)]
                    with m.If(length > MAX_PAYLOAD):
                        fail(Status.BAD_LENGTH, "DISCARD")
                    with m.Elif(length == 0):
                        m.next = "CRC0"
                    with m.Else():
                        m.next = "PAYLOAD"
                with m.Elif(timed_out):
                    fail(Status.TRUNCATED, "RESPOND")
            with m.State("PAYLOAD"):
                m.d.comb += [write.addr.eq(index), write.data.eq(byte), write.en.eq(got)]
                with m.If(got):
                    m.d.sync += index.eq(index + 1)
                    with m.If(index + 1 == self.request.payload.length):
                        m.next = "CRC0"
                with m.Elif(timed_out):
                    fail(Status.TRUNCATED, "RESPOND")
            with m.State("CRC0"):
                with m.If(got):
                    m.d.sync += [received_crc.eq(byte), crc.eq(crc)]     # hold the CRC
                    m.next = "CRC1"
                with m.Elif(timed_out):
                    fail(Status.TRUNCATED, "RESPOND")
            with m.State("CRC1"):
                with m.If(got):
                    m.d.sync += crc.eq(crc)
                    with m.If((byte << 8 | received_crc) == crc):
                        m.d.sync += self.frames_ok.eq(self.frames_ok + 1)
                        m.next = "REQUEST"
                    with m.Else():
                        fail(Status.BAD_CRC, "RESPOND")
                with m.Elif(timed_out):
                    fail(Status.TRUNCATED, "RESPOND")
            with m.State("REQUEST"):
                m.d.comb += self.request.valid.eq(1)
                with m.If(self.request.ready):
                    m.next = "RESPOND"
            with m.State("RESPOND"):
                with m.If(k.sent):
                    m.next = "HUNT"
            with m.State("DISCARD"):
                with m.If(got):
                    m.d.sync += index.eq(index + 1)
                    with m.If(index + 1 == self.request.payload.length + 2):
                        m.next = "HUNT"
                with m.Elif(timed_out):
                    m.next = "HUNT"
            k.receiver = state_flags(fsm)
        with m.If(self.clear):
            m.d.sync += [self.frames_ok.eq(0), self.frames_bad.eq(0)]

    def _sender(self, m, k):
        """Response frames as bytes to send: SYNC, the status and length (the executor's, or
        the link's own error), the executor's bytes, the CRC; ``sent`` on the last."""
        out_crc = k.out_crc = Signal(16, name="out_crc")
        status = k.out_status = Signal(8, name="out_status")
        length = k.out_length = Signal(16, name="out_length")
        left = k.left = Signal(16, name="left")
        out = self.tx
        taken = out.valid & out.ready

        def send(value, then, checked=True):
            m.d.comb += [out.payload.eq(value), out.valid.eq(1)]
            with m.If(out.ready):
                if checked:
                    m.d.sync += out_crc.eq(crc16_update(out_crc, value))
                m.next = then

        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(k.error_pending):
                    m.d.sync += [k.error_pending.eq(0), status.eq(k.error_status),
                                 length.eq(0)]
                    m.next = "SYNC"
                with m.Else():
                    m.d.comb += self.response.ready.eq(1)
                    with m.If(self.response.valid):
                        m.d.sync += [status.eq(self.response.payload.status),
                                     length.eq(self.response.payload.length)]
                        m.next = "SYNC"
            with m.State("SYNC"):
                send(SYNC, "CODE", checked=False)
                m.d.sync += [out_crc.eq(0xFFFF), left.eq(length)]
            with m.State("CODE"):
                send(status, "LEN0")
            with m.State("LEN0"):
                send(length[:8], "LEN1")
            with m.State("LEN1"):
                send(length[8:], "DATA")
                with m.If(out.ready & (length == 0)):
                    m.next = "CRC0"
            with m.State("DATA"):
                m.d.comb += [out.payload.eq(self.response_data.payload),
                             out.valid.eq(self.response_data.valid),
                             self.response_data.ready.eq(out.ready)]
                with m.If(taken):
                    m.d.sync += [left.eq(left - 1), out_crc.eq(crc16_update(out_crc, out.payload))]
                    with m.If(left == 1):
                        m.next = "CRC0"
            with m.State("CRC0"):
                send(out_crc[:8], "CRC1", checked=False)
            with m.State("CRC1"):
                send(out_crc[8:], "IDLE", checked=False)
                with m.If(out.ready):
                    m.d.comb += k.sent.eq(1)
            k.sender = state_flags(fsm)
