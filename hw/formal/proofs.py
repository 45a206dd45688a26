"""The designs ``codnn prove`` checks: each engine wrapped with its environment (inputs
from ``AnySeq`` / ``AnyConst``, the environment's stream rules assumed) and its
properties (docs/formal.md). ``PROOFS`` maps a name to a ``ProofSpec``."""

import dataclasses
from dataclasses import dataclass

import numpy as np
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import (C, Array, Assert, Assume, Cat, Cover, Elaboratable, Module, Mux,
                          Shape, Signal, Value, signed, unsigned)
from amaranth.lib import stream
from amaranth.lib.wiring import Flow
from amaranth.utils import ceil_log2

from codnn.golden.inceptionn import BOUND_BITS, RAW_EXPONENT
from codnn.golden.term_quant import truncate
from codnn.golden.terngrad import message_size as terngrad_message_size
from codnn.hw.bfp.dot import BlockDot
from codnn.hw.common.delays import delay_line
from codnn.hw.common.ws_array import BANK_BUSY, BANK_EMPTY, BANK_FULL
from codnn.hw.common.fmix32 import Fmix32Unit
from codnn.hw.common.skid import SkidOutput
from codnn.hw.formal.link_answers import check_answer_bounds, link_answers_top
from codnn.hw.formal.soc_reset import LinkPorts, soc_reset_top
from codnn.hw.formal.streams import (Tracker, beats, messages, no_reset, stream_rules,
                                    value_frames)
from codnn.hw.network.gather import Gather
from codnn.hw.network.weights import AxiWeights, OnChipWeights
from codnn.hw.nic.decompressor import decode_value
from codnn.hw.nic.frame_path import FramePath
from codnn.hw.nic.inceptionn_format import Thresholds, classify_value, value_payload
from codnn.hw.nic.maxabs import MaxAbs
from codnn.hw.nic.registry import NIC_ENGINES
from codnn.hw.nic.ring_links import RingLinks
from codnn.hw.soc.link import HostLink
from codnn.hw.soc.link_frames import LinkFrames
from codnn.hw.soc.nic import NicCore, NicSoc
from codnn.hw.soc.systolic import SystolicSoc
from codnn.hw.soc.tq import TqSoc
from codnn.hw.systolic import ColumnCombinedArray
from codnn.hw.tq.array import TermQuantArray
from codnn.hw.tq.encoder import TermEncoder
from codnn.hw.tq.layouts import sign_magnitude
from codnn.hw.tq.lister import TermLister
from codnn.hw.tq.mac import PMac, TMac
from codnn.hw.tq.revealer import TermRevealer

__all__ = ["ProofSpec", "PROOFS", "skid_top", "fmix32_top", "stream_engine_top",
           "FlatStream", "flat_axis_streams", "value_frames_top", "messages_top", "waits_top",
           "answers_top", "message_bytes_top", "header_counts_top", "settings_edge_top",
           "array_beats_top", "array_values_top", "array_banks_top", "array_latency_top",
           "inceptionn_value_top"]


@dataclass(frozen=True)
class ProofSpec:
    """A design with properties: ``build(**params)`` gives the top module; ``params``
    their defaults; ``mode`` and ``depth`` what shows them (k-induction closes at that
    depth); ``properties`` says what is asserted, in words; ``quick``: it ends in
    seconds and runs in the test suite (the others take minutes; ``codnn prove all``
    runs every proof)."""

    build: object
    params: dict
    mode: str
    depth: int
    properties: tuple
    quick: bool = True


def _in_flight(m, i, o, name, width=4):
    """Beats taken by ``i`` and not yet given by ``o``."""
    count = Signal(width, name=f"{name}_in_flight")
    m.d.sync += count.eq(count + (i.valid & i.ready) - (o.valid & o.ready))
    return count


def skid_top(width=8, order=False, dut_class=SkidOutput):
    """``codnn.hw.common.SkidOutput`` with a producer that writes any beat while ``free`` and an
    output ready at random: the stream rules on ``o`` and the beats held (``o.valid``
    plus the spare, which ``free`` shows) equal to those written and not yet given; with
    ``order``, the tracked beat instead. ``dut_class`` lets the tests put a broken skid
    in its place."""
    m = Module()
    no_reset(m)
    m.submodules.dut = dut = dut_class(unsigned(width))
    m.d.comb += [dut.write.eq(AnySeq(1)), dut.payload.eq(AnySeq(width)),
                 dut.o.ready.eq(AnySeq(1))]
    m.d.comb += Assume(~dut.write | dut.free)              # the producer's rule
    written = stream.Signature(unsigned(width)).create(path=("written",))
    m.d.comb += [written.valid.eq(dut.write), written.ready.eq(dut.free),
                 written.payload.eq(dut.payload)]
    if order:
        tracked = Tracker(m, written, dut.o, AnyConst(4))
        with m.If(tracked.at_out):
            m.d.comb += Assert(tracked.seen_in & (dut.o.payload == tracked.payload))
        return m
    stream_rules(m, dut.o, "o")
    in_flight = _in_flight(m, written, dut.o, "skid")
    m.d.comb += [Assert(in_flight == dut.o.valid + ~dut.free),
                 Assert(dut.o.valid | dut.free)]
    return m


