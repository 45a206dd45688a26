"""The network engine's result writer: where each result of the array goes (the
partial-sum buffer between column blocks, or a layer's destination, image by image;
docs/semantics.md section 9)."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.common.params import positive_int

__all__ = ["ResultWriter"]


def _write_port(depth, bits):
    return Out(data.StructLayout({"addr": range(depth), "data": unsigned(bits), "en": 1}))


class ResultWriter(wiring.Component):
    """Takes a tile's results from the array and writes each where it goes.

    A pulse on ``launch`` starts a tile, sampling its settings on that edge: its ``total``
    results go to the partial-sum buffer (``to_psums``; result ``k`` to word ``k``), or,
    from word ``base`` of the destination (the accumulator buffer with ``to_acc``, else
    the activation buffer), in blocks of ``positions``, each ``stride`` words after the
    one before (an image's block, for a layer step of several images). A ``launch`` in
    the cycle that takes the previous tile's last result wins over it. ``pending`` is high
    while results of the started tile are to come, ``free`` when none is left after this
    cycle (a new tile may start).

    Latency: a result is written (its port's ``en``) in the cycle ``result`` takes it.
    Throughput: a result a cycle; ``result`` is ready while the tile's results are not all
    out.

    Parameters
    ----------
    result_layout : Layout
        The array's result payload (``acc`` and ``y`` members).
    act_depth, acc_depth, psum_depth : int
        Words of the activation, accumulator and partial-sum buffers.

    Attributes
    ----------
    result : In(stream.Signature(result_layout))
    launch, to_psums, to_acc : In(1)
    base : In(32)
    stride : In(16)
    positions : In(17)
    total : In(33)
    pending, free : Out(1)
    act_write, acc_write, psum_write : Out(StructLayout({"addr", "data", "en"}))
        ``y`` into the activation buffer, ``acc`` into the other two.
    """

    def __init__(self, *, result_layout, act_depth, acc_depth, psum_depth):
        for value, what in ((act_depth, "Activation words"), (acc_depth, "Accumulator words"),
                            (psum_depth, "Partial-sum words")):
            positive_int(value, what)
        layout = data.Layout.cast(result_layout)
        acc_bits = len(Signal(layout).acc.as_value())
        y_bits = len(Signal(layout).y.as_value())
        super().__init__({
            "result": In(stream.Signature(layout)),
            "launch": In(1), "to_psums": In(1), "to_acc": In(1), "base": In(32),
            "stride": In(16), "positions": In(17), "total": In(33),
            "pending": Out(1), "free": Out(1),
            "act_write": _write_port(act_depth, y_bits),
            "acc_write": _write_port(acc_depth, acc_bits),
            "psum_write": _write_port(psum_depth, acc_bits),
        })

    def elaborate(self, platform):
        m = Module()
        pending = Signal()                  # the started tile's results are not all out
        to_psums, to_acc = Signal(), Signal()
        positions, stride, total = Signal(17), Signal(16), Signal(33)
        count = Signal(33)                  # results taken of the tile
        out_addr = Signal(32)               # where the next one goes,
        image_addr = Signal(32)             # ... in the block of the image from here,
        image_position = Signal(17)         # ... at this position of the image
        at_last = Signal()                  # the next result is the tile's last
        taken = self.result.valid & self.result.ready
        last = taken & at_last
        m.d.comb += [self.result.ready.eq(pending), self.pending.eq(pending),
                     self.free.eq(~pending | last)]
        acc = self.result.payload.acc.as_value()
        with m.If(taken):
            m.d.sync += [count.eq(count + 1), at_last.eq(count == total - 2),
                         image_position.eq(image_position + 1), out_addr.eq(out_addr + 1)]
            with m.If(image_position == positions - 1):
                # The image's block is whole: the next image's is a stride further.
                m.d.sync += [image_position.eq(0), image_addr.eq(image_addr + stride),
                             out_addr.eq(image_addr + stride)]
            with m.If(last):
                m.d.sync += pending.eq(0)
            with m.If(to_psums):
                m.d.comb += [self.psum_write.addr.eq(count), self.psum_write.data.eq(acc),
                             self.psum_write.en.eq(1)]
            with m.Elif(to_acc):
                m.d.comb += [self.acc_write.addr.eq(out_addr), self.acc_write.data.eq(acc),
                             self.acc_write.en.eq(1)]
            with m.Else():
                m.d.comb += [self.act_write.addr.eq(out_addr),
                             self.act_write.data.eq(self.result.payload.y.as_value()),
                             self.act_write.en.eq(1)]
        with m.If(self.launch):
            m.d.sync += [pending.eq(1), count.eq(0), at_last.eq(self.total == 1),
                         image_position.eq(0), out_addr.eq(self.base),
                         image_addr.eq(self.base), to_psums.eq(self.to_psums),
                         to_acc.eq(self.to_acc), positions.eq(self.positions),
                         stride.eq(self.stride), total.eq(self.total)]
        return m
