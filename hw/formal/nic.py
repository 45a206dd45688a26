"""Proofs of the NIC engines (``codnn.hw.nic``): value frames, messages counted, input
waits, message bytes, header counts, answers, settings taken at their edge, and the
INCEPTIONN-style and TernGrad value paths."""

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Module, Mux, Shape, Signal
from amaranth.lib.wiring import Flow

from codnn.golden.inceptionn import BOUND_BITS, RAW_EXPONENT
from codnn.hw.formal.environment import stream_engine_top
from codnn.hw.formal.streams import beats, messages, no_reset, stream_rules, value_frames
from codnn.hw.nic.decompressor import decode_value
from codnn.hw.nic.inceptionn_format import Thresholds, classify_value, value_payload
from codnn.hw.nic.terngrad import float_parts, survives

__all__ = ["value_frames_top", "messages_top", "waits_top", "message_bytes_top",
           "header_counts_top", "answers_top", "settings_edge_top", "inceptionn_value_top",
           "terngrad_value_top"]


def value_frames_top(engine, lanes, max_values):
    """A NIC engine that gives value messages (``codnn.hw.nic.registry``), under the environment
    of ``stream_engine_top`` with no reset and ``bypass`` (which passes messages as they
    are) off: every output frame is a value message of at most ``max_values`` values
    (``codnn.hw.formal.streams.value_frames``)."""
    dut = engine.component(lanes=lanes, max_values=max_values)
    m = stream_engine_top(dut)
    no_reset(m)
    if engine.has("bypass"):
        m.d.comb += Assume(~dut.bypass)
    value_frames(m, dut.o, lanes, max_values)
    return m


def messages_top(dut):
    """A NIC engine (``codnn.hw.nic.registry``; streams ``i`` and ``o``) under
    ``stream_engine_top``'s environment, a reset at any cycle: no output message begins
    before an input message has begun, one out for each in at most
    (``codnn.hw.formal.streams.messages``), whatever the messages are (good, bad, cut,
    bypassed) and whenever the sink takes them."""
    m = stream_engine_top(dut)
    m.d.comb += Assert(messages(m, dut.o, "o")[0] <= messages(m, dut.i, "i")[0])
    return m


def waits_top(dut, wait):
    """A NIC engine (streams ``i`` and ``o``) under ``stream_engine_top``'s environment, its
    sink always ready and no reset: an input beat on offer is taken within ``wait``
    cycles (``i.valid`` without ``i.ready`` never lasts more than ``wait`` cycles in a
    row), whatever the messages and the settings are: the engine never hangs, and the
    bound is how long its input can be held up. Cover: a beat waits ``wait`` cycles."""
    m = stream_engine_top(dut)
    no_reset(m)
    m.d.comb += Assume(dut.o.ready)
    waited = Signal(range(wait + 2), name="input_waited")
    with m.If(dut.i.valid & ~dut.i.ready):
        with m.If(waited <= wait):
            m.d.sync += waited.eq(waited + 1)
    with m.Else():
        m.d.sync += waited.eq(0)
    m.d.comb += [Assert(waited <= wait), Cover(waited == wait)]
    return m


def _good_messages_top(dut, max_values):
    """``stream_engine_top``'s environment for a one-lane NIC engine that takes value
    messages, narrowed to good ones: no reset, its input good value messages of at most
    ``max_values`` values (``value_frames`` assumed, every last beat keeping its 4 bytes)
    on offer at any cycles, its settings (every other input port) any constants."""
    m = stream_engine_top(dut)
    no_reset(m)
    for name, member in dut.signature.members.items():
        if member.is_port and member.flow == Flow.In:
            port = getattr(dut, name)
            m.d.comb += Assume(port == AnyConst(len(port)))
    value_frames(m, dut.i, 1, max_values, assume=True)
    with m.If(dut.i.valid & dut.i.payload.last):
        m.d.comb += Assume(dut.i.payload.keep.all())
    return m


