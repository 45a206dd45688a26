"""Max-abs reduction: the TernGrad scaler ``max|g|`` of each value message, in a first pass."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib.wiring import Out

from codnn.hw.common.pipeline import CreditPipeline
from codnn.hw.nic.engine_base import NicEngineBase, count_errors
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.reader import Item, MessageReader

__all__ = ["MaxAbs"]


class MaxAbs(NicEngineBase):
    """The largest ``|g|`` of each value message, ``lanes`` values per cycle.

    Input: value messages (``codnn.hw.nic.layouts``). Output: one beat per message keeping 4
    bytes, the float32 bits of ``max|g|`` (+0.0 for an empty message), ``last`` set. Finite
    non-negative float32 order like their bits as integers, so the reduction compares
    ``bits & 0x7FFFFFFF``.

    Defined behaviour on bad input (``error`` is sticky): NaN/Inf values are left out of
    the maximum, count in ``nonfinite`` and raise ``error``; a message whose input ends
    before its count (the rest count as zeros), has beats past it (dropped) or declares
    more than ``max_values`` (no output, dropped up to its ``last``) raises ``error`` and
    counts once in ``error_count``.

    Latency: ``latency`` cycles (``4 + ceil(log2(lanes))``) from a message's last value beat
    to its output beat: the comparisons are a tree with a register stage per level, in a
    pipeline that never stalls (``codnn.hw.common.pipeline.CreditPipeline``), so ``o.ready``
    reaches only its output queue. Throughput: one input beat per cycle while the output
    is not backpressured.

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1).

    Attributes
    ----------
    i, o : In/Out(stream.Signature(beat_layout(4 * lanes)))
    error : Out(1)
    error_count : Out(16)
    nonfinite : Out(32)
    """

    @property
    def latency(self):
        """Cycles from a message's last value beat to its output beat: the reader, the
        lanes' magnitudes, one stage per level of the comparison tree, the running
        maximum, the queue."""
        return 4 + (self.lanes - 1).bit_length()

    #: The engine's ports beside ``i`` and ``o``: reports (Out) only.
    PORTS = {"error": Out(1), "error_count": Out(16), "nonfinite": Out(32)}

    def __init__(self, *, lanes=8, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        flag, entering = Signal(), Signal()
        levels = (lanes - 1).bit_length()
        pipe = CreditPipeline(m, entering, 1 + levels, queue_depth=16)
        reader = MessageReader(m, self.i, pipe.ready, lanes=lanes, flag=flag,
                               bypass=Const(0), max_values=self.max_values, hold=False)
        count_errors(m, flag, self.error, self.error_count, between=reader.between)
        item = reader.item
        m.d.comb += entering.eq(item.kind != Item.NONE)

        # Stage 1: each lane's magnitude (0 for NaN/Inf) and the beat's non-finite count.
        magnitudes, bad = [], []
        for k in range(lanes):
            bits = item.bits[32 * k:32 * (k + 1)]
            finite = bits[23:31] != 0xFF
            magnitudes.append(pipe.register(Mux(finite, bits[:31], 0), f"lane{k}_magnitude"))
            bad.append(~finite)
        late = pipe.register(item, "item_d0")
        bad_count = pipe.register(sum(bad), "nonfinite_d0")
        # One register stage per level of the comparison tree.
        for level in range(1, levels + 1):
            pairs = zip(magnitudes[::2], magnitudes[1::2])
            magnitudes = [pipe.register(Mux(a > b, a, b), f"level{level}_max{n}")
                          for n, (a, b) in enumerate(pairs)]
            late = pipe.register(late, f"item_d{level}")
            bad_count = pipe.register(bad_count, f"nonfinite_d{level}")
        largest = magnitudes[0]

        # Last stage: the running maximum; a message's end queues its output beat.
        running = Signal(31)
        total = Mux(largest > running, largest, running)
        emit = Signal()
        with m.Switch(late.kind):
            with m.Case(Item.HEADER):
                m.d.comb += emit.eq(late.last)
                with m.If(pipe.last_valid):
                    m.d.sync += running.eq(0)
            with m.Case(Item.VALUES):
                m.d.comb += emit.eq(late.final)
                with m.If(pipe.last_valid):
                    m.d.sync += [running.eq(total),
                                 self.nonfinite.eq(self.nonfinite + bad_count)]
                    with m.If(bad_count != 0):
                        m.d.sync += self.error.eq(1)
        head = pipe.send({"emit": emit, "value": Mux(late.kind == Item.VALUES, total, 0)})
        # Items that end no message leave the queue's head at once.
        m.d.comb += [self.o.valid.eq(pipe.o_valid & head.emit),
                     pipe.o_ready.eq(~head.emit | self.o.ready),
                     self.o.payload.data.eq(head.value),
                     self.o.payload.keep.eq(0xF), self.o.payload.last.eq(1)]
        return m
