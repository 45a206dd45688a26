"""TernGrad encoder and decoder (docs/semantics.md section 5): value messages to and from TernGrad
messages (scaler, count, 2-bit codes four per byte), ``lanes`` values per cycle."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.counters import counter
from codnn.hw.common.fmix32 import fmix32_stages
from codnn.hw.common.pipeline import CreditPipeline
from codnn.hw.common.skid import SkidOutput
from codnn.hw.nic.engine_base import NicEngineBase, count_errors
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.packer import BytePacker
from codnn.hw.nic.reader import Item, MessageReader
from codnn.hw.nic.window import ByteWindow

__all__ = ["TernGradEncoder", "TernGradDecoder", "float_parts", "finite_non_negative",
           "survives"]


def float_parts(m, bits, name):
    """Significand (24 bits, hidden bit included) and exponent (denormals: 1) of a float32,
    so that its magnitude is ``significand * 2**(exponent - 150)``."""
    exponent = bits[23:31]
    significand = Signal(24, name=f"{name}_significand")
    scale = Signal(8, name=f"{name}_exponent")
    m.d.comb += [significand.eq(Cat(bits[:23], exponent != 0)),
                 scale.eq(Mux(exponent == 0, 1, exponent))]
    return significand, scale


def finite_non_negative(bits):
    """True for a float32 that is neither negative nor Inf/NaN (+0.0 is allowed)."""
    return ~bits[31] & (bits[23:31] != 0xFF)


def _product(stage, u, s, name):
    """``u * s`` for 24-bit ``u`` and ``s`` in two register stages (``stage``: a register on a
    value): four 12 x 12 partial products (one DSP block each on an ECP5), then their sum."""
    u_lo, u_hi, s_lo, s_hi = u[:12], u[12:24], s[:12], s[12:24]
    low = stage(u_lo * s_lo, f"{name}_ll")
    high = stage(u_hi * s_hi, f"{name}_hh")
    middle = stage(u_lo * s_hi, f"{name}_lh") + stage(u_hi * s_lo, f"{name}_hl")
    return stage((Cat(low, high) + (middle << 12))[:48], name)


def survives(m, stage, g_significand, g_exponent, product, s_exponent, name):
    """``|g| * 2**24 > u * s`` exactly, from ``g``'s parts, ``product = u * s_significand``
    (48 bits) and ``s``'s exponent: ``g_significand * 2**k > product`` with
    ``k = g_exponent - s_exponent + 24``, as ``g_significand << k > product`` for ``k >= 0``
    and ``g_significand > product << -k`` below. Shifts saturate where the answer no longer
    changes: past 48 the left side wins (``product < 2**48``), past 24 the right side does
    unless ``product`` is 0 (``g_significand < 2**24``).

    ``g``'s parts and ``s_exponent`` come a stage before ``product``. Three register
    stages (``stage``: a register on a value): ``k`` (beside the product), the shift
    amounts, the shifted sides; the comparison that follows is combinational."""
    g_signed = Signal(signed(10), name=f"{name}_g_exponent")
    s_signed = Signal(signed(10), name=f"{name}_s_exponent")
    k = Signal(signed(11), name=f"{name}_k")
    m.d.comb += [g_signed.eq(g_exponent), s_signed.eq(s_exponent),
                 k.eq(g_signed - s_signed + 24)]
    k = stage(k, f"{name}_k_d")
    up = stage(Mux(k >= 48, 48, Mux(k > 0, k, 0))[:6], f"{name}_up")
    down = stage(Mux(k <= -24, 24, Mux(k < 0, -k, 0))[:5], f"{name}_down")
    g_significand = stage(stage(g_significand, f"{name}_g_significand"),
                          f"{name}_g_significand_d")
    left = stage(g_significand << up, f"{name}_left")
    right = stage(stage(product, f"{name}_product_d") << down, f"{name}_right")
    return left > right


class TernGradEncoder(NicEngineBase):
    """Ternarize value messages into TernGrad messages, ``lanes`` values per beat.

    Input: value messages (``codnn.hw.nic.layouts``). Output: ``scaler`` (4 bytes), the count (4
    bytes), the codes of ``ceil(n/4)`` bytes, as full beats of ``4 * lanes`` bytes, the
    final one keeping what is left. ``scaler``, ``seed`` and ``bypass`` are sampled at the
    clock edge that takes the message's descriptor beat (so they may change from the next
    cycle on); element ``i`` is kept (``+-1``) when ``|g_i| * 2**24 > u_i * scaler`` with
    ``u_i = fmix32((seed + i) mod 2**32) >> 8``. In bypass a message passes unchanged.

    Defined behaviour on bad input (``error`` is sticky): each NaN/Inf value gets code 0,
    counts in ``nonfinite`` and raises ``error`` (it is not a bad message). A bad message
    raises ``error`` and counts once in ``error_count``: a scaler with its sign bit set
    (negative or -0.0), Inf or NaN (every code of the message 0); input that ends before
    the count (padded with zeros); beats past the count (dropped); a count above
    ``max_values`` (no output, dropped up to its ``last``).

    Latency: ``latency`` cycles from a value beat at the reader's output to its codes at
    the head of a queue in front of the packer (plus the beats per code byte with fewer
    than 4 lanes). The stages never stall (``codnn.hw.common.pipeline.CreditPipeline``), so the
    packer's ``ready`` reaches only that queue. Throughput: one input beat per cycle while
    the output is not backpressured; a message end costs the cycles its tail takes to
    leave.

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1).

    Attributes
    ----------
    i, o : In/Out(stream.Signature(beat_layout(4 * lanes)))
    scaler, seed : In(32)
        The scaler's float32 bits; the random stream's seed.
    bypass : In(1)
    error : Out(1)
    error_count : Out(16)
    nonfinite : Out(32)
    """

    @property
    def latency(self):
        """Cycles from a value beat at the reader's output to its codes at the head of the
        queue: 5 (fmix32), 2 (u * s: four 12 x 12 partial products, then their sum with
        the exponent difference beside it), 2 (the shift amounts, the shifted sides of the
        comparison), the queue's 2."""
        return 11

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"scaler": In(32), "seed": In(32), "bypass": In(1),
             "error": Out(1), "error_count": Out(16), "nonfinite": Out(32)}

    def __init__(self, *, lanes=8, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    def elaborate(self, platform):
        m = Module()
        width = 4 * self.lanes
        m.submodules.packer = packer = BytePacker(chunk_bytes=max(8, width), beat_bytes=width)
        wiring.connect(m, wiring.flipped(self.o), packer.o)
        pipe, item, scaler, seed, usable = self._read(m)
        out = self._ternarize(m, pipe, item, scaler, seed, usable)
        self._code_bytes(m, pipe, out, packer.i)
        return m

    def _read(self, m):
        """The message's beats (``codnn.hw.nic.reader.MessageReader``) into a credit pipeline of
        ``latency - 2`` stages; the scaler and seed taken with the descriptor (a scaler
        that is not finite and non-negative flags the message)."""
        flag, entering = Signal(), Signal()
        pipe = CreditPipeline(m, entering, self.latency - 2, queue_depth=16)
        reader = MessageReader(m, self.i, pipe.ready, lanes=self.lanes, flag=flag,
                               bypass=self.bypass, max_values=self.max_values, hold=False)
        count_errors(m, flag, self.error, self.error_count, between=reader.between)
        m.d.comb += entering.eq(reader.item.kind != Item.NONE)
        scaler, seed = Signal(32), Signal(32)
        usable = Signal()                       # the message's scaler is finite, >= 0
        with m.If(reader.descriptor):
            m.d.sync += [scaler.eq(self.scaler), seed.eq(self.seed),
                         usable.eq(finite_non_negative(self.scaler))]
            with m.If(~finite_non_negative(self.scaler)):
                m.d.comb += flag.eq(1)
        return pipe, reader.item, scaler, seed, usable

    def _ternarize(self, m, pipe, item, scaler, seed, usable):
        """Each lane's code through the pipeline: the position's hash, its product with
        the scaler's significand, whether the value survives; non-finite values counted
        in ``nonfinite``. Returns the pipeline's output item with its codes."""
        delay = pipe.delay
        early = delay(item, 6, "item")
        late = delay(early, 3, "item_late")
        s_bits = delay(scaler, 6, "scaler")
        s_usable = delay(usable, 9, "usable")
        s_significand, s_exponent = float_parts(m, s_bits, "scaler")
        codes, bad = [], []
        for k in range(self.lanes):
            position = (seed + item.index + k)[:32]         # mod 2**32
            u = fmix32_stages(pipe.register, position, f"lane{k}_hash")[8:]
            product = _product(pipe.register, u, s_significand, f"lane{k}_product")
            g_significand, g_exponent = float_parts(m, early.bits[32 * k:32 * (k + 1)],
                                                    f"lane{k}_g")
            keep = survives(m, pipe.register, g_significand, g_exponent, product, s_exponent,
                            f"lane{k}")
            g = late.bits[32 * k:32 * (k + 1)]
            finite = g[23:31] != 0xFF
            codes.append(Mux(keep & finite & s_usable, Mux(g[31], 3, 1), 0))
            bad.append((late.kind == Item.VALUES) & ~finite)
        with m.If(pipe.last_valid):
            m.d.sync += self.nonfinite.eq(self.nonfinite + sum(bad))
            with m.If(Cat(*bad).any()):
                m.d.sync += self.error.eq(1)
        return pipe.send({"kind": late.kind, "bits": late.bits, "count": late.count,
                          "final": late.final, "length": late.length, "last": late.last,
                          "codes": Cat(*codes), "scaler": delay(s_bits, 3, "scaler_out")})

    def _code_bytes(self, m, pipe, out, chunk):
        """The packer's chunks: the header (scaler and count), raw beats, and the code
        bytes, ``lanes / 4`` per beat or one per ``4 / lanes`` beats."""
        lanes = self.lanes
        taken = pipe.o_valid & pipe.o_ready
        m.d.comb += pipe.o_ready.eq(~chunk.valid | chunk.ready)
        with m.If(chunk.valid & chunk.ready):
            m.d.sync += chunk.valid.eq(0)
        slots = max(1, 4 // lanes)
        slot = counter(slots)
        partial = Signal(8)
        with m.If(taken):
            with m.Switch(out.kind):
                with m.Case(Item.HEADER):
                    m.d.sync += [chunk.valid.eq(1), chunk.payload.data.eq(Cat(out.scaler,
                                                                              out.bits[:32])),
                                 chunk.payload.length.eq(8),
                                 chunk.payload.last.eq(out.last)]
                with m.Case(Item.RAW):
                    m.d.sync += [chunk.valid.eq(1), chunk.payload.data.eq(out.bits),
                                 chunk.payload.length.eq(out.length),
                                 chunk.payload.last.eq(out.last)]
                with m.Case(Item.VALUES):
                    if lanes >= 4:
                        m.d.sync += [chunk.valid.eq(1), chunk.payload.data.eq(out.codes),
                                     chunk.payload.length.eq((out.count + 3) >> 2),
                                     chunk.payload.last.eq(out.final)]
                    else:
                        done = out.final | (slot == slots - 1)
                        byte = Mux(slot == 0, 0, partial) | (out.codes << (2 * lanes * slot))
                        m.d.sync += [partial.eq(byte), slot.eq(Mux(done, 0, slot + 1)),
                                     chunk.valid.eq(done), chunk.payload.data.eq(byte),
                                     chunk.payload.length.eq(1),
                                     chunk.payload.last.eq(out.final)]


class _State(enum.Enum, shape=3):
    HEADER = 0
    CODES = 1
    TAIL = 2
    PAD = 3
    DROP = 4
    BYPASS = 5


@dataclass(slots=True)
class _Decoding:
    """What the decoder's stages share. From ``_registers``: the message's state, its
    scaler (or 0 if not ``usable``), ``bypassed`` (``bypass`` at the first beat), the
    values left and this beat's (``remaining``, ``this_beat``, ``final``: the last), the
    byte slot of a beat's codes when a byte holds several beats (``sub`` of
    ``sub_beats``), its code bytes, the input's byte window and what it holds
    (``have_header``, ``nonempty``, ``holds[k]``: ``k`` bytes, ``have_codes``), the bad
    message strobe (``flag``) and the output. From ``_lane_values``: each lane's value,
    its non-ternary code and codes past the count (``stray``)."""

    state: Signal
    scaler: Signal
    usable: Signal
    bypassed: Signal
    remaining: Signal
    this_beat: Signal
    final: Signal
    sub_beats: int
    sub: Signal
    code_bytes: Signal
    window: ByteWindow
    have_header: Signal
    nonempty: Signal
    holds: Signal
    have_codes: Value
    flag: Signal
    out: SkidOutput
    values: list = None
    not_ternary: list = None
    stray: Value = None


class TernGradDecoder(NicEngineBase):
    """Decode TernGrad messages into value messages of ``t_i * scaler``, ``lanes`` values
    per beat.

    Input: TernGrad messages (scaler, count ``n``, ``ceil(n/4)`` code bytes), ``last`` on
    each message's final beat (whose valid bytes are its lowest ``keep`` bits; every other
    beat is taken whole). Output: a descriptor beat with ``n``, then ``ceil(n/lanes)``
    value beats: ``+scaler`` for code 01, ``-scaler`` (sign bit set) for 11, ``+0.0`` for
    00. ``bypass`` is sampled at the clock edge that takes the message's first beat.

    Defined behaviour on bad input (a bad message raises ``error`` (sticky) and counts
    once in ``error_count``): a scaler with its sign bit set (negative or -0.0), Inf or
    NaN decodes every value of its message to +0.0; a code 10 decodes to +0.0; a message
    cut before its codes gives the values of the whole code bytes received (also those of
    a beat whose later code bytes are missing), then zeros up to ``n``; bytes past the
    codes, or a nonzero code past the count, are dropped up to the input's ``last``; a
    message shorter than its 8 header bytes, or whose count is above ``max_values``, gives
    no output (dropped up to its ``last``). The next message is read normally either
    way.

    Latency: 1 cycle from a code byte buffered to its values in an output beat.
    Throughput: ``lanes`` values per cycle; a message costs 2 cycles more.

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1).

    Attributes
    ----------
    i, o : In/Out(stream.Signature(beat_layout(4 * lanes)))
    bypass : In(1)
    error : Out(1)
    error_count : Out(16)
    """

    @property
    def latency(self):
        """Cycles from a code byte buffered to its values in an output beat."""
        return 1

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"bypass": In(1), "error": Out(1), "error_count": Out(16)}

    def __init__(self, *, lanes=8, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    def elaborate(self, platform):
        m = Module()
        k = self._registers(m)
        self._lane_values(m, k)
        with m.Switch(k.state):
            with m.Case(_State.HEADER):
                self._header(m, k)
            with m.Case(_State.CODES, _State.PAD):
                self._codes(m, k)
            k.window.message_end_cases(m, k.state, _State, flag=k.flag, out=k.out,
                                       out_free=k.out.free)
        return m

    def _registers(self, m):
        """The message's state, scaler and values left; the input's byte window and what
        it holds; bad messages counted; ``bypass`` sampled at the first beat. Returns
        them (``_Decoding``)."""
        lanes = self.lanes
        state = Signal(_State)
        scaler = Signal(32)                     # the message's, or 0 if not usable
        usable = Signal()                       # finite, sign bit clear
        bypassed = Signal()                     # bypass, sampled at the first beat
        # Values left in the message; the values of this beat and whether it is the last,
        # kept as registers set a beat ahead, so no 32-bit compare reaches the window.
        remaining = Signal(32)
        this_beat = Signal(range(lanes + 1))
        final = Signal()
        # Lanes >= 4: a beat's codes are its first ceil(count/4) bytes. Fewer lanes: a
        # byte holds 4 / lanes beats, slot ``sub`` at bits 2*lanes*sub and up.
        sub_beats = max(1, 4 // lanes)
        sub = counter(sub_beats)
        most_code_bytes = max(1, lanes // 4)
        code_bytes = Signal(range(most_code_bytes + 1))
        m.d.comb += code_bytes.eq((this_beat + 3) >> 2 if lanes >= 4 else 1)
        window = ByteWindow(m, self.i, size=max(8, 4 * lanes) + 4 * lanes,
                            discard=state == _State.DROP, amounts=[Const(8), code_bytes])
        # Whether the window holds a header, any byte, and ``k`` bytes for each count of
        # code bytes ``k``: registers, so that no comparison of ``fill`` (nor the count of
        # a header just read) is in front of the decisions.
        have_header, nonempty = Signal(), Signal()
        holds = Signal(most_code_bytes + 1)
        m.d.sync += [have_header.eq(window.fill_next >= 8), nonempty.eq(window.fill_next != 0),
                     holds.eq(Cat(Const(1), *(window.fill_next >= i
                                              for i in range(1, most_code_bytes + 1))))]
        flag = Signal()
        count_errors(m, flag, self.error, self.error_count, between=state == _State.HEADER)
        with m.If((state == _State.HEADER) & ~nonempty & ~window.ended
                  & self.i.valid & self.i.ready):
            m.d.sync += bypassed.eq(self.bypass)
        out = SkidOutput.driving(m, self.o)
        return _Decoding(
            state=state, scaler=scaler, usable=usable, bypassed=bypassed,
            remaining=remaining, this_beat=this_beat, final=final, sub_beats=sub_beats,
            sub=sub, code_bytes=code_bytes, window=window, have_header=have_header,
            nonempty=nonempty, holds=holds, have_codes=holds.bit_select(code_bytes, 1),
            flag=flag, out=out)

    def _lane_values(self, m, k):
        """Each lane's value from its code (once its code byte is in: a message may end
        inside a beat's code bytes, and the values of its whole bytes still go out), the
        codes that are not ternary, and codes past the count (``stray``)."""
        lanes, window = self.lanes, k.window
        codes = window.data >> (2 * lanes * k.sub) if k.sub_beats > 1 else window.data
        k.values, k.not_ternary, stray_codes = [], [], []
        for i in range(lanes):
            code = codes[2 * i:2 * i + 2]
            value = Signal(32, name=f"lane{i}_value")
            m.d.comb += value.eq(Mux(code == 1, k.scaler,
                                     Mux(code == 3, Cat(k.scaler[:31], k.usable), 0)))
            k.values.append(Mux((i < k.this_beat) & k.holds[i // 4 + 1], value, 0))
            k.not_ternary.append((i < k.this_beat) & (code == 2))
            stray_codes.append((i >= k.this_beat) & (i < 4 * k.code_bytes) & (code != 0))
        if lanes >= 4:
            k.stray = k.final & Cat(*stray_codes).any()
        else:                          # codes past the count, in this slot and later ones
            k.stray = k.final & ((window.data[:8] >> (2 * (lanes * k.sub + k.this_beat)))
                                 != 0)

    def _header(self, m, k):
        """HEADER: the scaler and count read (a descriptor out), the message dropped, or
        bypass; a message that ends before its header is flagged."""
        lanes, window, out, state, flag = self.lanes, k.window, k.out, k.state, k.flag
        count, given = window.data[32:64], window.data[:32]
        with m.If(k.bypassed & (k.nonempty | window.ended)):
            m.d.sync += state.eq(_State.BYPASS)
        with m.Elif(k.have_header & (count > self.max_values)):
            m.d.comb += flag.eq(1)
            m.d.sync += state.eq(_State.DROP)
        with m.Elif(k.have_header):
            with m.If(out.free):
                ok = finite_non_negative(given)
                m.d.comb += [window.drop[0].eq(1), flag.eq(~ok)]
                m.d.sync += [k.scaler.eq(Mux(ok, given, 0)), k.usable.eq(ok),
                             k.remaining.eq(count), k.sub.eq(0),
                             k.this_beat.eq(Mux(count < lanes, count, lanes)),
                             k.final.eq(count <= lanes),
                             state.eq(Mux(count == 0, _State.TAIL, _State.CODES))]
                m.d.comb += [out.write.eq(1), out.payload.data.eq(count),
                             out.payload.keep.eq(Const(-1, 4 * lanes)),
                             out.payload.last.eq(count == 0)]
        with m.Elif(window.ended):
            m.d.comb += [flag.eq(1), window.clear.eq(1), window.finish.eq(1)]

    def _codes(self, m, k):
        """CODES and PAD: a beat of values from its code bytes, or zeros (PAD) up to the
        count once the message ended inside a beat's code bytes (the values of the whole
        bytes received go out first)."""
        lanes, window, out, state, flag = self.lanes, k.window, k.out, k.state, k.flag
        final, remaining, this_beat = k.final, k.remaining, k.this_beat
        padding = state == _State.PAD
        byte_done = final | (k.sub == k.sub_beats - 1)
        cut = ~padding & window.ended & ~k.have_codes
        with m.If(out.free & (padding | k.have_codes | window.ended)):
            with m.If(cut):
                m.d.comb += [flag.eq(1), window.clear.eq(1)]
            with m.Elif(~padding):
                m.d.comb += [window.drop[1].eq(byte_done),
                             flag.eq(Cat(*k.not_ternary).any() | k.stray)]
            m.d.comb += [
                out.write.eq(1), out.payload.data.eq(Mux(padding, 0, Cat(*k.values))),
                out.payload.keep.eq(Cat((this_beat > i).replicate(4) for i in range(lanes))),
                out.payload.last.eq(final),
            ]
            m.d.sync += [remaining.eq(remaining - this_beat),
                         k.sub.eq(Mux(byte_done, 0, k.sub + 1)),
                         final.eq(remaining <= 2 * lanes),
                         this_beat.eq(Mux(remaining < 2 * lanes, remaining - lanes, lanes))]
            with m.If(final):
                m.d.sync += state.eq(Mux(~padding & ~cut & k.stray, _State.DROP,
                                         _State.TAIL))
            with m.Elif(cut):
                m.d.sync += state.eq(_State.PAD)
