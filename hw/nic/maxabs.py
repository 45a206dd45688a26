"""Max-abs reduction: the TernGrad scaler ``max|g|`` of each value message, in a first pass."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib.wiring import Out

from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES, StreamEngine, count_errors
from codnn.hw.nic.reader import Item, MessageReader

__all__ = ["MaxAbs"]


class MaxAbs(StreamEngine):
    """The largest ``|g|`` of each value message, ``lanes`` values per cycle.

    Input: value messages (``hw.nic.layouts``). Output: one beat per message keeping 4
    bytes, the float32 bits of ``max|g|`` (+0.0 for an empty message), ``last`` set. Finite
    non-negative float32 order like their bits as integers, so the reduction compares
    ``bits & 0x7FFFFFFF``.

    Defined behaviour on bad input (``error`` is sticky): NaN/Inf values are left out of
    the maximum, count in ``nonfinite`` and raise ``error``; a message whose input ends
    before its count (the rest count as zeros), has beats past it (dropped) or declares
    more than ``max_values`` (no output, dropped up to its ``last``) raises ``error`` and
    counts once in ``error_count``.

    Latency: 2 cycles from a message's last value beat to its output beat. Throughput: one
    input beat per cycle while the output is not backpressured.

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
        """Cycles from a message's last value beat to its output beat."""
        return 2

    #: The engine's ports beside ``i`` and ``o``: reports (Out) only.
    PORTS = {"error": Out(1), "error_count": Out(16), "nonfinite": Out(32)}

    def __init__(self, *, lanes=8, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        flag = Signal()
        advance = Signal()
        m.d.comb += advance.eq(~self.o.valid | self.o.ready)
        reader = MessageReader(m, self.i, advance, lanes=lanes, flag=flag, bypass=Const(0),
                               max_values=self.max_values)
        count_errors(m, flag, self.error, self.error_count, between=reader.between)
        item = reader.item

        largest = Const(0, 31)
        bad = []
        for k in range(lanes):
            bits = item.bits[32 * k:32 * (k + 1)]
            finite = bits[23:31] != 0xFF
            magnitude = Signal(31, name=f"lane{k}_magnitude")
            m.d.comb += magnitude.eq(Mux(finite, bits[:31], 0))
            bigger = Signal(31, name=f"max_to_lane{k}")
            m.d.comb += bigger.eq(Mux(magnitude > largest, magnitude, largest))
            largest = bigger
            bad.append(~finite)
        running = Signal(31)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(advance):
            with m.Switch(item.kind):
                with m.Case(Item.HEADER):
                    m.d.sync += running.eq(0)
                    with m.If(item.last):
                        m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(0)]
                with m.Case(Item.VALUES):
                    total = Mux(largest > running, largest, running)
                    m.d.sync += [running.eq(total), self.nonfinite.eq(self.nonfinite + sum(bad))]
                    with m.If(Cat(*bad).any()):
                        m.d.sync += self.error.eq(1)
                    with m.If(item.final):
                        m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(total)]
        m.d.comb += [self.o.payload.keep.eq(0xF), self.o.payload.last.eq(1)]
        return m
