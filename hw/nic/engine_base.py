"""What the NIC engines share beside their payloads: their base class (the streams, the
lane and message-size checks) and the count of bad messages every engine reports."""

from amaranth.hdl import Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES, beat_layout, check_lanes

__all__ = ["NicEngineBase", "count_errors"]


def count_errors(m, flag, error, error_count, *, between):
    """Count bad messages: set the sticky ``error`` and add one to ``error_count``
    (saturating) for each message in which ``flag`` is high in one cycle or more.

    ``between`` is high while the engine waits for a message's first beat (its state
    between messages): a flag then belongs to the message that starts in that cycle, and
    a message's later flags count no more.
    """
    seen = Signal()                   # this message has been counted
    counted = Signal()
    m.d.comb += counted.eq(flag & (between | ~seen))
    with m.If(between):
        m.d.sync += seen.eq(flag)
    with m.Elif(flag):
        m.d.sync += seen.eq(1)
    with m.If(counted):
        m.d.sync += error.eq(1)
        with m.If(error_count != (1 << len(error_count)) - 1):
            m.d.sync += error_count.eq(error_count + 1)
    return counted


class NicEngineBase(wiring.Component):
    """Base of the NIC engines: streams ``i`` and ``o`` of
    ``codnn.hw.nic.layouts.beat_layout(4 * lanes)``, plus
    the engine's own ``ports``, after checking ``lanes`` and ``max_values`` (the largest
    value count a message may declare; a larger one is a bad message, dropped whole)."""

    def __init__(self, lanes, ports, max_values=DEFAULT_MAX_VALUES):
        check_lanes(lanes)
        if isinstance(max_values, bool) or not isinstance(max_values, int) \
                or not 1 <= max_values < 1 << 32:
            raise ValueError(f"Largest message must be 1..2**32-1 values, not {max_values!r}")
        self._lanes, self._max_values = lanes, max_values
        beat = beat_layout(4 * lanes)
        super().__init__({"i": In(stream.Signature(beat)), "o": Out(stream.Signature(beat)),
                          **ports})

    lanes = property(lambda self: self._lanes, doc="Float32 values per beat.")
    max_values = property(lambda self: self._max_values,
                          doc="The largest value count a message may declare.")
