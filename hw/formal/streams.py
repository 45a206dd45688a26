"""Properties of streams (``amaranth.lib.stream``): the rules a producer keeps, counts of
the beats that cross, and a tracked beat to show that beats are neither reordered,
duplicated nor changed. Each helper adds its registers and statements to a module."""

from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal, Value

__all__ = ["no_reset", "stream_rules", "beats", "in_flight", "messages", "value_frames",
           "Tracker"]


def no_reset(m: Module):
    """The solver keeps the sync domain out of reset: the run starts from the registers'
    initial values (their reset values) and never resets again."""
    m.d.comb += Assume(~ResetSignal())


def stream_rules(m, s, name, *, assume=False):
    """A beat offered and not taken stays offered, its payload unchanged, the next cycle:
    asserted for a design's output, or assumed of the environment driving its input
    (``assume``)."""
    held = Signal(name=f"{name}_held")
    payload = Signal.like(s.payload, name=f"{name}_held_payload")
    m.d.sync += [held.eq(s.valid & ~s.ready), payload.eq(s.payload)]
    check = Assume if assume else Assert
    with m.If(held):
        m.d.comb += check(s.valid & (Value.cast(s.payload) == Value.cast(payload)))


def beats(m, s, name, width=8):
    """A counter of the beats ``s`` has carried (``valid & ready`` edges), saturating."""
    count = Signal(width, name=f"{name}_beats")
    with m.If(s.valid & s.ready & (count != (1 << width) - 1)):
        m.d.sync += count.eq(count + 1)
    return count


def in_flight(m, i, o, name, width=4):
    """Beats taken by ``i`` and not yet given by ``o``."""
    count = Signal(width, name=f"{name}_in_flight")
    m.d.sync += count.eq(count + (i.valid & i.ready) - (o.valid & o.ready))
    return count


def messages(m, s, name, width=8):
    """A counter of the messages ``s`` has begun, saturating: beats taken after a beat with
    ``last``, or as the first since the reset. Returns the counter and ``first``, high
    while the next beat taken begins a message."""
    first = Signal(init=1, name=f"{name}_first_next")
    begun = Signal(width, name=f"{name}_messages")
    with m.If(s.valid & s.ready):
        m.d.sync += first.eq(s.payload.last)
        with m.If(first & (begun != (1 << width) - 1)):
            m.d.sync += begun.eq(begun + 1)
    return begun, first


def value_frames(m, o, lanes, max_values, *, assume=False):
    """``o`` (a NIC engine's output, ``codnn.hw.nic.layouts.beat_layout``) gives value messages
    only: each frame a descriptor beat whose count ``n`` is at most ``max_values``, then
    exactly ``ceil(n / lanes)`` value beats, ``last`` on the final beat and on no other
    (on the descriptor when ``n`` is 0). Asserted on the beats taken, or assumed of the
    environment driving an engine's input (``assume``)."""
    check = Assume if assume else Assert
    inside = Signal(name="frame_inside")            # a descriptor went, its last did not
    left = Signal(32, name="frame_beats_left")      # value beats still due
    shift = (lanes - 1).bit_length()
    payload = o.payload
    with m.If(o.valid & o.ready):
        with m.If(~inside):
            count = payload.data[:32]
            m.d.comb += [check(count <= max_values),
                         check(payload.last == (count == 0))]
            m.d.sync += [left.eq((count + lanes - 1) >> shift), inside.eq(count != 0)]
        with m.Else():
            m.d.comb += check(payload.last == (left == 1))
            m.d.sync += left.eq(left - 1)
            with m.If(payload.last):
                m.d.sync += inside.eq(0)


class Tracker:
    """One beat, the ``index``-th (an ``AnyConst``) of the input stream, followed to the
    output: ``seen_in`` once it went in (its payload in ``payload``), ``seen_out`` once
    the output beat of the same index left; ``at_out`` is high in the cycle it leaves."""

    def __init__(self, m, i, o, index, name="tracked"):
        self.payload = Signal.like(i.payload, name=f"{name}_payload")
        self.seen_in, self.seen_out = Signal(name=f"{name}_in"), Signal(name=f"{name}_out")
        # Each count stops at the tracked beat, so neither wraps.
        count_in = Signal(len(index), name=f"{name}_count_in")
        count_out = Signal(len(index), name=f"{name}_count_out")
        with m.If(i.valid & i.ready & ~self.seen_in):
            with m.If(count_in == index):
                m.d.sync += [self.payload.eq(i.payload), self.seen_in.eq(1)]
            with m.Else():
                m.d.sync += count_in.eq(count_in + 1)
        self.at_out = Signal(name=f"{name}_at_out")
        m.d.comb += self.at_out.eq(o.valid & o.ready & ~self.seen_out & (count_out == index))
        with m.If(self.at_out):
            m.d.sync += self.seen_out.eq(1)
        with m.Elif(o.valid & o.ready & ~self.seen_out):
            m.d.sync += count_out.eq(count_out + 1)