def fmix32_top(latency_only=False):
    """``codnn.hw.common.Fmix32Unit`` (one lane) under ``stream_engine_top``'s environment, and
    its counts: at most ``latency`` beats in flight, never more out than in; with
    ``latency_only`` the sink is always ready and the property is the latency: a beat
    taken now is on ``o`` exactly 5 cycles later, and ``i`` is always ready."""
    dut = Fmix32Unit(lanes=1)
    m = stream_engine_top(dut)
    if latency_only:
        m.d.comb += Assume(dut.o.ready)
        taken = [Signal(name=f"taken_{k}") for k in range(dut.latency)]
        m.d.sync += taken[0].eq(dut.i.valid & dut.i.ready)
        m.d.sync += [taken[k].eq(taken[k - 1]) for k in range(1, dut.latency)]
        m.d.comb += [Assert(dut.o.valid == taken[-1]), Assert(dut.i.ready)]
        return m
    in_flight = _in_flight(m, dut.i, dut.o, "fmix32")
    m.d.comb += Assert(in_flight <= dut.latency)
    m.d.comb += Assert(beats(m, dut.o, "o") <= beats(m, dut.i, "i"))
    return m


def stream_engine_top(dut):
    """A component under any environment: each input stream from a source that keeps the
    stream rules (any beats: good messages, bad ones, cut ones), every other input
    (settings) changing at any cycle, each output stream's sink ready at random, and a
    reset at any cycle (with a message in flight too; the rule is not checked across a
    reset, whose cycle resets the check's register as well). The property: every output
    stream keeps the stream rules. Streams are ``lib.stream`` members and flat AXI4-Stream
    port groups (``{prefix}_tvalid``, ``_tready`` and the ``{prefix}_t*`` payload ports,
    ``tuser`` included: ``flat_axis_streams``)."""
    m = Module()
    m.submodules.dut = dut
    flat = flat_axis_streams(dut)
    grouped = {name for group in flat.values() for name in group.ports}
    for name, member in dut.signature.members.items():
        port = getattr(dut, name)
        if member.is_signature and isinstance(member.signature, stream.Signature):
            width = Shape.cast(member.signature.members["payload"].shape).width
            if member.flow == Flow.In:
                m.d.comb += [port.valid.eq(AnySeq(1)), port.payload.eq(AnySeq(width))]
                stream_rules(m, port, name, assume=True)
            else:
                m.d.comb += port.ready.eq(AnySeq(1))
                stream_rules(m, port, name)
        elif member.is_port and member.flow == Flow.In and name not in grouped:
            m.d.comb += port.eq(AnySeq(Shape.cast(member.shape).width))
    for prefix, group in flat.items():
        if group.input:
            m.d.comb += [port.eq(AnySeq(len(port))) for port in group.driven]
            stream_rules(m, group, prefix, assume=True)
        else:
            m.d.comb += group.ready.eq(AnySeq(1))
            stream_rules(m, group, prefix)
    return m


@dataclass
class FlatStream:
    """An AXI4-Stream port group as a stream: ``valid``, ``ready``, ``payload`` (the
    ``t*`` data ports, concatenated), ``input`` (the component takes it), ``driven`` (the
    ports its source drives but ``tready``), ``ports`` (every member name)."""

    valid: object
    ready: object
    payload: object
    input: bool
    driven: list
    ports: list


def flat_axis_streams(dut):
    """``FlatStream``s of ``dut``'s flat AXI4-Stream port groups with a ``tready``, by
    prefix (``s_axis``, ``m_axis``, ``s0_axis``...); a group without one (a MAC's
    receiver, which cannot wait) has no handshake to keep."""
    members = dut.signature.members
    groups = {}
    for name in members:
        if name.endswith("_tvalid") and f"{name[:-len('_tvalid')]}_tready" in members:
            prefix = name[:-len("_tvalid")]
            names = [n for n in members if n.startswith(f"{prefix}_t")]
            data_names = [n for n in names if n not in (f"{prefix}_tvalid", f"{prefix}_tready")]
            data_ports = [getattr(dut, n) for n in data_names]
            valid = getattr(dut, name)
            groups[prefix] = FlatStream(
                valid, getattr(dut, f"{prefix}_tready"), Cat(*data_ports),
                members[name].flow == Flow.In, [valid, *data_ports], names)
    return groups


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


def onchip_weights_top(word_bits, words):
    """The network engine's on-chip weight reader (``codnn.hw.network.OnChipWeights``)
    under ``stream_engine_top``'s environment, with the rules the engine keeps: a run
    starts (``start``, a count of 1 or more, as documented) only while ``o`` offers no
    word, and the memory is written only then too, not in a run's first cycle. Property:
    ``o`` keeps the stream rules."""
    dut = OnChipWeights(word_bits=word_bits, words=words)
    m = stream_engine_top(dut)
    m.d.comb += [Assume(~dut.start | ~dut.o.valid),
                 Assume(~dut.write.en | ~(dut.o.valid | dut.start))]
    with m.If(dut.start):
        m.d.comb += Assume(dut.count != 0)
    return m


