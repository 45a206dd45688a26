"""INCEPTIONN-style gradient compressor (docs/semantics.md section 4): ``lanes`` float32
per cycle in, compressed messages out on a stream of the same width."""

import operator
from dataclasses import dataclass, field

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.inceptionn import BLOCK, DEFAULT_BOUND_BITS, MAX_BLOCK_BYTES
from codnn.hw.common.counters import counter
from codnn.hw.common.delays import carry, stage
from codnn.hw.common.trees import balanced
from codnn.hw.nic.engine_base import NicEngineBase, count_errors
from codnn.hw.nic.inceptionn_format import (Thresholds, clamp_bound_bits, classify_value,
                                            half_prefixes, offsets_from_halves,
                                            value_payload)
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.packer import BytePacker, packer_latency
from codnn.hw.nic.reader import Item, MessageReader

__all__ = ["InceptionnCompressor", "compressor_latency"]

#: Chunks the queue in front of the byte packer holds (one distributed-RAM column); the
#: credits keep two entries free, so a write never meets a full queue.
_QUEUE_DEPTH = 16


def compressor_latency(lanes):
    """Cycles from a group's last input beat to its first byte in an output beat: read,
    classify, payloads, offsets (2), place (from 8 lanes on), blocks (and with 16 lanes
    the second block after the first), the chunk, the chunk queue (2), then the byte
    packer."""
    return 9 + (lanes >= 8) + (lanes > 8) + packer_latency(4 * lanes)


@dataclass(slots=True)
class _Stages:
    """What the compressor's stages share, each field set by the stage named above it;
    ``in_flight``: each stage's term of the credits, added where the stage is built."""

    in_flight: list = field(default_factory=list)
    # _queue: the byte packer, the chunk queue in front of it, room for a beat.
    packer: BytePacker = None
    queue: fifo.SyncFIFOBuffered = None
    room: Signal = None
    # _read: the message reader and the bound's thresholds.
    reader: MessageReader = None
    thresholds: Thresholds = None
    # _classify: the item registered and each value's class and payload shift.
    item: Signal = None
    classes: Signal = None
    # _group: a group's tags, payloads and (valid, last, blocks), or a chunk.
    tags: Signal = None
    payloads: Signal = None
    group: dict = None
    chunk2: Signal = None
    chunk2_valid: Signal = None
    # _offsets: the tags, payloads and each value's byte offset in its block, stage 5.
    tags3: Signal = None
    payloads3: Signal = None
    offsets3: Signal = None
    group3: object = None
    raw3: object = None
    # _blocks: the last stage's block, its length, its group and raw chunk.
    block_data: Value = None
    block_length: Value = None
    group_out: object = None
    raw_out: object = None


