"""cocotb testbench: the ring exchange of ``codnn.golden.exchange`` played on a ring of NIC links
(``codnn.hw.nic.RingLinks``: on each link the sender's compressor and the receiver's
decompressor), every node ending with golden's averaged gradient, bit for bit.

Each node's host is the testbench: at every step all nodes send at once, each a value
message of one chunk on its link, and add what arrives to their own chunk in float32
(reduce-scatter) or keep it (all-gather). A node forwards the values it received, which
its NIC compresses again; the codec gives back the same message for values it decoded, so
every node holds what golden's forwarded bytes decode to. An owner keeps what its message
decodes to on the first all-gather hop.

Configuration (``CODNN_TB_CONFIG``): ``nodes``, ``lanes``, ``bound_bits``, ``count``
(values per node), ``idle``/``backpressure`` (probability per cycle). Reports the cycles
of each step.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from codnn.golden.exchange import Codec, chunk_slices, ring_allreduce
from codnn.golden.value_frames import value_frame
from codnn.sim.stimulus import message_values, pauses
from codnn.sim.testbench import load_config, start_clock_and_reset, write_report


class _Cycles:
    def __init__(self, dut):
        self.dut, self.count = dut, 0

    async def run(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.count += 1


async def _hop(links, messages, lanes, budget):
    """Send ``messages[r]`` on link ``r`` for every node at once; the values each link
    delivers, in node order."""
    for (source, _), values in zip(links, messages):
        await source.send(AxiStreamFrame(value_frame(values, lanes)))
    received = []
    for _, sink in links:
        frame = bytes((await with_timeout(sink.recv(), budget, "ns")).tdata)
        received.append(np.frombuffer(frame[4 * lanes:], np.float32).copy())
    return received


@cocotb.test()
async def ring_equals_golden(dut):
    config = load_config()
    seed, lanes, nodes = config["seed"], config["lanes"], config["nodes"]
    b, count = config["bound_bits"], config["count"]
    rng = np.random.default_rng(seed)
    grads = [message_values(rng, count, b) for _ in range(nodes)]
    expected, _ = ring_allreduce(grads, Codec("inceptionn", b))

    dut.bound_bits.value = b
    for r in range(nodes):
        getattr(dut, f"s{r}_axis_tvalid").value = 0
        getattr(dut, f"m{r}_axis_tready").value = 0
    await start_clock_and_reset(dut)
    pace = random.Random(seed)
    links = []
    for r in range(nodes):
        source = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s{r}_axis"), dut.clk, dut.rst)
        sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m{r}_axis"), dut.clk, dut.rst)
        if config["idle"]:
            source.set_pause_generator(pauses(pace, config["idle"]))
        if config["backpressure"]:
            sink.set_pause_generator(pauses(pace, config["backpressure"]))
        links.append((source, sink))
    cycles = _Cycles(dut)
    cocotb.start_soon(cycles.run())
    budget = (count // lanes + 200) * 10 * 40

    part = chunk_slices(count, nodes)
    acc = [g.copy() for g in grads]
    steps = []
    for s in range(nodes - 1):                              # reduce-scatter
        start = cycles.count
        received = await _hop(links, [acc[r][part[(r - s) % nodes]] for r in range(nodes)],
                              lanes, budget)
        for r, values in enumerate(received):
            node, chunk = (r + 1) % nodes, part[(r - s) % nodes]
            acc[node][chunk] = values + acc[node][chunk]
        steps.append(cycles.count - start)
    out = [np.empty(count, np.float32) for _ in range(nodes)]
    sending = [acc[r][part[(r + 1) % nodes]] / np.float32(nodes) for r in range(nodes)]
    for s in range(nodes - 1):                              # all-gather
        start = cycles.count
        received = await _hop(links, sending, lanes, budget)
        for r, values in enumerate(received):
            chunk = part[(r + 1 - s) % nodes]
            out[(r + 1) % nodes][chunk] = values
            if s == 0:
                out[r][chunk] = values              # the owner keeps what its message decodes to
        # Each node forwards what it received: node r + 1 got link r's values.
        sending = [received[(r - 1) % nodes] for r in range(nodes)]
        steps.append(cycles.count - start)

    for node in range(nodes):
        got, want = out[node].view(np.uint32), expected[node].view(np.uint32)
        if not np.array_equal(got, want):
            first = int(np.argmax(got != want))
            raise AssertionError(f"node {node}, value {first}: {got[first]:#010x}, golden "
                                 f"{want[first]:#010x} (seed {seed})")
    assert int(dut.error_count.value) == 0
    write_report(config, {"step_cycles": steps, "cycles": sum(steps)})