def axi_weights_top(word_bits):
    """The network engine's AXI4 weight reader (``codnn.hw.network.AxiWeights``): a run
    of any count from any word at any cycle, but only once the previous run's bursts have
    all been asked for (``arvalid`` low, as the engine keeps it), ``clear`` at any cycle
    but a start's while ``o`` offers no word (a clear withdraws the word on offer: the
    engine clears only between runs, when its sequencer takes none), ``base`` any
    constant aligned to a word, its memory keeping AXI4's rule on the read data channel (``rvalid``
    held with its data until ``rready``) and ready at random, ``o``'s sink at random, a
    reset at any cycle. Properties: the read address channel keeps AXI4's rule
    (``arvalid`` held with the same address and length until ``arready``), every burst
    is aligned to a word and stays inside its 4 KB page (AXI4 forbids crossing one), and
    ``o`` keeps the stream rules."""
    dut = AxiWeights(word_bits=word_bits)
    m = Module()
    m.submodules.dut = dut
    axi = dut.axi
    base = AnyConst(32)
    m.d.comb += [dut.start.eq(AnySeq(1)), dut.addr.eq(AnySeq(len(dut.addr))),
                 dut.count.eq(AnySeq(len(dut.count))), dut.base.eq(base),
                 Assume(base[:ceil_log2(dut.stride)] == 0),
                 Assume(~dut.start | ~axi.arvalid), dut.clear.eq(AnySeq(1)),
                 Assume(~dut.clear | ~(dut.start | dut.o.valid)),
                 axi.arready.eq(AnySeq(1)), axi.rvalid.eq(AnySeq(1)),
                 axi.rdata.eq(AnySeq(len(axi.rdata))), axi.rresp.eq(AnySeq(2)),
                 axi.rlast.eq(AnySeq(1)), axi.rid.eq(0), dut.o.ready.eq(AnySeq(1))]
    read_data = FlatStream(axi.rvalid, axi.rready, Cat(axi.rdata, axi.rresp, axi.rlast),
                           True, [], [])
    address = FlatStream(axi.arvalid, axi.arready,
                         Cat(axi.araddr, axi.arlen, axi.arsize, axi.arburst, axi.arid),
                         False, [], [])
    stream_rules(m, read_data, "r", assume=True)
    stream_rules(m, address, "ar")
    stream_rules(m, dut.o, "o")
    end = Signal(14, name="burst_end")             # one past the burst's last byte in page
    m.d.comb += end.eq(axi.araddr[:12] + (axi.arlen + 1) * dut.stride)
    with m.If(axi.arvalid):
        m.d.comb += [Assert(end <= 4096),
                     Assert(axi.araddr[:ceil_log2(dut.stride)] == 0)]
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


def array_beats_top(dut):
    """An array (``codnn.hw.common.ws_array.WeightStationaryArray``) under the environment of
    ``stream_engine_top`` (a reset at any cycle included): one result beat per data beat,
    never one before its data beat (results out at most data beats in), and at most
    ``fifo_depth`` data beats whose results have not left (the shell's credit)."""
    m = stream_engine_top(dut)
    in_flight = _in_flight(m, dut.data, dut.result, "array",
                           width=(dut.fifo_depth + 1).bit_length() + 1)
    m.d.comb += [Assert(beats(m, dut.result, "result") <= beats(m, dut.data, "data")),
                 Assert(in_flight <= dut.fifo_depth),
                 Cover(in_flight == dut.fifo_depth)]      # the bound is reached (cover mode)
    return m


def array_values_top(dut, reset=True):
    """A weight-stationary array without an output stage (the column-combined array,
    ``codnn.hw.systolic.ColumnCombinedArray``, or the TQ array,
    ``codnn.hw.tq.array.TermQuantArray``) under ``stream_engine_top``'s environment, a
    reset at any cycle unless ``reset`` is False, against a model of its tiles: the weight
    beats since the reset, ``rows`` to a tile, and the data beats, a tile ending at
    ``last``. The property: the k-th result since the reset (any k < 16, an ``AnyConst``)
    is the k-th data beat's ``wrap(psum + sum of the row's products)`` (``_products``)
    with the weights of that beat's tile and its ``last``: no beat computes with another
    tile's bank (nor a bank being written), and after a reset nothing of the aborted work
    comes out."""
    m = stream_engine_top(dut)
    if not reset:
        no_reset(m)
    R = dut.rows
    tiles = 4                       # the shell holds at most 2 tiles ahead of the data
    row_layout = dut.weights.payload.shape()
    rows = [[Signal(row_layout, name=f"model_w{t}_r{r}") for r in range(R)]
            for t in range(tiles)]
    weight_count = Signal(range(tiles * R), name="model_weight_beats")
    data_tile = Signal(range(tiles), name="model_data_tile")
    weights, beat = dut.weights, dut.data
    with m.If(weights.valid & weights.ready):
        for t in range(tiles):
            for r in range(R):
                with m.If(weight_count == t * R + r):
                    m.d.sync += rows[t][r].eq(weights.payload)
        m.d.sync += weight_count.eq(Mux(weight_count == tiles * R - 1, 0, weight_count + 1))
    with m.If(beat.valid & beat.ready & beat.payload.last):
        m.d.sync += data_tile.eq(data_tile + 1)
    # The result the current data beat must give (its tile's weights), offered as a
    # stream beside the data.
    acc = [Signal(signed(len(dut.result.payload.acc[r])), name=f"model_acc_r{r}")
           for r in range(R)]
    for r in range(R):
        row = row_layout(_select(data_tile, [Value.cast(rows[t][r]) for t in range(tiles)]))
        m.d.comb += acc[r].eq(sum(_products(dut, row, beat.payload.x), beat.payload.psum[r]))
    expected = stream.Signature(unsigned(len(Cat(*acc)) + 1)).create(path=("expected",))
    m.d.comb += [expected.valid.eq(beat.valid), expected.ready.eq(beat.ready),
                 expected.payload.eq(Cat(*acc, beat.payload.last))]
    tracked = Tracker(m, expected, dut.result, AnyConst(4))
    with m.If(tracked.at_out):
        m.d.comb += Assert(tracked.seen_in & (Cat(*dut.result.payload.acc,
                                                  dut.result.payload.last)
                                              == tracked.payload))
    # Cover mode: a result of a beat past the second tile's first is checked.
    m.d.comb += Cover(tracked.at_out & (data_tile >= 2))
    return m