class InceptionnCompressor(NicEngineBase):
    """Compress value messages into INCEPTIONN-style messages, ``lanes`` values per beat.

    Input: a descriptor beat with the count ``n`` (``codnn.hw.nic.layouts``), then the value
    beats, ``last`` on the final one. Output: the compressed message (4-byte count, then
    ``ceil(n/8)`` blocks) as full beats of ``4 * lanes`` bytes, the final one keeping what
    is left, ``last`` set. ``bound_bits`` and ``bypass`` are sampled at the clock edge that
    takes the message's descriptor beat (so they may change from the next cycle on); in
    bypass the message's beats pass through unchanged (repacked as full beats).

    Defined behaviour on bad input (a bad message raises ``error`` (sticky) and counts
    once in ``error_count``): ``bound_bits`` outside 7..15 is clamped into that range; a
    message whose input ends before ``n`` values is padded with zeros up to ``n``; beats
    past the ``n``-th value are dropped up to the input's ``last``; a count above
    ``max_values`` gives no output, the message dropped up to its ``last``. The next
    message is read normally either way.

    Latency: ``latency`` cycles from a group's last beat (8 values, or the message's end)
    to its first compressed byte in an output beat: 8 stages (read, classify, payloads,
    offsets in 2 steps, place, blocks, chunk; place and blocks are one stage below 8
    lanes; one more with 16 lanes, the second block after the first), the chunk queue
    (2) and the byte packer's ``2 + ceil(log2(4 * lanes) / 3)``: 14 with 8 lanes. The
    stages never stall: the input is taken while the queue has room for every chunk on
    its way (credits). Throughput:
    one input beat per cycle while the compressed blocks average at most ``4 * lanes``
    bytes per input beat and the output is not backpressured; a message end costs the
    cycles its compressed tail takes to leave.

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1).

    Attributes
    ----------
    i : In(stream.Signature(beat_layout(4 * lanes)))
    o : Out(stream.Signature(beat_layout(4 * lanes)))
    bound_bits : In(4)
        ``b`` of the error bound ``2**-b``.
    bypass : In(1)
    error : Out(1)
    error_count : Out(16)
        Bad messages seen, saturating.
    """

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"bound_bits": In(4, init=DEFAULT_BOUND_BITS), "bypass": In(1),
             "error": Out(1), "error_count": Out(16)}

    def __init__(self, *, lanes=8, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    latency = property(lambda self: compressor_latency(self.lanes),
                       doc="Cycles from a group's last input beat to its first byte in an "
                           "output beat.")

    @property
    def blocks_per_group(self):
        """Blocks packed together: ``max(1, lanes / 8)``."""
        return max(1, self.lanes // BLOCK)

    @property
    def beats_per_group(self):
        """Input beats that make one group: ``max(1, 8 / lanes)``."""
        return max(1, BLOCK // self.lanes)

    def elaborate(self, platform):
        m = Module()
        k = _Stages()
        self._queue(m, k)
        self._read(m, k)
        self._classify(m, k)
        self._group(m, k)
        self._offsets(m, k)
        self._blocks(m, k)
        self._chunk(m, k)
        return m

    def _queue(self, m, k):
        """The byte packer and the chunk queue in front of it. The stages never stall (no
        clock enable on their registers): the reader takes a beat only while the queue
        has room for every chunk that may be on its way (``room``, from the credits), so
        a packer that falls behind throttles the input instead."""
        m.submodules.packer = packer = BytePacker(
            chunk_bytes=MAX_BLOCK_BYTES * self.blocks_per_group, beat_bytes=4 * self.lanes)
        wiring.connect(m, wiring.flipped(self.o), packer.o)
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(
            width=len(Value.cast(packer.i.payload)), depth=_QUEUE_DEPTH)
        m.d.comb += [packer.i.valid.eq(queue.r_rdy), packer.i.payload.eq(queue.r_data),
                     queue.r_en.eq(packer.i.ready)]
        room = Signal(init=1)                   # the reader may take a beat
        k.packer, k.queue, k.room = packer, queue, room

    def _read(self, m, k):
        """Stage 1: one beat of the message (``codnn.hw.nic.reader.MessageReader``), the bad
        messages counted, the bound's thresholds loaded with the descriptor."""
        flag = Signal()
        reader = MessageReader(m, self.i, k.room, lanes=self.lanes, flag=flag,
                               bypass=self.bypass, max_values=self.max_values, hold=False)
        count_errors(m, flag, self.error, self.error_count, between=reader.between)
        bound_bits, out_of_range = clamp_bound_bits(m, self.bound_bits)
        thresholds = Thresholds(bound_bits)
        with m.If(reader.descriptor):
            m.d.sync += thresholds.load()
            with m.If(out_of_range):
                m.d.comb += flag.eq(1)
        k.reader, k.thresholds = reader, thresholds
        k.in_flight.append(reader.item.kind != Item.NONE)

    def _classify(self, m, k):
        """Stage 2: the item registered, each value's class and payload shift."""
        reader = k.reader
        item = Signal.like(reader.item, name="stage1")
        classes = Signal(data.ArrayLayout(data.StructLayout({"tag": 2, "amount": 3}),
                                          self.lanes))
        m.d.sync += item.eq(reader.item)
        for i in range(self.lanes):
            tag, amount = classify_value(m, reader.item.bits[32 * i:32 * (i + 1)],
                                         k.thresholds)
            m.d.sync += [classes[i].tag.eq(tag), classes[i].amount.eq(amount)]
        k.item, k.classes = item, classes
        k.in_flight.append(item.kind != Item.NONE)

    def _group(self, m, k):
        """Stage 3: a group of ``8 * blocks`` tags and payloads (a beat's lanes into their
        slots), or a chunk (the count, or a raw beat)."""
        lanes, blocks, item, classes = self.lanes, self.blocks_per_group, k.item, k.classes
        group_values = BLOCK * blocks
        tags = Signal(data.ArrayLayout(2, group_values))
        payloads = Signal(data.ArrayLayout(32, group_values))
        group_blocks = Signal(range(blocks + 1))
        group_last, group_valid, chunk2_valid = Signal(), Signal(), Signal()
        chunk2 = Signal(data.StructLayout({"bits": unsigned(32 * lanes),
                                           "length": range(4 * lanes + 1), "last": 1}))
        slot = counter(self.beats_per_group)
        lane_tags = [classes[i].tag for i in range(lanes)]
        lane_payloads = [value_payload(item.bits[32 * i:32 * (i + 1)], classes[i].tag,
                                       classes[i].amount) for i in range(lanes)]
        m.d.sync += [group_valid.eq(0), chunk2_valid.eq(0)]
        with m.If(item.kind == Item.VALUES):
            done = item.final | (slot == self.beats_per_group - 1)
            for i in range(group_values):
                position = i % lanes
                if lanes >= 8:
                    m.d.sync += [tags[i].eq(lane_tags[position]),
                                 payloads[i].eq(lane_payloads[position])]
                    continue
                with m.If(slot == i // lanes):
                    m.d.sync += [tags[i].eq(lane_tags[position]),
                                 payloads[i].eq(lane_payloads[position])]
                with m.Elif(slot == 0):          # a new group: clear later slots
                    m.d.sync += [tags[i].eq(0), payloads[i].eq(0)]
            m.d.sync += [
                group_valid.eq(done), group_last.eq(item.final),
                slot.eq(Mux(done, 0, slot + 1)),
                group_blocks.eq(1 if lanes < 8 else (item.count + 7) >> 3),
            ]
        with m.Elif(item.kind == Item.HEADER):
            m.d.sync += [chunk2_valid.eq(1), chunk2.bits.eq(item.bits),
                         chunk2.length.eq(4), chunk2.last.eq(item.last)]
        with m.Elif(item.kind == Item.RAW):
            m.d.sync += [chunk2_valid.eq(1), chunk2.bits.eq(item.bits),
                         chunk2.length.eq(item.length), chunk2.last.eq(item.last)]
        k.tags, k.payloads, k.chunk2 = tags, payloads, chunk2
        k.group = {"valid": group_valid, "last": group_last, "blocks": group_blocks}
        k.in_flight.append(group_valid | chunk2_valid)
        k.chunk2_valid = chunk2_valid

    def _offsets(self, m, k):
        """Stages 4 and 5: the payload bytes before each value within its half block,
        then each value's byte offset in its block."""
        blocks = self.blocks_per_group
        tags, payloads = k.tags, k.payloads
        halves = [[stage(m, total, f"half_prefix_b{j}_h{h}_{i}")
                   for i, total in enumerate(half)]
                  for j in range(blocks)
                  for h, half in enumerate(half_prefixes([tags[8 * j + i] for i in range(8)]))]
        tags3a, payloads3a = stage(m, tags, "tags3a"), stage(m, payloads, "payloads3a")
        group3a = carry(m, "group3a", k.group)
        raw3a = carry(m, "raw3a", {"valid": k.chunk2_valid, "chunk": k.chunk2})
        k.in_flight.append(group3a.valid | raw3a.valid)
        k.tags3 = stage(m, tags3a, "tags3", reset_less=False)
        k.payloads3 = stage(m, payloads3a, "payloads3", reset_less=False)
        k.offsets3 = Signal(data.ArrayLayout(range(MAX_BLOCK_BYTES + 1), 9 * blocks),
                            name="offsets3")
        k.group3, k.raw3 = carry(m, "group3", group3a), carry(m, "raw3", raw3a)
        for j in range(blocks):
            offsets = offsets_from_halves(halves[2 * j:2 * j + 2])
            m.d.sync += [k.offsets3[9 * j + i].eq(offset) for i, offset in enumerate(offsets)]
        k.in_flight.append(k.group3.valid | k.raw3.valid)

    def _blocks(self, m, k):
        """Stage 6: each payload shifted to its byte offset in its block (from 8 lanes on
        a register stage of its own; below, its 1300 flip-flops would cost more than they
        gain: the 1-lane compressor would no longer fit an iCE40 HX8K); stage 7: each
        block, its tag word (bytes 0-1) ORed with its payloads; with two blocks a stage
        more: the second block after the first. Sets the last stage's block, its length and its
        group and raw chunk."""
        blocks, split = self.blocks_per_group, self.lanes >= 8
        tags3, payloads3, offsets3 = k.tags3, k.payloads3, k.offsets3
        pass_on = stage if split else (lambda m, value, name: value)
        placed4 = [[pass_on(m, payloads3[8 * j + i] << Cat(Const(0, 3), offsets3[9 * j + i][
                       :(2 + 4 * i).bit_length()]), f"placed4_b{j}_v{i}")
                    for i in range(8)] for j in range(blocks)]   # value i: bytes 2..2+4i
        tags4 = pass_on(m, tags3, "tags4")
        lengths4 = [pass_on(m, offsets3[9 * j + 8], f"length4_b{j}") for j in range(blocks)]
        group4 = carry(m, "group4", k.group3, registered=split)
        raw4 = carry(m, "raw4", k.raw3, registered=split)
        if split:
            k.in_flight.append(group4.valid | raw4.valid)
        blocks5 = [stage(m, Cat(*(tags4[8 * j + i] for i in range(8)))
                        | balanced(placed4[j], operator.or_), f"block5_b{j}")
                   for j in range(blocks)]
        lengths5 = [stage(m, length, f"length5_b{j}") for j, length in enumerate(lengths4)]
        group5, raw5 = carry(m, "group5", group4), carry(m, "raw5", raw4)
        k.in_flight.append(group5.valid | raw5.valid)
        if blocks == 2:
            both = group5.blocks == 2
            k.block_data = stage(m, blocks5[0] | Mux(both, blocks5[1] << Cat(Const(0, 3),
                                                                            lengths5[0]), 0),
                                 "block6")
            k.block_length = stage(m, lengths5[0] + Mux(both, lengths5[1], 0), "length6")
            k.group_out, k.raw_out = carry(m, "group6", group5), carry(m, "raw6", raw5)
            k.in_flight.append(k.group_out.valid | k.raw_out.valid)
        else:
            k.block_data, k.block_length = blocks5[0], lengths5[0]
            k.group_out, k.raw_out = group5, raw5

    def _chunk(self, m, k):
        """Stage 8: the chunk for the queue (the last stage's block, or its raw chunk); the
        credits: the queue's level and every stage that holds what may become a chunk
        bound the chunks a beat taken now would join (items only move on or vanish)."""
        queue, room = k.queue, k.room
        chunk, chunk_valid = Signal.like(k.packer.i.payload), Signal()
        m.d.comb += [queue.w_data.eq(chunk), queue.w_en.eq(chunk_valid)]
        m.d.sync += chunk_valid.eq(k.in_flight[-1])
        with m.If(k.group_out.valid):
            m.d.sync += [chunk.data.eq(k.block_data), chunk.length.eq(k.block_length),
                         chunk.last.eq(k.group_out.last)]
        with m.Else():
            m.d.sync += [chunk.data.eq(k.raw_out.chunk.bits),
                         chunk.length.eq(k.raw_out.chunk.length),
                         chunk.last.eq(k.raw_out.chunk.last)]
        k.in_flight.append(chunk_valid)
        pending = Signal(range(_QUEUE_DEPTH + len(k.in_flight) + 2))
        m.d.comb += pending.eq(queue.level + sum(k.in_flight) + room)
        m.d.sync += room.eq(pending < _QUEUE_DEPTH - 2)
