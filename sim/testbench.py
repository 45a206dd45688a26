"""The kit every cocotb testbench of codnn uses: configuration, clock and reset, stream
endpoints with random idle cycles and backpressure, and the report file.

Stream endpoints follow Amaranth's port names (``<name>__valid``, ``__ready``, ``__payload``).
They are stepped once per clock cycle by the testbench: right after a rising edge the
handles still show the values the flip-flops sampled at that edge, so ``step`` first records
the handshake that happened there, then drives the next cycle's values.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from codnn.golden.lanes import pack_lanes, unpack_lanes
from codnn.golden.systolic import output_stage

__all__ = ["load_config", "write_report", "start_clock_and_reset", "clock_edges",
           "StreamSource", "StreamSink", "pack_lanes", "unpack_lanes", "check_stream",
           "run_array", "result_checker", "tile_stage"]


def load_config():
    """Return the testbench configuration the runner passed in ``CODNN_TB_CONFIG``."""
    config = json.loads(os.environ["CODNN_TB_CONFIG"])
    cocotb.log.info("codnn testbench seed=%d config=%s", config["seed"], config)
    return config


def write_report(config, report):
    """Write the testbench's findings where the runner reads them."""
    with open(config["report"], "w") as f:
        json.dump(report, f)


async def start_clock_and_reset(dut, cycles=2):
    """Start a 10 ns clock on ``dut.clk`` and hold ``dut.rst`` high for ``cycles`` edges."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0


async def clock_edges(dut, limit, stalled):
    """Yield 1, 2, ... after each rising edge of ``dut.clk``, up to ``limit`` edges; then fail
    with ``stalled()`` (a description of what never arrived) instead of hanging."""
    for cycle in range(1, limit + 1):
        await RisingEdge(dut.clk)
        yield cycle
    raise AssertionError(stalled())


class StreamSource:
    """Drives an input stream of the DUT from a list of payload integers.

    Between beats it stays idle with probability ``idle`` per cycle. With ``side``, a
    list of ``(handle, values)``, each ``handle`` is driven with its ``values[k]`` while
    beat ``k`` is offered (settings the DUT takes with the beat).
    """

    def __init__(self, dut, name, payloads, rng: random.Random, idle=0.0, side=()):
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._payload = getattr(dut, f"{name}__payload")
        self._pending = list(payloads)
        self._side = [(handle, list(values)) for handle, values in side]
        self._rng = rng
        self._idle = idle
        self.sent = 0
        self._valid.value = 0

    @property
    def done(self):
        return not self._pending and not int(self._valid.value)

    def step(self):
        """Record the handshake at the edge just passed, then drive the next cycle.

        Returns True when a beat was accepted at that edge.
        """
        accepted = bool(int(self._valid.value) and int(self._ready.value))
        if accepted:
            self.sent += 1
        if accepted or not int(self._valid.value):
            if self._pending and self._rng.random() >= self._idle:
                self._payload.value = self._pending.pop(0)
                for handle, values in self._side:
                    handle.value = values.pop(0)
                self._valid.value = 1
            else:
                self._valid.value = 0
        return accepted


class StreamSink:
    """Takes beats from an output stream of the DUT, with ``ready`` low with probability
    ``backpressure`` per cycle. Received payloads collect in ``beats``; ``held`` counts the
    cycles a beat was offered and not taken."""

    def __init__(self, dut, name, rng: random.Random, backpressure=0.0):
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._payload = getattr(dut, f"{name}__payload")
        self._rng = rng
        self._backpressure = backpressure
        self.beats = []
        self.held = 0
        self._ready.value = 0

    def step(self):
        """Record the handshake at the edge just passed, then drive ``ready`` for the next
        cycle. Returns True when a beat was taken at that edge."""
        taken = bool(int(self._valid.value) and int(self._ready.value))
        if taken:
            self.beats.append(int(self._payload.value))
        elif int(self._valid.value):
            self.held += 1
        self._ready.value = int(self._rng.random() >= self._backpressure)
        return taken


async def _exchange(dut, config, sources, sink, count, check, *, limit):
    """Step ``sources`` and ``sink`` every clock edge until ``count`` beats came out (each
    passed to ``check(k, word)``), failing after ``limit`` edges. Returns the edges of the
    first beat the first source delivered and of the last output beat."""
    first = last = None
    async for cycle in clock_edges(dut, limit, lambda: (
            f"only {len(sink.beats)} of {count} output beats after {limit} cycles "
            f"(seed {config['seed']})")):
        for n, source in enumerate(sources):
            if source.step() and n == 0 and first is None:
                first = cycle
        if sink.step():
            last = cycle
            check(len(sink.beats) - 1, sink.beats[-1])
            if len(sink.beats) == count:
                return first, last


async def check_stream(dut, config, *, source, sink, payloads, expected, check,
                       latency_cycles):
    """Drive ``payloads`` into stream ``source`` and take ``len(expected)`` beats from
    stream ``sink`` (random idle cycles and backpressure from ``config``), calling
    ``check(k, word)`` on each output beat ``k``. Without stalls, the cycles from the first
    accepted input to the last output (both edges included) must equal
    ``len(payloads) + latency_cycles``. Returns that cycle count.
    """
    await start_clock_and_reset(dut)
    rng = random.Random(config["seed"])
    first_in, last_out = await _exchange(
        dut, config, [StreamSource(dut, source, payloads, rng, idle=config["idle"])],
        StreamSink(dut, sink, rng, backpressure=config["backpressure"]), len(expected), check,
        limit=(len(payloads) + latency_cycles) * 20 + 100)
    cycles = last_out - first_in + 1
    if config["idle"] == 0 and config["backpressure"] == 0:
        model = len(payloads) + latency_cycles
        assert cycles == model, (f"{cycles} cycles from first input to last output, "
                                 f"cycle model says {model} (seed {config['seed']})")
    return cycles


def tile_stage(config, row_block):
    """The output stage's ``(shift, multiplier)`` of each array row in a tile of row block
    ``row_block``, from ``config["shift"]`` and ``config["multiplier"]`` (1 when absent):
    each one for the whole layer, or a list with one per layer row (array rows past the
    layer's take 0)."""
    rows = config["rows"]

    def per_row(value):
        if isinstance(value, int):
            return [value] * rows
        part = [int(v) for v in value[row_block * rows:(row_block + 1) * rows]]
        return part + [0] * (rows - len(part))
    return list(zip(per_row(config["shift"]), per_row(config.get("multiplier", 1))))


def _weight_source(dut, config, weight_beats, rng, idle=0.0):
    """The ``weights`` stream's source for beats ``(payload, (shift, multiplier))``: with
    an output stage, ``dut.shift`` (and with the multiplier ``dut.multiplier``) holds the
    row's setting while its beat is offered."""
    payloads, stages = zip(*weight_beats) if weight_beats else ((), ())
    side = []
    if config.get("out_bits") is not None:
        side.append((dut.shift, [shift for shift, _ in stages]))
        if config.get("requant") == "multiplier":
            side.append((dut.multiplier, [factor for _, factor in stages]))
    return StreamSource(dut, "weights", payloads, rng, idle=idle, side=side)


async def _reset_in_flight(dut, config, weight_beats, data_beats, check, rng):
    """Run the layer until ``config["reset_in_flight"]`` data beats were accepted, the
    results taken so far checked; then hold ``dut.rst`` high for one edge, with those
    beats (and the weights of later tiles) still in the array and the streams' valid and
    ready as they were (a beat the array seems to take at that edge is void)."""
    beats = config["reset_in_flight"]
    sources = [_weight_source(dut, config, weight_beats, rng),
               StreamSource(dut, "data", data_beats, rng)]
    sink = StreamSink(dut, "result", rng)
    limit = beats * config.get("beat_cycles", 1) * 20 + 1000
    async for _ in clock_edges(dut, limit, lambda: (
            f"only {sources[1].sent} of {beats} data beats before the reset "
            f"(seed {config['seed']})")):
        for source in sources:
            source.step()
        if sink.step():
            check(len(sink.beats) - 1, sink.beats[-1])
        if sources[1].sent == beats:
            break
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    cocotb.log.info("reset with %d data beats accepted, %d results taken", beats,
                    len(sink.beats))


async def run_array(dut, config, *, weight_beats, data_beats, results, check):
    """Run a weight-stationary array (``codnn.hw.common.ws_array``): all weight beats on
    ``weights`` (``(payload, (shift, multiplier))``, the row's: ``tile_stage``), all
    data beats on ``data`` (random idle cycles), ``results`` beats taken from ``result``
    (random backpressure), ``check(k, word)`` called on each. Returns the
    cycles from the first accepted weight beat to the last result, both included, and the
    cycles a result was held by backpressure.

    With ``config["reset_in_flight"] = n``, the layer first runs until ``n`` data beats
    were accepted and is reset with them in flight (``_reset_in_flight``); then the whole
    layer runs again from its first weight beat, and that run is the one checked and
    counted."""
    await start_clock_and_reset(dut)
    rng = random.Random(config["seed"])
    if config.get("reset_in_flight"):
        await _reset_in_flight(dut, config, weight_beats, data_beats, check, rng)
    sources = [_weight_source(dut, config, weight_beats, rng, idle=config["idle"]),
               StreamSource(dut, "data", data_beats, rng, idle=config["idle"])]
    sink = StreamSink(dut, "result", rng, backpressure=config["backpressure"])
    limit = (len(weight_beats) + len(data_beats) * config.get("beat_cycles", 1)) * 20 + 1000
    first, last_out = await _exchange(dut, config, sources, sink, results, check, limit=limit)
    return last_out - first + 1, sink.held


def result_checker(config, expected):
    """A ``check`` for ``run_array``: result beat ``k`` must hold ``expected[k] = (where,
    acc, last, stages)``: every row's ``acc`` (``acc_bits`` two's complement), with
    ``out_bits`` every row's ``clamp((acc * multiplier) >> shift)`` (its tile's
    ``tile_stage``), and the ``last`` flag."""
    rows, ab, ob, seed = config["rows"], config["acc_bits"], config["out_bits"], config["seed"]

    def check(k, word):
        where, want, want_last, stages = expected[k]
        got = [v - (1 << ab) if v >> (ab - 1) else v for v in unpack_lanes(word, ab, rows)]
        for r in range(rows):
            assert got[r] == int(want[r]), (f"{where} row {r}: acc expected {int(want[r])}, "
                                            f"got {got[r]} (seed {seed})")
        offset = rows * ab
        if ob is not None:
            y = unpack_lanes(word >> offset, ob, rows)
            want_y = output_stage(want, [s for s, _ in stages], ob, [f for _, f in stages])
            for r in range(rows):
                assert y[r] == int(want_y[r]), (f"{where} row {r}: y expected "
                                                f"{int(want_y[r])}, got {y[r]} (seed {seed})")
            offset += rows * ob
        assert (word >> offset) & 1 == want_last, f"{where}: last flag wrong (seed {seed})"

    return check
