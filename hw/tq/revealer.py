"""Run-time term revealer: keep the largest terms of each group (docs/semantics.md section 3)."""

from amaranth.hdl import Cat, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from codnn.hw.common.params import positive_int
from codnn.hw.common.pipeline import StallPipeline
from codnn.hw.tq.layouts import check_mag_bits, signed_digits

__all__ = ["TermRevealer"]


class TermRevealer(wiring.Component):
    """Keep the top ``budget`` terms of every group of ``group`` values, ``lanes`` values
    (``lanes / group`` groups) per beat, in signed-digit form.

    One pipeline stage per exponent, from the top (``mag_bits``) down, the way the paper's
    term comparator sees MSB-first streams: at exponent ``e`` a group's values that have a
    digit there keep it, lowest index first, while the budget lasts; the budget left goes
    on to the next stage. ``group = 1`` truncates each value to its top ``budget`` terms
    (the data path of a TQ array).

    Latency: ``mag_bits + 1`` cycles. Throughput: one beat per cycle; backpressure stalls
    the pipeline without loss.

    Parameters
    ----------
    lanes : int
        Values per beat, a multiple of ``group``.
    group : int
        Values sharing a budget.
    budget : int
        Terms kept per group (``alpha``; ``beta`` with ``group = 1``).
    mag_bits : int

    Attributes
    ----------
    i, o : In/Out(stream.Signature(ArrayLayout(signed_digits(mag_bits), lanes)))
    """

    def __init__(self, *, lanes=1, group=1, budget=3, mag_bits=7):
        positive_int(lanes, "Lane count")
        positive_int(group, "Group size")
        positive_int(budget, "Budget")
        check_mag_bits(mag_bits)
        if lanes % group:
            raise ValueError(f"Lane count ({lanes}) must be a multiple of the group size "
                             f"({group})")
        self._lanes, self._group, self._budget, self._mag_bits = lanes, group, budget, mag_bits
        layout = data.ArrayLayout(signed_digits(mag_bits), lanes)
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    lanes = property(lambda self: self._lanes, doc="Values per beat.")
    group = property(lambda self: self._group, doc="Values per group.")
    budget = property(lambda self: self._budget, doc="Terms kept per group.")
    mag_bits = property(lambda self: self._mag_bits, doc="Magnitude width.")

    @property
    def latency(self):
        """Cycles from an accepted beat to its output beat being valid."""
        return self.mag_bits + 1

    def elaborate(self, platform):
        m = Module()
        register = StallPipeline(m, self.i, self.o, self.latency).register
        width = self.mag_bits + 1
        count_bits = ceil_log2(self.budget + 1)
        for first in range(0, self.lanes, self.group):
            lanes = range(first, first + self.group)
            pos = [self.i.payload[j].pos for j in lanes]
            neg = [self.i.payload[j].neg for j in lanes]
            kept = [[] for _ in lanes]               # kept digit of each exponent, top first
            left = self.budget
            for e in reversed(range(width)):
                taken = 0                            # digits taken at e so far, by index
                for k in range(self.group):
                    has = pos[k][e] | neg[k][e]
                    keep = has & (taken < left)
                    kept[k].append(keep)
                    taken = taken + keep
                left = register((left - taken)[:count_bits], f"left_g{first}_e{e}")
                # Every value's digits and kept bits so far move on with the stage.
                for k in range(self.group):
                    pos[k] = register(pos[k], f"pos_l{first + k}_e{e}")
                    neg[k] = register(neg[k], f"neg_l{first + k}_e{e}")
                    kept[k] = [register(bit, f"kept_l{first + k}_e{e}_{n}")
                               for n, bit in enumerate(kept[k])]
            for k, lane in enumerate(lanes):
                mask = Cat(reversed(kept[k]))        # bit e: digit e kept
                m.d.comb += [self.o.payload[lane].pos.eq(pos[k] & mask),
                             self.o.payload[lane].neg.eq(neg[k] & mask)]
        return m