def _products(dut, row, x):
    """The products one array row adds to its partial sum for the data ``x`` (semantics
    sections 2 and 3): the column-combined array's ``w[g] * x[g][sel[g]]``; the TQ
    array's, for each weight term of each queue, ``(-1)**neg * 2**exp`` times the data
    value it names, truncated to its top ``beta`` terms (a table, as
    ``codnn.golden.term_quant.truncate``)."""
    if isinstance(dut, ColumnCombinedArray):
        return [row[g].w * _select(row[g].sel, [x[g][a] for a in range(dut.alpha)])
                for g in range(dut.cols)]
    mb = dut.mag_bits
    table = Array(C(int(v), mb + 1)
                  for v in truncate(np.arange(1 << mb), dut.beta, dut.encoding, mb))
    products = []
    for c in range(dut.cols):
        for i in range(dut.alpha):
            term = row[c][i]
            value = sign_magnitude(mb)(_select(term.idx, [Value.cast(x[c][j])
                                                          for j in range(dut.g)]))
            magnitude = table[value.mag] << term.exp
            negative = term.neg ^ value.neg
            products.append(Mux(term.valid, Mux(negative, -magnitude, magnitude), 0))
    return products


def array_banks_top(dut):
    """The column-combined array (``codnn.hw.systolic.ColumnCombinedArray``) with its
    inputs driven anyhow at every cycle (``valid``, ``last``, ``ready``: no stream rule
    assumed), a reset at any cycle, beside ghost numbers: each tile's number (mod 4) as
    its weights are taken (``wt``) and as its data are (``dt``), and each cell's number of
    the tile whose weights it last wrote in each bank, from the cell's own write enable.
    The property: whenever a cell reads a bank for a beat in flight (``_read_stages``),
    it reads the beat's bank, and that bank holds the beat's tile's weights in that cell:
    no tile computes with a bank being written or with another tile's. With it, the
    invariants that make it inductive: the banks' states and the tiles they hold
    (``_WeightBanks``)."""
    if not isinstance(dut, ColumnCombinedArray):
        raise ValueError("The weight-bank proof takes the column-combined array")
    m = Module()
    m.submodules.dut = dut
    for port in (dut.weights.valid, dut.weights.payload, dut.data.valid, dut.data.payload,
                 dut.result.ready, *([dut.shift] if dut.out_bits is not None else [])):
        m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
    m.submodules.banks = _WeightBanks(dut)
    return m


def _read_stages(dut, r, c):
    """For each bank that cell (r, c) of ``dut`` reads with (``formal_state.reads``, in
    the order first read), the stages of the valid pipe whose beat it reads for: stage i
    holds the beat taken i + 1 cycles ago, stage -1 the beat being taken. A parallel cell
    reads its weight for the beat at stage ``c + rows-1 - r`` and its stream select a
    cycle ahead; a bit-serial cell reads its weight for each of a beat's ``data_bits``
    bits, the first at stage ``c + rows - r`` (the edge registers the beat first)."""
    if dut.mac == "parallel":
        weight = c + dut.rows - 1 - r
        return [[weight], [weight - 1]]
    return [[c + dut.rows - r + bit for bit in range(dut.data_bits)]]


