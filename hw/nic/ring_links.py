"""The links of a ring of NICs on one chip, for simulation: link ``r`` carries node ``r``'s
messages to node ``r + 1`` through the sender's compressor and the receiver's
decompressor (a ``CodecLoopback``), so a testbench can play the ring exchange of
``codnn.golden.exchange`` hop by hop with the engines on every hop."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS
from codnn.hw.nic.axis import axis_ports, connect_axis
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.loopback import CodecLoopback

__all__ = ["RingLinks"]


class RingLinks(wiring.Component):
    """``nodes`` links, each a ``CodecLoopback`` of ``lanes`` lanes, with AXI4-Stream ports
    ``s{r}_axis_*`` (what node ``r`` sends) and ``m{r}_axis_*`` (what node ``r + 1``
    receives): ``tdata``, ``tkeep``, ``tlast``, ``tvalid``, ``tready``. ``bound_bits`` is
    shared; ``error_count`` adds up every link's.

    Latency and throughput: each link's is the loopback's; the links run side by side.
    """

    def __init__(self, *, nodes=4, lanes=2, max_values=DEFAULT_MAX_VALUES):
        if not 2 <= nodes <= 16:
            raise ValueError(f"A ring has 2..16 nodes, not {nodes}")
        self.nodes = nodes
        self.links = [CodecLoopback(lanes=lanes, max_values=max_values) for _ in range(nodes)]
        members = {"bound_bits": In(4, init=DEFAULT_BOUND_BITS), "error_count": Out(21)}
        for r in range(nodes):
            members.update(axis_ports(4 * lanes, f"s{r}_axis", f"m{r}_axis"))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        count = 0
        for r, link in enumerate(self.links):
            m.submodules[f"link{r}"] = link
            connect_axis(m, link, self, f"s{r}_axis", f"m{r}_axis")
            m.d.comb += link.bound_bits.eq(self.bound_bits)
            count = count + link.error_count
        m.d.comb += self.error_count.eq(count)
        return m
