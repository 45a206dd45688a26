"""Properties of streams (``amaranth.lib.stream``): the rules a producer keeps, counts of
the beats that cross, and a tracked beat to show that beats are neither reordered,
duplicated nor changed. Each helper adds its registers and statements to a module."""

from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal, Value

__all__ = ["no_reset", "stream_rules", "beats", "Tracker"]


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
