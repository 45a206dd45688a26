"""Ethernet MAC at the GMII level, a byte per cycle (1 GbE at 125 MHz): the transmitter
frames a stream of bytes (preamble, SFD, padding, FCS, inter-frame gap), the receiver
strips them and checks the FCS."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.packets import MIN_FRAME
from codnn.hw.common.crc import CRC32_RESIDUE, crc32_update
from codnn.hw.nic.layouts import frame_beat_layout

__all__ = ["MacTx", "MacRx", "PREAMBLE", "SFD", "IFG"]

PREAMBLE, SFD = 0x55, 0xD5
#: Preamble bytes before the SFD, and idle byte times between frames.
_PREAMBLE_BYTES, IFG = 7, 12
_ALL_ONES = 0xFFFFFFFF


class _Tx(enum.Enum, shape=3):
    IDLE = 0
    PREAMBLE = 1
    DATA = 2
    PAD = 3
    FCS = 4
    DISCARD = 5
    GAP = 6


class MacTx(wiring.Component):
    """Send frames (no FCS) from ``i`` (a byte a beat, ``frame_beat_layout(1)``; ``keep`` is
    not read) on GMII: 7 preamble bytes, the SFD, the frame padded with zeros to 60 bytes,
    its FCS (CRC-32, low byte first), then 12 idle byte times. ``user`` on a frame's last
    beat sends its FCS inverted, so the far end drops it (a frame that arrived damaged
    stays damaged).

    A frame's bytes must come one a cycle once its first is taken (a store-and-forward
    source such as ``codnn.hw.nic.FramePath`` does): a missing byte is an *underrun*: the frame
    is cut with ``tx_er`` on its last byte time, the rest of it is taken and dropped, and
    ``underruns`` counts it.

    Latency: the first preamble byte leaves the cycle after a frame's first beat is
    offered. Throughput: line rate (a byte per cycle plus 20 byte times a frame).

    Attributes
    ----------
    i : In(stream.Signature(frame_beat_layout(1)))
    txd, tx_en, tx_er : Out
        GMII transmit.
    frames, underruns : Out(32)
        Frames sent whole; frames cut for a missing byte (both wrap).
    """

    def __init__(self):
        super().__init__({"i": In(stream.Signature(frame_beat_layout(1))),
                          "txd": Out(8), "tx_en": Out(1), "tx_er": Out(1),
                          "frames": Out(32), "underruns": Out(32)})

    def elaborate(self, platform):
        m = Module()
        state = Signal(_Tx)
        count = Signal(range(max(MIN_FRAME, IFG, _PREAMBLE_BYTES) + 1))
        crc = Signal(32, init=_ALL_ONES)
        poison = Signal()
        fcs = Signal(32)
        m.d.comb += fcs.eq(Mux(poison, crc, ~crc))      # the FCS is the register inverted

        def send(byte):
            m.d.sync += [self.txd.eq(byte), self.tx_en.eq(1), self.tx_er.eq(0),
                         crc.eq(crc32_update(crc, byte))]

        m.d.sync += [self.tx_en.eq(0), self.tx_er.eq(0)]
        with m.Switch(state):
            with m.Case(_Tx.IDLE):
                with m.If(self.i.valid):
                    m.d.sync += [state.eq(_Tx.PREAMBLE), count.eq(0), crc.eq(_ALL_ONES),
                                 self.txd.eq(PREAMBLE), self.tx_en.eq(1)]
            with m.Case(_Tx.PREAMBLE):
                m.d.sync += [self.txd.eq(Mux(count == _PREAMBLE_BYTES - 1, SFD, PREAMBLE)),
                             self.tx_en.eq(1), count.eq(count + 1)]
                with m.If(count == _PREAMBLE_BYTES - 1):
                    m.d.sync += [state.eq(_Tx.DATA), count.eq(0)]
            with m.Case(_Tx.DATA):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    send(self.i.payload.data)
                    m.d.sync += count.eq(Mux(count == MIN_FRAME, count, count + 1))
                    with m.If(self.i.payload.last):
                        m.d.sync += [poison.eq(self.i.payload.user),
                                     state.eq(Mux(count + 1 < MIN_FRAME, _Tx.PAD, _Tx.FCS))]
                with m.Else():              # underrun: the frame ends in an error byte
                    m.d.sync += [self.tx_en.eq(1), self.tx_er.eq(1), state.eq(_Tx.DISCARD),
                                 self.underruns.eq(self.underruns + 1)]
            with m.Case(_Tx.PAD):
                send(0)
                m.d.sync += count.eq(count + 1)
                with m.If(count == MIN_FRAME - 1):
                    m.d.sync += [state.eq(_Tx.FCS), count.eq(0)]
            with m.Case(_Tx.FCS):
                m.d.sync += [self.txd.eq(fcs.word_select(count[:2], 8)), self.tx_en.eq(1),
                             count.eq(count + 1)]
                with m.If(count == 3):
                    m.d.sync += [state.eq(_Tx.GAP), count.eq(0),
                                 self.frames.eq(self.frames + 1)]
            with m.Case(_Tx.DISCARD):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid & self.i.payload.last):
                    m.d.sync += [state.eq(_Tx.GAP), count.eq(0)]
            with m.Case(_Tx.GAP):
                m.d.sync += count.eq(count + 1)
                with m.If(count == IFG - 1):        # IFG cycles of tx_en low, then IDLE
                    m.d.sync += state.eq(_Tx.IDLE)
        # A frame ending in DATA goes to FCS with the count of bytes sent; FCS counts 0..3.
        with m.If((state == _Tx.DATA) & self.i.valid & self.i.payload.last
                  & (count + 1 >= MIN_FRAME)):
            m.d.sync += count.eq(0)
        return m


class MacRx(wiring.Component):
    """Receive frames from GMII into ``o`` (a byte a beat, ``frame_beat_layout(1)`` with
    ``keep`` high, no FCS), which cannot wait (a MAC's receiver cannot hold the wire: ``o``
    is always ready): whoever listens takes a byte when ``o.valid`` is high.

    A frame starts where ``rx_dv`` rises, with preamble bytes (0x55, any number) and the
    SFD; a frame with another byte before its SFD is ignored. Its last 4 bytes are the FCS,
    checked and not passed on; ``user`` on the last beat flags a frame that arrived
    damaged: a bad FCS, ``rx_er`` during it, or shorter than 64 bytes with its FCS (a runt).
    A frame of 4 bytes or fewer after the SFD gives no beat at all.

    Latency: a byte leaves 5 byte times after it arrived (the FCS must be known not to be
    data), the last byte the cycle after ``rx_dv`` falls.

    Attributes
    ----------
    rxd, rx_dv, rx_er : In
        GMII receive.
    o : Out(stream.Signature(frame_beat_layout(1), always_ready=True))
    """

    def __init__(self):
        super().__init__({"rxd": In(8), "rx_dv": In(1), "rx_er": In(1),
                          "o": Out(stream.Signature(frame_beat_layout(1), always_ready=True))})

    def elaborate(self, platform):
        m = Module()
        was_valid, in_preamble, in_frame = Signal(), Signal(), Signal()
        crc = Signal(32, init=_ALL_ONES)
        delay = [Signal(8, name=f"delay{k}") for k in range(4)]   # delay[3]: the oldest
        filled = Signal(range(5))
        held, held_valid = Signal(8), Signal()
        length = Signal(range(MIN_FRAME + 5))   # bytes after the SFD, counted up to 64
        error = Signal()

        def start_frame():
            m.d.sync += [in_frame.eq(1), in_preamble.eq(0), crc.eq(_ALL_ONES), filled.eq(0),
                         held_valid.eq(0), length.eq(0), error.eq(0)]

        beat = self.o.payload
        m.d.comb += beat.keep.eq(1)
        m.d.sync += [self.o.valid.eq(0), was_valid.eq(self.rx_dv)]
        with m.If(in_frame & self.rx_dv):
            m.d.sync += [crc.eq(crc32_update(crc, self.rxd)),
                         Cat(delay).eq(Cat(self.rxd, *delay[:3])),
                         error.eq(error | self.rx_er),
                         length.eq(Mux(length == MIN_FRAME + 4, length, length + 1))]
            with m.If(filled == 4):
                # The oldest byte is data: the one held before it leaves, it is held.
                m.d.sync += [held.eq(delay[3]), held_valid.eq(1),
                             beat.data.eq(held), beat.last.eq(0), beat.user.eq(0),
                             self.o.valid.eq(held_valid)]
            with m.Else():
                m.d.sync += filled.eq(filled + 1)
        with m.Elif(in_frame):
            # The frame ended: the held byte is its last; the four after it were the FCS.
            m.d.sync += [in_frame.eq(0), beat.data.eq(held), beat.last.eq(1),
                         beat.user.eq((crc != CRC32_RESIDUE) | error | (length < MIN_FRAME + 4)),
                         self.o.valid.eq(held_valid)]
        with m.Elif(self.rx_dv & (in_preamble | ~was_valid)):
            with m.If(self.rxd == SFD):
                start_frame()
            with m.Else():
                m.d.sync += in_preamble.eq(self.rxd == PREAMBLE)
        with m.Else():
            m.d.sync += in_preamble.eq(0)
        return m
