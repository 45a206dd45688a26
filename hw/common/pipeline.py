"""A fixed-depth pipeline between an input and an output stream that stalls as a whole."""

from amaranth.hdl import Signal

__all__ = ["StallPipeline"]


class StallPipeline:
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
