"""Fixed-depth pipelines: one that stalls as a whole, one that never stalls and sends into a
queue on credits."""

from amaranth.hdl import Signal
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFOBuffered

__all__ = ["CreditPipeline", "StallPipeline"]


class _Registers:
    """What both pipelines give their stages: ``delay``, ``cycles`` of ``register``."""

    def delay(self, value, cycles, name):
        """``value`` through ``cycles`` of the pipeline's registers."""
        for k in range(cycles):
            value = self.register(value, f"{name}_d{k}")
        return value


class StallPipeline(_Registers):
    """``depth`` register stages from stream ``i`` to stream ``o`` in module ``m``.

    The pipeline advances when its last stage is empty or being taken
    (``i.ready = ~o.valid | o.ready``), so backpressure stalls it without loss. Latency:
    ``depth`` cycles from an accepted input beat to its output beat being valid.
    Throughput: one beat per cycle while ``o.ready`` stays high.
    """

    def __init__(self, m, i, o, depth):
        self._m = m
        self.advance = Signal(name="advance")
        m.d.comb += [self.advance.eq(~o.valid | o.ready), i.ready.eq(self.advance)]
        valid = [Signal(name=f"stage{n + 1}_valid") for n in range(depth)]
        with m.If(self.advance):
            m.d.sync += valid[0].eq(i.valid)
            m.d.sync += [later.eq(earlier) for earlier, later in zip(valid, valid[1:])]
        m.d.comb += o.valid.eq(valid[-1])

    def register(self, value, name):
        """A register on ``value`` (same shape) that loads when the pipeline advances."""
        reg = Signal(value.shape(), name=name, reset_less=True)
        with self._m.If(self.advance):
            self._m.d.sync += reg.eq(value)
        return reg


class CreditPipeline(_Registers):
    """``depth`` register stages that never stall, then a queue of ``queue_depth`` items.

    The source offers an item at ``i_valid`` the cycle after it takes it (a reader's output
    register), and takes one only while ``ready`` is high. ``ready`` is a register that
    counts the items from ``i_valid`` to the queue's head, so the queue never overflows:
    ``o_ready`` reaches only the queue, no stage has an enable, and no handshake crosses
    the stages. ``send`` names what the last stage puts in the queue and gives the queue's
    head as a view, valid with ``o_valid``; the engine drives ``o_ready``.

    Latency: ``depth`` cycles from ``i_valid`` to the queue, 1 more to its head (a
    ``SyncFIFOBuffered``). Throughput: one item per cycle while ``o_ready`` stays high and
    ``queue_depth`` is at least ``depth + 4``.
    """

    def __init__(self, m, i_valid, depth, queue_depth):
        self._m = m
        self.queue_depth = queue_depth
        self.ready = Signal(init=1)
        self.o_valid, self.o_ready = Signal(), Signal()
        valid = [Signal(name=f"stage{n + 1}_valid") for n in range(depth)]
        m.d.sync += [valid[0].eq(i_valid)]
        m.d.sync += [later.eq(earlier) for earlier, later in zip(valid, valid[1:])]
        #: The last stage holds an item.
        self.last_valid = valid[-1]
        # Items from ``i_valid`` to the head; one more may be taken before ``ready`` sees
        # the last one counted, and one in the cycle ``ready`` is high.
        in_flight = Signal(range(queue_depth + 1))
        in_flight_next = Signal.like(in_flight)
        pop = self.o_valid & self.o_ready
        m.d.comb += in_flight_next.eq(in_flight + i_valid - pop)
        m.d.sync += [in_flight.eq(in_flight_next),
                     self.ready.eq(in_flight_next <= queue_depth - 3)]

    def register(self, value, name):
        """A register on ``value`` (same shape) that loads every cycle."""
        reg = Signal(value.shape(), name=name, reset_less=True)
        self._m.d.sync += reg.eq(value)
        return reg

    def send(self, fields):
        """Queue ``fields`` (a dict of name to value, read at the last stage) with each
        item; returns the queue's head as a view of those fields."""
        m = self._m
        layout = data.StructLayout({name: value.shape() for name, value in fields.items()})
        m.submodules.credit_queue = queue = SyncFIFOBuffered(width=layout.size,
                                                             depth=self.queue_depth)
        entry = Signal(layout)
        m.d.comb += [entry[name].eq(value) for name, value in fields.items()]
        m.d.comb += [queue.w_en.eq(self.last_valid), queue.w_data.eq(entry),
                     self.o_valid.eq(queue.r_rdy), queue.r_en.eq(self.o_ready)]
        return data.View(layout, queue.r_data)