def message_bytes_top(dut, max_values, expected):
    """A NIC engine under ``_good_messages_top``'s environment (good value messages in,
    constant settings, ``bypass`` off, no reset), its sink ready at random: the k-th
    output message (any k < 16, an ``AnyConst``) carries exactly ``expected(n)`` bytes
    (a function of values: the golden model's size of a message), ``n`` the value count of
    the k-th input message, its last beat's kept bytes the lowest ones: no byte created or
    lost through the engine's ratio. Cover: a message of at least one value is checked."""
    m = _good_messages_top(dut, max_values)
    if "bypass" in dut.signature.members:           # which passes messages as they are
        m.d.comb += Assume(~dut.bypass)
    index = AnyConst(4)
    i, o = dut.i, dut.o
    # The index-th input message's count, from its descriptor (its first beat).
    begun_in, first_in = messages(m, i, "in")
    count = Signal(32, name="tracked_count")
    counted = Signal(name="tracked_count_seen")
    with m.If(i.valid & i.ready & first_in & (begun_in == index)):
        m.d.sync += [count.eq(i.payload.data[:32]), counted.eq(1)]
    # The bytes of the index-th output message so far.
    begun_out, first_out = messages(m, o, "out")
    sent = Signal(16, name="tracked_bytes")
    width = len(o.payload.keep)
    kept = sum(o.payload.keep[k] for k in range(width))
    beat_bytes = Mux(o.payload.last, kept, width)
    tracking = Signal(name="tracked_message_open")        # its first beat went, not its last
    inside = Mux(first_out, begun_out == index, tracking)
    with m.If(o.valid & o.ready):
        m.d.sync += tracking.eq(inside & ~o.payload.last)
        with m.If(inside):
            m.d.sync += sent.eq(sent + beat_bytes)
            m.d.comb += Assert(counted)
            with m.If(o.payload.last):
                m.d.comb += [Assert((o.payload.keep & (o.payload.keep + 1)) == 0),
                             Assert(sent + beat_bytes == expected(count)),
                             Cover(count != 0)]
    return m