class _WeightBanks(Elaboratable):
    """``array_banks_top``'s ghost numbers and properties, built once ``dut`` has been
    elaborated for the formal platform (its ``formal_state``)."""

    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        dut, m = self.dut, Module()
        k, R, C = dut.formal_state, dut.rows, dut.cols
        wt, dt = Signal(2, name="ghost_weight_tile"), Signal(2, name="ghost_data_tile")
        with m.If(k.weights_go & (k.load_row == R - 1)):
            m.d.sync += wt.eq(wt + 1)
        with m.If(k.data_go & dut.data.payload.last):
            m.d.sync += dt.eq(dt + 1)
        # The tile number a weight write carries: a beat's tag reaches cell (r, c) 1 + c +
        # R-1-r cycles after the beat is taken; a beat in the valid pipe's stage i was
        # taken i + 1 cycles ago.
        w_line = delay_line(m, wt, R + C, "ghost_weight_tile")
        carried = [[w_line[c + R - r] for c in range(C)] for r in range(R)]
        d_line = delay_line(m, dt, dut.pipeline_depth, "ghost_data_tile")
        ghost = [[[Signal(2, name=f"ghost_b{b}_r{r}_c{c}", reset_less=True)
                   for c in range(C)] for r in range(R)] for b in range(2)]
        for r in range(R):
            for c in range(C):
                enable, bank = k.writes[r][c]
                with m.If(enable):
                    banks = Array([ghost[0][r][c], ghost[1][r][c]])
                    m.d.sync += banks[bank].eq(carried[r][c])
                    # A tile's weights go to the bank of its number.
                    m.d.comb += Assert(bank == carried[r][c][0])
        # age: cycles since row r of bank b was last taken (saturating); the row's write
        # to cell (r, c) shows once its age is c + R - r.
        age = [[Signal(range(R + C + 1), name=f"ghost_age_b{b}_r{r}") for r in range(R)]
               for b in range(2)]
        for b in range(2):
            for r in range(R):
                with m.If(k.weights_go & (k.load_bank == b) & (k.load_row == r)):
                    m.d.sync += age[b][r].eq(0)
                with m.Elif(age[b][r] != R + C):
                    m.d.sync += age[b][r].eq(age[b][r] + 1)
                m.d.comb += Assert(age[b][r] <= R + C)

        def holds(b, r, number):        # row r of bank b, once written, holds ``number``
            return [Assert((age[b][r] < c + R - r) | (ghost[b][r][c] == number))
                    for c in range(C)]
        # The property, at every read of a bank for a beat in flight.
        for r in range(R):
            for c in range(C):
                for read, stages in zip(k.reads[r][c], _read_stages(dut, r, c), strict=True):
                    for s in stages:
                        if s < 0:
                            valid, bank, number = k.data_go, k.use_bank, dt
                        else:
                            valid, bank = k.pipe_valid[s], k.pipe_bank[s]
                            number = d_line[s + 1]
                        held = Mux(read, ghost[1][r][c], ghost[0][r][c])
                        m.d.comb += Assert(~valid | ((read == bank) & (held == number)))
        # Cover mode: the last cell reads a bank again, for a beat of the third tile.
        final = max(max(stages) for stages in _read_stages(dut, 0, C - 1))
        m.d.comb += Cover(k.pipe_valid[final] & (d_line[final + 1] == 2))
        # The invariants: the banks' states, and the tile each bank holds.
        ahead = (wt - dt)[:2]
        m.d.comb += [Assert(k.use_bank == dt[0]), Assert(k.load_bank == wt[0]),
                     Assert(ahead <= 2)]

        def tile(bank):                 # the number of the tile a FULL or BUSY bank holds
            full = k.bank_state[bank] == BANK_FULL
            return Mux(k.use_bank == bank, Mux(full, dt, dt - 2), Mux(full, dt + 1, dt - 1))[:2]
        for b in range(2):
            state, mine = k.bank_state[b], k.use_bank == b
            m.d.comb += [
                Assert(state != 3),
                Assert(~(mine & (state == BANK_FULL)) | (ahead != 0)),
                Assert(~(~mine & (state == BANK_FULL)) | (ahead == 2)),
                Assert(~(mine & (state == BANK_BUSY)) | (ahead == 0)),
                Assert(~(~mine & (state == BANK_BUSY)) | (ahead != 2)),
            ]
            # Each row of a FULL or BUSY bank, and of a bank loaded at the next edge, holds
            # its tile once written; so does each row taken of the tile being loaded.
            with m.If((state == BANK_FULL) | (state == BANK_BUSY)):
                m.d.comb += [check for r in range(R) for check in holds(b, r, tile(b))]
            with m.If(k.loaded & (k.loaded_bank == b)):
                m.d.comb += [check for r in range(R) for check in holds(b, r, (wt - 1)[:2])]
            for r in range(R):
                with m.If((k.load_bank == b) & (k.load_row > r)):
                    m.d.comb += holds(b, r, wt)
        # A tile being loaded: its bank is EMPTY.
        with m.If(k.load_row != 0):
            m.d.comb += Assert(k.bank_state[k.load_bank] == BANK_EMPTY)
        # The tiles taken ahead of the data: each bank FULL, or loaded at the next edge.
        for bank, taken in ((k.use_bank, ahead != 0), (~k.use_bank, ahead == 2)):
            with m.If(taken):
                m.d.comb += Assert((k.bank_state[bank] == BANK_FULL)
                                   | (k.loaded & (k.loaded_bank == bank)))
        # A loaded tile's bank is EMPTY until the edge after, and it is the tile before wt.
        with m.If(k.loaded):
            m.d.comb += [Assert(k.bank_state[k.loaded_bank] == BANK_EMPTY),
                         Assert(k.loaded_bank != wt[0]),
                         Assert(ahead == Mux(k.loaded_bank == k.use_bank, 1, 2))]
        # A beat in flight: its bank is FULL with its tile (not yet ended) or BUSY.
        for i in range(dut.pipeline_depth):
            bank = k.pipe_bank[i]
            state = k.bank_state[bank]
            with m.If(k.pipe_valid[i]):
                m.d.comb += [
                    Assert((state == BANK_BUSY) | ((state == BANK_FULL) & ~k.pipe_last[i]
                                                   & (bank == k.use_bank))),
                    Assert(d_line[i + 1] == tile(bank))]
        # A weight write is of the tile its bank holds (the tail of its load: FULL or
        # BUSY), or of the tile loading, or of the one just loaded (EMPTY); once no beat
        # taken before a reset can still be writing.
        settled = Signal(range(R + C + 1), name="ghost_since_reset")
        with m.If(settled != R + C):
            m.d.sync += settled.eq(settled + 1)
        m.d.comb += Assert(settled <= R + C)
        for r in range(R):
            for c in range(C):
                enable, bank = k.writes[r][c]
                with m.If(enable & (settled == R + C)):
                    m.d.comb += Assert(carried[r][c] == Mux(
                        k.bank_state[bank] != BANK_EMPTY, tile(bank),
                        Mux(bank == k.load_bank, wt, wt - 1))[:2])
        return m


def _select(index, values):
    """``values[index]`` as a chain of multiplexers (the last one past the end)."""
    chosen = values[-1]
    for k in reversed(range(len(values) - 1)):
        chosen = Mux(index == k, values[k], chosen)
    return chosen


def array_latency_top(dut):
    """An array under ``stream_engine_top``'s environment (a reset at any cycle) with its
    result sink always ready: each result leaves exactly ``dut.latency`` cycles after its
    data beat was taken (the documented latency), and no result leaves otherwise."""
    m = stream_engine_top(dut)
    m.d.comb += Assume(dut.result.ready)
    taken = [Signal(name=f"taken_{k}") for k in range(dut.latency)]
    m.d.sync += taken[0].eq(dut.data.valid & dut.data.ready)
    m.d.sync += [taken[k].eq(taken[k - 1]) for k in range(1, dut.latency)]
    m.d.comb += Assert(dut.result.valid == taken[-1])
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


