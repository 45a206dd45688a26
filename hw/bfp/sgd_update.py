"""The training step's update of one weight a cycle (docs/semantics.md section 11,
``codnn.golden.bfp_training.sgd_update``): SGD with momentum and weight decay on float32
master weights."""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.bfp.float32 import ADD_LATENCY, MUL_LATENCY, add_stages, mul_stages, negate
from codnn.hw.common.pipeline import StallPipeline

__all__ = ["SgdUpdate"]


class SgdUpdate(wiring.Component):
    """``v' = fl32(fl32(momentum * v) + fl32(g + fl32(decay * w)))`` and ``w' = fl32(w -
    fl32(lr * v'))`` of one weight, each operation ``codnn.hw.bfp.float32``'s (so equal to
    NumPy's float32 arithmetic, NaN results as ``CANONICAL_NAN``).

    Input beat ``i.payload``: ``w``, ``v``, ``g`` (the weight, its momentum, its gradient)
    and ``lr``, ``momentum``, ``decay`` (the settings, per beat, so that a layer's may
    differ from the next one's without a pause); 32 bits each, IEEE encoding. Output beat
    ``o.payload``: ``w``, ``v`` (the new weight and momentum).

    Pipeline: ``decay * w`` and ``momentum * v`` side by side; ``g +`` the first; the
    second plus that (the new momentum); ``lr *`` it; ``w -`` that, the new momentum
    carried beside. Latency: ``latency`` = ``3 * ADD_LATENCY + 2 * MUL_LATENCY`` (45).
    Throughput: one weight a cycle; it stalls as a whole under backpressure.
    """

    latency = 3 * ADD_LATENCY + 2 * MUL_LATENCY

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(data.StructLayout(
                {name: 32 for name in ("w", "v", "g", "lr", "momentum", "decay")}))),
            "o": Out(stream.Signature(data.StructLayout({"w": 32, "v": 32}))),
        })

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, self.latency)
        delay = pipe.delay
        beat = self.i.payload
        decayed = mul_stages(m, pipe, beat.decay, beat.w, "decayed")
        carried = mul_stages(m, pipe, beat.momentum, beat.v, "carried")
        w, g, lr = (delay(value, MUL_LATENCY, name) for value, name in
                    ((beat.w, "w0"), (beat.g, "g0"), (beat.lr, "lr0")))
        gradient = add_stages(m, pipe, g, decayed, "gradient")
        w, lr, carried = (delay(value, ADD_LATENCY, name) for value, name in
                          ((w, "w1"), (lr, "lr1"), (carried, "carried1")))
        v = add_stages(m, pipe, carried, gradient, "momentum")
        w, lr = delay(w, ADD_LATENCY, "w2"), delay(lr, ADD_LATENCY, "lr2")
        step = mul_stages(m, pipe, lr, v, "step")
        w, v = delay(w, MUL_LATENCY, "w3"), delay(v, MUL_LATENCY, "v3")
        new_w = add_stages(m, pipe, w, negate(step), "weight")
        m.d.comb += [self.o.payload.w.eq(new_w),
                     self.o.payload.v.eq(delay(v, ADD_LATENCY, "v4"))]
        return m