def header_counts_top(dut, max_values):
    """The TernGrad decoder (``codnn.hw.nic.terngrad.TernGradDecoder``) under
    ``stream_engine_top``'s environment, narrowed: no reset, ``bypass`` off, its input
    messages of any bytes (cut short, too long, any scaler and codes) except that each
    holds its 8-byte header with a count of at most ``max_values`` (so none is dropped);
    a last beat keeps its lowest bytes. Properties: the k-th output frame's descriptor
    (any k < 16) carries the count of the k-th input message's header, and every frame
    is that many values (``value_frames``): the decoder never gives more values than the
    header declares, nor fewer. Cover: a frame of at least one value, past the first, is
    checked."""
    m = stream_engine_top(dut)
    no_reset(m)
    m.d.comb += Assume(~dut.bypass)
    i, o, index = dut.i, dut.o, AnyConst(4)
    width = len(i.payload.keep)                   # bytes a beat
    header_beats = -(-8 // width)
    count_beat, count_at = divmod(4, width)       # the count: bytes 4..7
    header_count = i.payload.data[8 * count_at:8 * count_at + 32]   # on its count beat
    position = Signal(range(header_beats + 1), name="in_position")    # saturating
    with m.If(i.valid & i.ready):
        m.d.sync += position.eq(Mux(i.payload.last, 0,
                                    Mux(position == header_beats, position, position + 1)))
    with m.If(i.valid):
        keep = i.payload.keep
        with m.If(i.payload.last):
            m.d.comb += [Assume((keep & (keep + 1)) == 0),
                         Assume(position >= header_beats - 1)]
            with m.If(position == header_beats - 1):
                m.d.comb += Assume(keep[:8 - width * (header_beats - 1)].all())
        with m.If(position == count_beat):
            m.d.comb += Assume(header_count <= max_values)
    begun_in, first_in = messages(m, i, "in")
    count = Signal(32, name="tracked_count")
    counted = Signal(name="tracked_count_seen")
    this_message = Mux(first_in, begun_in, begun_in - 1)
    with m.If(i.valid & i.ready & (position == count_beat) & (this_message == index)):
        m.d.sync += [count.eq(header_count), counted.eq(1)]
    begun_out, first_out = messages(m, o, "out")
    with m.If(o.valid & o.ready & first_out & (begun_out == index)):
        m.d.comb += [Assert(counted & (o.payload.data[:32] == count)),
                     Cover((count != 0) & (index != 0))]
    value_frames(m, o, dut.lanes, max_values)
    return m


def answers_top(dut, max_values, answer):
    """A NIC engine under ``_good_messages_top``'s environment (good value messages of at
    most ``max_values`` values in, constant settings, no reset), its sink always ready:
    the k-th output message ends (its beat with ``last`` leaves) at most ``answer`` cycles
    after the edge that took the k-th input message's last beat, for any k < 16 (an
    ``AnyConst``). Cover: an answer takes exactly ``answer`` cycles."""
    m = _good_messages_top(dut, max_values)
    m.d.comb += Assume(dut.o.ready)
    index = AnyConst(4)
    ended_in = Signal(5, name="messages_ended_in")
    ended_out = Signal(5, name="messages_ended_out")
    end_in = dut.i.valid & dut.i.ready & dut.i.payload.last
    end_out = dut.o.valid & dut.o.ready & dut.o.payload.last
    with m.If(end_in & (ended_in <= index)):
        m.d.sync += ended_in.eq(ended_in + 1)
    with m.If(end_out & (ended_out <= index)):
        m.d.sync += ended_out.eq(ended_out + 1)
    # Cycles since the cycle after the edge that took the index-th input message's last
    # beat, while its answer has not left: an answer in the cycle with age a comes a + 1
    # cycles after that edge.
    age = Signal(range(answer + 2), name="answer_age")
    waiting = (ended_in > index) & (ended_out <= index)
    with m.If(waiting & (age <= answer)):
        m.d.sync += age.eq(age + 1)
    answered = end_out & (ended_out == index)
    m.d.comb += [Assert(~waiting | answered | (age + 1 < answer)),
                 Cover(waiting & answered & (age == answer - 1))]
    return m


def settings_edge_top(engine, lanes, max_values):
    """Two copies of a NIC engine (``codnn.hw.nic.registry``) on the same input beats, sink
    and resets, under ``stream_engine_top``'s environment. Copy ``a`` sees each message's
    settings as the documented rule asks of a user: held from the cycle after the previous
    message's first beat was taken (the first message after a reset: any values) until its
    own first beat is taken. Copy ``b`` sees the same values at each edge that takes a
    message's first beat and any values at every other cycle. The property: both give the
    same outputs at every cycle (each stream's ``valid``, its payload while valid, each
    input's ``ready``, every counter and flag): an engine reads its settings only at the
    edge that takes a message's first beat. Cover: a second output beat leaves (what the
    depth must reach for a value to be compared)."""
    a = engine.component(lanes=lanes, max_values=max_values)
    b = engine.component(lanes=lanes, max_values=max_values)
    m = Module()
    m.submodules.a, m.submodules.b = a, b
    width = Shape.cast(a.i.payload.shape()).width
    ready = AnySeq(1)
    m.d.comb += [a.i.valid.eq(AnySeq(1)), a.i.payload.eq(AnySeq(width)),
                 b.i.valid.eq(a.i.valid), b.i.payload.eq(a.i.payload),
                 a.o.ready.eq(ready), b.o.ready.eq(ready)]
    stream_rules(m, a.i, "i", assume=True)
    first = Signal(init=1, name="first_beat_next")
    taken = a.i.valid & a.i.ready
    with m.If(taken):
        m.d.sync += first.eq(a.i.payload.last)
    edge = taken & first
    loaded = Signal(name="settings_loaded")        # a message's first beat since the reset
    with m.If(edge):
        m.d.sync += loaded.eq(1)
    for name, bits, _ in engine.settings:
        held, value = Signal(bits, name=f"{name}_held"), Signal(bits, name=f"{name}_value")
        m.d.comb += [value.eq(Mux(loaded, held, AnyConst(bits))),
                     getattr(a, name).eq(value),
                     getattr(b, name).eq(Mux(edge, value, AnySeq(bits)))]
        with m.If(edge):
            m.d.sync += held.eq(AnySeq(bits))
    m.d.comb += [Assert(a.i.ready == b.i.ready), Assert(a.o.valid == b.o.valid),
                 Assert(~a.o.valid | (a.o.payload.as_value() == b.o.payload.as_value()))]
    m.d.comb += [Assert(getattr(a, name) == getattr(b, name))
                 for name, _ in engine.reports]
    m.d.comb += Cover(a.o.valid & (beats(m, a.o, "out") == 1))    # a second beat leaves
    return m


def inceptionn_value_top(thresholds=Thresholds):
    """One float32 ``x`` and one bound ``b`` (``AnyConst``, ``b`` in 7..15) through the
    INCEPTIONN-style codec's value path in gateware: the class and payload the compressor
    sends (``codnn.hw.nic.inceptionn_format``) and the value the decompressor makes of them
    (``codnn.hw.nic.decompressor.decode_value``), every lane of both engines being these.
    Properties: the value out is the semantics table's (section 4), written as a mask:
    ``x`` itself for ``e >= 127``, +0.0 below ``127 - b``, else ``x`` with the significand
    bits under ``2**-b`` (tag 1) or ``2**-15`` (tag 2) cleared; and, said apart from the
    table, a finite ``|x| < 1`` comes back with its sign (or as 0), no larger, and less
    than ``2**-b`` smaller. ``thresholds`` lets the tests put a wrong compare in."""
    m = Module()
    x, b = AnyConst(32), AnyConst(4)
    m.d.comb += Assume((b >= BOUND_BITS[0]) & (b <= BOUND_BITS[-1]))
    limits = thresholds(b)
    m.d.comb += limits.load()
    tag, amount = classify_value(m, x, limits)
    y = decode_value(m, tag, value_payload(x, tag, amount), b)
    e = x[23:31]
    small = (e >= RAW_EXPONENT - b) & (e < RAW_EXPONENT + 7 - b)
    cut = Signal(5)
    m.d.comb += cut.eq(Mux(small, RAW_EXPONENT + 23 - e - b, RAW_EXPONENT + 8 - e))
    kept = Cat(x[:23] & ~((1 << cut) - 1)[:23], x[23:])
    expected = Mux(e >= RAW_EXPONENT, x, Mux(e < RAW_EXPONENT - b, 0, kept))

    def magnitude(bits):                  # |value| in units of 2**-149
        exponent = bits[23:31]
        return Mux(exponent == 0, bits[:23], Cat(bits[:23], 1) << (exponent - 1)[:8])
    shrink = magnitude(x) - magnitude(y)
    m.d.comb += [
        Assert(y == expected),
        Assert((e >= RAW_EXPONENT) | ((magnitude(y) <= magnitude(x))
                                      & (shrink < (1 << (149 - b)[:8]))
                                      & ((y == 0) | (y[31] == x[31])))),
    ]
    return m


def terngrad_value_top():
    """One lane's TernGrad decision in gateware (``codnn.hw.nic.terngrad.survives``, as
    every lane of the encoder has it, with its register stages taken out: the same logic
    on values that do not change) on a finite float32 ``g``, a finite non-negative
    scaler ``s`` and any 48-bit ``product`` of a uniform ``u`` and the scaler's
    significand (``AnyConst``). Property: the lane keeps ``g`` exactly when ``|g| * 2**24
    > u * s`` (semantics section 5), written apart from the design's exponent logic:
    both sides as integers in units of ``2**-150``, shifts of up to 303 bits, no
    saturation. The product itself (four 12 x 12 products in the encoder) is held
    to golden by simulation: a solver does not show two multipliers equal in reasonable
    time."""
    m = Module()
    g, s, product = AnyConst(32), AnyConst(32), AnyConst(48)
    m.d.comb += Assume((g[23:31] != 0xFF) & ~s[31] & (s[23:31] != 0xFF))
    g_significand, g_exponent = float_parts(m, g, "g")
    _, s_exponent = float_parts(m, s, "s")
    keep = survives(m, lambda value, name: value, g_significand, g_exponent, product,
                    s_exponent, "lane")

    def scaled(significand, exponent_bits, extra):      # significand * 2**(e + extra)
        return significand << (Mux(exponent_bits == 0, 1, exponent_bits) + extra)
    left = scaled(Cat(g[:23], g[23:31] != 0), g[23:31], 24)     # |g| * 2**24 * 2**150
    right = scaled(product, s[23:31], 0)                        # u * s * 2**150
    m.d.comb += Assert(keep == (left > right))
    return m