def _streams_proof(factory, params, what):
    """The stream rules of every output of ``factory(**params)``, proved by k-induction."""
    return ProofSpec(lambda **settings: stream_engine_top(factory(**settings)), params,
                     "prove", 3, (f"{what}: every output stream keeps the stream rules "
                                  "whatever its inputs (good, bad or cut messages), its "
                                  "settings and its sinks do",))


#: Engines whose first output frame lies past what bmc reaches: the Rice loopback gives
#: nothing before its compressor has coded a block of 16 values and its decompressor
#: decoded it (depth 16 sees no frame, depth 40 did not end in 10 minutes).
_FRAMES_OUT_OF_REACH = {"rice_loopback"}


#: Each NIC engine's longest input wait with its output always ready (``waits_top``, one
#: lane, ``max_values`` 4) and the bmc depth that shows it: a bound one cycle shorter
#: fails within a few cycles, this one holds to the depth (any settings at any cycle, so
#: the waits include a message taken in ``bypass`` waiting for the previous message's
#: values to leave).
_INPUT_WAITS = {"compressor": (4, 16), "decompressor": (15, 20), "terngrad": (4, 16),
                "terngrad_decoder": (6, 16), "maxabs": (4, 16)}


#: The engines whose settings proof runs, and its depth: past the first output beat. The
#: two-copy check grows fast with depth (the compressor: 9.6 s at 4, 46 s at 8, over 600 s
#: at 12, short of its latency of 12 and the first value beat out), so the engines with
#: long pipelines are not listed.
_SETTINGS_DEPTHS = {"terngrad_decoder": 6}


def _array(rows, cols, alpha, bitserial):
    return ColumnCombinedArray(rows=rows, cols=cols, alpha=alpha,
                               mac="bitserial" if bitserial else "parallel", out_bits=8)


def _tq_array(rows, cols, g, alpha, beta):
    return TermQuantArray(rows=rows, cols=cols, g=g, alpha=alpha, beta=beta)


def _link_answers(timeout, stall, answer):
    """``link_answers_top`` on the link's frames, its bounds checked before they are
    built."""
    check_answer_bounds(timeout, stall, answer)
    return link_answers_top(LinkFrames(timeout=timeout), stall, answer)


#: The TQ array the proofs take by default.
_TQ_PARAMS = {"rows": 2, "cols": 2, "g": 2, "alpha": 2, "beta": 1}


