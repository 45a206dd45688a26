"""Pipelined streaming ``fmix32`` unit (docs/semantics.md section 5), the TernGrad engine's
random source."""

from amaranth.hdl import Module, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.fmix32 import FMIX32_C1, FMIX32_C2
from codnn.hw.common.params import positive_int
from codnn.hw.common.pipeline import StallPipeline

__all__ = ["Fmix32Unit", "fmix32_stages"]


def _lane_layout(lanes):
    return data.ArrayLayout(unsigned(32), lanes)


class Fmix32Unit(wiring.Component):
    """Apply ``fmix32`` to ``lanes`` unsigned 32-bit values per beat.

    Each 32 x 32 multiplication (mod 2**32) is split into three 16 x 16 partial products
    (``lo*lo``, ``lo*hi``, ``hi*lo``), registered on their own stage so that they map to DSP
    blocks (iCE40 ``SB_MAC16``, ECP5 ``MULT18X18D``) or to short LUT multipliers.

    Pipeline: (1) ``h ^ h>>16``; (2) partial products by ``C1``; (3) sum, ``^ >>13``;
    (4) partial products by ``C2``; (5) sum, ``^ >>16``.

    The whole pipeline advances when its last stage is empty or accepted
    (``i.ready = ~o.valid | o.ready``), so backpressure stalls it without loss.

    Latency: ``latency`` = 5 cycles from an accepted input beat to the output beat being valid.
    Throughput: one beat (``lanes`` values) per cycle when ``o.ready`` stays high.

    Parameters
    ----------
    lanes : int
        Values per beat, a positive integer.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(unsigned(32), lanes)))
        Input values.
    o : Out(stream.Signature(ArrayLayout(unsigned(32), lanes)))
        ``fmix32`` of each input value, same lane order.

    Raises
    ------
    TypeError
        If ``lanes`` is not a positive integer.
    """

    @property
    def latency(self):
        """Cycles from an accepted input beat to its output beat."""
        return 5

    def __init__(self, *, lanes=1):
        positive_int(lanes, "Lane count")
        self._lanes = lanes
        super().__init__({
            "i": In(stream.Signature(_lane_layout(lanes))),
            "o": Out(stream.Signature(_lane_layout(lanes))),
        })

    @property
    def lanes(self):
        """Values per beat.

        Returns
        -------
        int
        """
        return self._lanes

    def elaborate(self, platform):
        m = Module()
        register = StallPipeline(m, self.i, self.o, self.latency).register

        for lane in range(self.lanes):
            m.d.comb += self.o.payload[lane].eq(fmix32_stages(register, self.i.payload[lane],
                                                              f"lane{lane}"))
        return m


def fmix32_stages(register, h, name):
    """``fmix32(h)`` over 5 register stages made by ``register(value, name)`` (a
    ``StallPipeline``'s): (1) ``h ^ h>>16``; (2) partial products by ``C1``; (3) sum,
    ``^ >>13``; (4) partial products by ``C2``; (5) sum, ``^ >>16``. Each 32 x 32
    multiplication (mod 2**32) is three 16 x 16 partial products (``lo*lo``, ``lo*hi``,
    ``hi*lo``) on their own stage, for DSP blocks or short LUT multipliers."""
    def partial_products(x, const, stage):
        lo, hi = x[:16], x[16:]
        c_lo, c_hi = const & 0xFFFF, const >> 16
        return (register(lo * c_lo, f"{stage}_ll"),
                register((lo * c_hi)[:16], f"{stage}_lh"),
                register((hi * c_lo)[:16], f"{stage}_hl"))

    def product_mod32(ll, lh, hl):
        return (ll + ((lh + hl)[:16] << 16))[:32]

    x1 = register(h ^ (h >> 16), f"{name}_s1")
    x2 = product_mod32(*partial_products(x1, FMIX32_C1, f"{name}_s2"))
    x3 = register(x2 ^ (x2 >> 13), f"{name}_s3")
    x4 = product_mod32(*partial_products(x3, FMIX32_C2, f"{name}_s4"))
    return register(x4 ^ (x4 >> 16), f"{name}_s5")