PROOFS = {
    "skid": ProofSpec(skid_top, {"width": 8}, "prove", 4, (
        "o keeps the stream rules (a beat held stays, unchanged)",
        "the beats held (o.valid, and the spare while free is low) are the beats written "
        "and not yet given; the spare holds one only behind o")),
    "skid_order": ProofSpec(lambda width=8: skid_top(width, order=True), {"width": 8},
                            "bmc", 12, (
        "the k-th beat out is the k-th beat written (any k < 16): no loss, reorder or "
        "copy",)),
    "fmix32": ProofSpec(fmix32_top, {}, "bmc", 12, (
        "o keeps the stream rules whatever the sink does",
        "at most 5 beats in flight; never more beats out than in")),
    "fmix32_latency": ProofSpec(lambda: fmix32_top(latency_only=True), {}, "prove", 8, (
        "with the sink always ready: i always ready, and each beat out exactly 5 cycles "
        "after it went in",)),
    **{name: _streams_proof(lambda lanes, e=engine: e.component(lanes=lanes), {"lanes": 1},
                            f"the {name}") for name, engine in NIC_ENGINES.items()},
    **{f"{name}_frames": ProofSpec(
        lambda lanes, max_values, e=engine: value_frames_top(e, lanes, max_values),
        {"lanes": 1, "max_values": 20}, "bmc", 16, (
            f"the {name}: every output frame is a descriptor with a count n of at most "
            f"max_values, then exactly ceil(n / lanes) value beats, last on the final one "
            f"only, whatever bytes come in",), quick=False)
       for name, engine in NIC_ENGINES.items()
       if engine.gives == "values" and name not in _FRAMES_OUT_OF_REACH},
    **{f"{name}_messages": ProofSpec(
        lambda lanes, e=engine: messages_top(e.component(lanes=lanes)), {"lanes": 1}, "bmc", 12, (
            f"the {name}: no output message begins before an input message has, one out "
            f"for each in at most, whatever the messages, the sink and the resets do",),
        quick=False)
       for name, engine in NIC_ENGINES.items()},
    **{f"{name}_waits": ProofSpec(
        lambda lanes, max_values, wait, e=NIC_ENGINES[name]: waits_top(
            e.component(lanes=lanes, max_values=max_values), wait),
        {"lanes": 1, "max_values": 4, "wait": wait}, "bmc", depth, (
            f"the {name} with its output always ready: an input beat on offer is taken "
            f"within {wait} cycles, whatever the messages and the settings are",),
        quick=False)
       for name, (wait, depth) in _INPUT_WAITS.items()},
    "terngrad_bytes": ProofSpec(
        lambda max_values: message_bytes_top(
            NIC_ENGINES["terngrad"].component(lanes=1, max_values=max_values), max_values,
            terngrad_message_size),
        {"max_values": 4}, "bmc", 20, (
            "the TernGrad encoder with good value messages in and its sink at random: each "
            "message out carries exactly message_size(n) bytes (codnn.golden.terngrad: the "
            "8-byte header and ceil(n / 4) code bytes) for the n values of its message in",),
        quick=False),
    "terngrad_decoder_counts": ProofSpec(
        lambda lanes, max_values: header_counts_top(
            NIC_ENGINES["terngrad_decoder"].component(lanes=lanes, max_values=max_values),
            max_values),
        {"lanes": 1, "max_values": 4}, "bmc", 12, (
            "the TernGrad decoder with messages of any bytes past a header whose count is "
            "at most max_values (cut short, too long, any scaler and codes): each output "
            "frame's count is its input message's header count, and the frame is that "
            "many values",), quick=False),
    "maxabs_answers": ProofSpec(
        lambda max_values, answer: answers_top(MaxAbs(lanes=1, max_values=max_values),
                                               max_values, answer),
        {"max_values": 4, "answer": 4}, "bmc", 14, (          # MaxAbs.latency at one lane
            "max-abs with good value messages in, its output always ready: each message's "
            "maximum leaves at most its latency (4 cycles at one lane) after the message's "
            "last beat was taken",), quick=False),
    **{f"{name}_settings": ProofSpec(
        lambda lanes, max_values, e=NIC_ENGINES[name]: settings_edge_top(e, lanes, max_values),
        {"lanes": 1, "max_values": 20}, "bmc", depth, (
            f"the {name}: two copies, one with each message's settings held as documented, "
            f"the other with the same values only at the edge that takes a message's first "
            f"beat and any at every other cycle, give the same outputs (streams, readies, "
            f"counters, flags) at every cycle",))
       for name, depth in _SETTINGS_DEPTHS.items()},
    "systolic": _streams_proof(_array, {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0},
                               "the column-combined array (weights, data, results)"),
    "tq_array": _streams_proof(_tq_array, _TQ_PARAMS, "the TQ array"),
    "systolic_beats": ProofSpec(
        lambda **settings: array_beats_top(_array(**settings)),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0}, "bmc", 24, (
            "the column-combined array: never more results out than data beats in, and at "
            "most fifo_depth data beats whose results have not left, whatever its inputs, "
            "sinks and resets do",), quick=False),
    "systolic_values": ProofSpec(
        lambda rows, cols, alpha, bitserial, reset: array_values_top(ColumnCombinedArray(
            rows=rows, cols=cols, alpha=alpha, weight_bits=2, data_bits=2, acc_bits=4,
            mac="bitserial" if bitserial else "parallel"), reset=bool(reset)),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0, "reset": 1}, "bmc", 16, (
            "the column-combined array (2-bit weights and data, 4-bit sums): the k-th "
            "result since a reset is the k-th data beat's sum with its own tile's weights: "
            "no tile computes with a bank being written or another tile's, and nothing of "
            "the work before a reset comes out after it",)),
    "tq_array_values": ProofSpec(
        lambda rows, cols, g, alpha, beta, reset: array_values_top(TermQuantArray(
            rows=rows, cols=cols, g=g, alpha=alpha, beta=beta, mag_bits=2, acc_bits=6),
            reset=bool(reset)),
        {"rows": 2, "cols": 2, "g": 2, "alpha": 2, "beta": 1, "reset": 1}, "bmc", 22, (
            "the TQ array (2-bit magnitudes, 6-bit sums): the k-th result since a reset is "
            "the k-th data beat's sum of its weight terms times the data values they name, "
            "truncated to beta terms, with its own tile's weights; nothing of the work "
            "before a reset comes out after it",), quick=False),
    "systolic_banks": ProofSpec(
        lambda rows, cols, alpha, bitserial: array_banks_top(ColumnCombinedArray(
            rows=rows, cols=cols, alpha=alpha, weight_bits=2, data_bits=2, acc_bits=4,
            mac="bitserial" if bitserial else "parallel")),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0}, "prove", 8, (
            "the column-combined array, its inputs anyhow and a reset at "
            "any cycle: whenever a cell reads a bank for a beat in flight, the bank holds "
            "that beat's tile's weights in that cell (written by the tile's own weight "
            "beat, and not since): no tile computes with a bank being written or with "
            "another tile's",)),
    "systolic_latency": ProofSpec(
        lambda **settings: array_latency_top(_array(**settings)),
        {"rows": 2, "cols": 2, "alpha": 2, "bitserial": 0}, "bmc", 20, (
            "the column-combined array with its result sink always ready: each result "
            "leaves exactly its latency after its data beat went in, and none otherwise",)),
    "tq_array_latency": ProofSpec(
        lambda **settings: array_latency_top(_tq_array(**settings)), _TQ_PARAMS, "bmc", 24, (
            "the TQ array with its result sink always ready: each result leaves exactly "
            "its latency after its data beat went in, and none otherwise",), quick=False),
    "tq_array_beats": ProofSpec(
        lambda **settings: array_beats_top(_tq_array(**settings)), _TQ_PARAMS, "bmc", 24, (
            "the TQ array: never more results out than data beats in, and at most "
            "fifo_depth data beats whose results have not left",), quick=False),
    "inceptionn_value": ProofSpec(inceptionn_value_top, {}, "prove", 1, (
        "every float32 and every bound 7..15 through the INCEPTIONN-style compressor's "
        "class and payload and the decompressor's decode: the value of semantics "
        "section 4's table, and a finite |x| < 1 within 2**-b below |x|, its sign kept",)),
    "block_dot": _streams_proof(lambda g: BlockDot(g=g), {"g": 4}, "the block dot unit"),
    "term_encoder": _streams_proof(
        lambda lanes, mag_bits: TermEncoder(lanes=lanes, mag_bits=mag_bits),
        {"lanes": 2, "mag_bits": 7}, "the TQ term encoder"),
    "term_revealer": _streams_proof(
        lambda lanes, group, budget, mag_bits: TermRevealer(
            lanes=lanes, group=group, budget=budget, mag_bits=mag_bits),
        {"lanes": 2, "group": 2, "budget": 3, "mag_bits": 7}, "the TQ term revealer"),
    "term_lister": _streams_proof(
        lambda lanes, slots, mag_bits: TermLister(lanes=lanes, slots=slots, mag_bits=mag_bits),
        {"lanes": 2, "slots": 3, "mag_bits": 7}, "the TQ term lister"),
    "tmac": _streams_proof(lambda mag_bits, acc_bits: TMac(mag_bits=mag_bits, acc_bits=acc_bits),
                           {"mag_bits": 7, "acc_bits": 16}, "the term-pair MAC"),
    "pmac": _streams_proof(lambda mag_bits, acc_bits: PMac(mag_bits=mag_bits, acc_bits=acc_bits),
                           {"mag_bits": 7, "acc_bits": 16}, "the parallel MAC"),
    "gather": _streams_proof(
        lambda cols, alpha, lanes, depth: Gather(cols=cols, alpha=alpha, lanes=lanes,
                                                 depth=depth),
        {"cols": 2, "alpha": 3, "lanes": 2, "depth": 8},
        "the network engine's gather (its starts, geometry, table and writes at any cycle)"),
    "onchip_weights": ProofSpec(
        onchip_weights_top, {"word_bits": 16, "words": 16}, "prove", 3, (
            "the network engine's on-chip weight reader, its runs started and its memory "
            "written only while no word is on offer: o keeps the stream rules",)),
    "axi_weights": ProofSpec(axi_weights_top, {"word_bits": 32}, "prove", 3, (
        "the network engine's AXI4 weight reader: the read address channel keeps AXI4's "
        "handshake rule, every burst is word-aligned and inside its 4 KB page, and o "
        "keeps the stream rules, for any runs from any word",)),
    "frame_path": _streams_proof(
        lambda decompress, width, max_frame: FramePath(
            direction="decompress" if decompress else "compress", width=width,
            max_frame=max_frame),
        {"decompress": 0, "width": 1, "max_frame": 64},
        "the frame path (any frames, good, bad, cut or too long)"),
    "ring_links": dataclasses.replace(_streams_proof(
        lambda nodes, lanes: RingLinks(nodes=nodes, lanes=lanes), {"nodes": 2, "lanes": 1},
        "the emulated ring's links (each node's flat AXI4-Stream ports)"), quick=False),
    "nic_core": _streams_proof(
        lambda lanes, quiet: NicCore(NIC_ENGINES["terngrad_decoder"].component(lanes=lanes),
                                     quiet=quiet),
        {"lanes": 1, "quiet": 64},
        "the NIC engines' SoC shell (its configuration, data and result streams; the "
        "TernGrad decoder inside)"),
    "host_link": _streams_proof(
        lambda divisor: HostLink(divisor=divisor), {"divisor": 4},
        "the host link (its request, response and response data streams, the UART line "
        "any bits)"),
    "link_frames": _streams_proof(
        lambda timeout: LinkFrames(timeout=timeout), {"timeout": 14},
        "the host link's frames (the bytes they send and the requests they offer, any "
        "bytes in)"),
    "soc_reset": ProofSpec(
        lambda rows, cols, depth: soc_reset_top(SystolicSoc(
            rows=rows, cols=cols, weight_bits=2, data_bits=2, acc_bits=4, depth=depth,
            link=LinkPorts())),
        {"rows": 2, "cols": 2, "depth": 1}, "prove", 4, (
            "the systolic array's board top, its requests any at any cycle as the link "
            "gives them and a reset at any cycle: RUN and WRITE_DATA are answered OK only "
            "when every weight row has been written since the last RESET (RESET forgets "
            "every row), NO_WEIGHTS only when one has not, and a response header comes "
            "only for a request taken",)),
    "tq_soc_reset": ProofSpec(
        lambda rows, cols, depth: soc_reset_top(TqSoc(
            rows=rows, cols=cols, g=2, alpha=2, beta=1, mag_bits=3, acc_bits=8, depth=depth,
            link=LinkPorts())),
        {"rows": 2, "cols": 2, "depth": 1}, "prove", 4, (
            "the TQ array's board top, as soc_reset: RUN and WRITE_DATA answered OK only "
            "with every weight row written since the last RESET, NO_WEIGHTS only without",)),
    "nic_soc_reset": ProofSpec(
        lambda lanes, depth: soc_reset_top(NicSoc(kind="terngrad_decoder", lanes=lanes,
                                                  depth=depth, link=LinkPorts())),
        {"lanes": 2, "depth": 2}, "prove", 4, (
            "a NIC engine's board top (the TernGrad decoder), as soc_reset: RUN and "
            "WRITE_DATA answered OK only with the configuration word written since the "
            "last RESET, NO_WEIGHTS only without",)),
    "host_link_answers": ProofSpec(
        lambda timeout, stall, answer: _link_answers(timeout, stall, answer),
        {"timeout": 14, "stall": 1, "answer": 12}, "prove", 4, (
            "the host link's frames, any bytes in at any cycles, the sink ready once in "
            "every stall + 1 cycles, the executor anyhow but answering only a request it "
            "took: every frame sent is whole (SYNC, status, length, the bytes, their "
            "CRC), an error answer when no request is served",
            "a frame received is decided by its MAX_PAYLOAD + 6-th byte, one too long "
            "dropped by its length + 6-th, neither outlives timeout quiet cycles; an "
            "error found is answered within answer cycles; the line quiet for timeout + "
            "answer + 2 cycles with no request on offer or served, the link waits for a "
            "SYNC",
            "a frame is offered as a request exactly when its CRC is right (a ghost "
            "CRC-16 of the frame received), else answered BAD_CRC; one longer than "
            "MAX_PAYLOAD is dropped with BAD_LENGTH")),
}
