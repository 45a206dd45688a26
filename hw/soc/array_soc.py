"""A board-ready top: a weight-stationary array behind the UART host link."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from amaranth.utils import ceil_log2

from codnn.hw.common.fsm_flags import state_flags
from codnn.hw.common.params import positive_int

from .executor import request_states, response_states
from .link import HostLink, check_link
from .protocol import (
    CONFIG_FIELDS,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    STATUS_BYTES,
    STATUS_FIELDS,
    Command,
    EngineKind,
    Status,
)

__all__ = ["ArraySoc", "status_block"]


def _nbytes(bits):
    return -(-bits // 8)


def status_block(engine, config, values):
    """The STATUS payload (``codnn.hw.soc.protocol.STATUS_FIELDS``) as one value: ``values`` by
    field name (ints or signals of the field's width; version, max payload and ``config``,
    the engine's parameters by ``CONFIG_FIELDS[engine]``, filled in; the rest zero)."""
    packed, offset = 0, 0
    for name, bits in CONFIG_FIELDS[engine]:
        packed |= int(config[name]) << offset
        offset += bits
    values = {"version": PROTOCOL_VERSION, "engine": engine, "max_payload": MAX_PAYLOAD,
              "config": packed, **values}
    parts = []
    for name, bits in STATUS_FIELDS:
        value = values.get(name, 0)
        parts.append(value if isinstance(value, Value) else Const(value, bits))
        assert len(parts[-1]) == bits, name
    return Cat(*parts)


@dataclass(slots=True)
class _Top:
    """What the top's stages share (and the RESET proof reads as ``formal_state``), each
    field set by the stage named above it."""

    # _memories: the weight rows, data vectors and results, a write and a read port each.
    weight_w: object = None
    weight_r: object = None
    data_w: object = None
    data_r: object = None
    result_w: object = None
    result_r: object = None
    # _registers: the request (command, length, its first five payload bytes and their
    # first and second 16-bit fields), what the top holds, the reply, the counters.
    command: Signal = None
    length: Signal = None
    args: Signal = None
    first: Value = None
    second: Value = None
    written: Signal = None              # weight rows written since the last RESET
    loaded: Signal = None
    valid: Signal = None
    result_count: Signal = None
    cycles: Signal = None
    status: Signal = None
    reply_length: Signal = None
    word_bytes: int = None
    word: Signal = None                 # request bytes shift in at the top
    out_word: Signal = None             # response bytes leave at the bottom
    out_bytes: Signal = None
    index: Signal = None                # payload byte: args, copies
    byte_in_word: Signal = None
    address: Signal = None              # memory row / vector
    count: Signal = None                # rows or vectors of the request
    end: Signal = None
    accumulate: Signal = None
    primed: Signal = None
    results_in: Signal = None
    overflow: Signal = None             # the result memory is full
    results_follow: Signal = None       # the reply's payload: results
    # elaborate: the FSM's states.
    states: object = None


class ArraySoc(wiring.Component):
    """A weight-stationary array (``codnn.hw.common.ws_array.WeightStationaryArray``: the
    systolic or the TQ array; or ``codnn.hw.soc.nic.NicCore``, a NIC engine with the same
    streams) with memories for one tile, run by requests over a UART.

    Memories: the tile's weights (``rows`` rows of ``weight_row_bytes``), ``depth`` data
    vectors (``data_vector_bytes``: the ``x`` field of a data beat) and ``depth`` results
    (``result_vector_bytes``: the ``acc`` field). Rows, vectors and results travel as
    little-endian bytes of the array's own bit layouts.

    Requests (``codnn.hw.soc.protocol.Command``): ``WRITE_WEIGHTS`` and ``WRITE_DATA`` copy whole
    rows or vectors from the request into the memories (the tile's weights count as loaded
    once every row has been written since power-up or the last ``RESET``); ``RUN`` feeds the
    weights, then ``count`` data vectors with partial sums 0 or, with the accumulate flag,
    the stored results, stores the results (one per vector; a NIC core's output beats and
    terminator, those past ``depth`` dropped with a ``BAD_ARGUMENT`` answer) until the one
    marked last and answers with the cycles it took (u32); ``READ_RESULTS`` sends stored
    results; ``STATUS`` answers with the status block; ``RESET`` forgets the weights (each
    row must be written again) and results, zeroes the data memory (``depth`` cycles) and
    the counters. Writing data or running before weights gives ``NO_WEIGHTS``, reading or
    accumulating before a run ``NO_RESULTS``, a row, vector or count outside the memories
    (or, accumulating, beyond the stored results) or a payload of the wrong size
    ``BAD_ARGUMENT``.

    The status block is ``codnn.hw.soc.protocol.STATUS_FIELDS``: the array's configuration,
    whether weights and results are held, the link's frame counters, the stored results
    and the last run's cycles.

    Elaborated for the ``"formal"`` platform, the top keeps its registers and a flag for
    each state of its executor in ``formal_state`` (``codnn.hw.formal.soc_reset``).

    Latency of ``RUN``: ``rows`` cycles of weights, then the array's (its latency plus one
    beat per vector, ``ColumnCombinedArray``), plus a few cycles of memory reads.

    Parameters
    ----------
    array : WeightStationaryArray or NicCore
        The array (``rows``, ``cols``, ``acc_bits`` at most 255; streams ``weights``,
        ``data`` with ``x``, ``psum``, ``last``, ``result`` with ``acc``, ``last``).
    engine : codnn.hw.soc.protocol.EngineKind
        What the STATUS block says the device runs.
    config : dict
        The engine's parameters for the STATUS block (``CONFIG_FIELDS[engine]``).
    depth : int
        Data vectors and results held (1..65535).
    divisor : int
        Clock cycles per UART bit.
    timeout_bytes : int
        Quiet byte times that end a frame cut short (``HostLink``).
    link : wiring.Component, optional
        What the requests come through: ``HostLink(divisor=divisor,
        timeout_bytes=timeout_bytes)`` if not given; else a component with its signature
        (``rx``, ``tx`` and ``codnn.hw.soc.link_frames.executor_ports``), such as the
        ports a proof drives (``codnn.hw.formal.soc_reset``).

    Attributes
    ----------
    rx : In(1)
    tx : Out(1)
    busy : Out(1)
        High while a request executes (an LED).

    Raises
    ------
    ValueError
        For a size or config value too wide for its STATUS field, a depth outside
        1..65535, or a weight row or data vector too wide for one request.
    """

    def __init__(self, array, *, engine, config, depth=64, divisor=104, timeout_bytes=2000,
                 link=None):
        self._array, self._engine, self._config = array, EngineKind(engine), dict(config)
        fields = dict(CONFIG_FIELDS[self._engine])
        for value, what, bits in ((array.rows, "Row count", 8), (array.cols, "Column count", 8),
                                  (array.acc_bits, "Accumulator width", 8),
                                  *((config[name], name, fields[name]) for name in fields)):
            if value >= 1 << bits:
                raise ValueError(f"{what} must be at most {(1 << bits) - 1} for the host "
                                 f"link, not {value}")
        positive_int(depth, "Depth")
        if depth > 0xFFFF:
            raise ValueError(f"Depth must be at most 65535 vectors, not {depth}")
        self._depth = depth
        self._row_bits = len(Value.cast(array.weights.payload))
        self._vector_bits = len(Value.cast(array.data.payload.x))
        self._result_bits = len(Value.cast(array.result.payload.acc))
        for bits, what in ((self._row_bits, "A weight row"), (self._vector_bits, "A data vector")):
            if _nbytes(bits) > MAX_PAYLOAD - 2:
                raise ValueError(f"{what} takes {_nbytes(bits)} bytes, more than one request "
                                 f"carries ({MAX_PAYLOAD - 2}); use a smaller array")
        check_link(divisor, timeout_bytes)
        if link is None:
            link = HostLink(divisor=divisor, timeout_bytes=timeout_bytes)
        self._link = link
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1)})

    array = property(lambda self: self._array, doc="The array.")
    link = property(lambda self: self._link, doc="The host link, or what is in its place.")
    depth = property(lambda self: self._depth, doc="Data vectors and results held.")
    weight_row_bytes = property(lambda self: _nbytes(self._row_bits))
    data_vector_bytes = property(lambda self: _nbytes(self._vector_bits))
    result_vector_bytes = property(lambda self: _nbytes(self._result_bits))

    def _status_block(self, loaded, valid, result_count, cycles, link):
        a = self.array
        return status_block(self._engine, self._config, {
            "rows": a.rows, "cols": a.cols, "acc_bits": a.acc_bits, "depth": self.depth,
            "weights_loaded": loaded, "results_valid": valid, "frames_ok": link.frames_ok,
            "frames_bad": link.frames_bad, "result_count": result_count,
            "last_run_cycles": cycles})

    def elaborate(self, platform):
        m = Module()
        k = _Top()
        m.submodules.link = link = self._link
        m.submodules.array = self._array
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx),
                     self.busy.eq(link.request.ready == 0)]
        self._memories(m, k)
        self._registers(m, k)
        with m.FSM() as fsm:
            request_states(m, link, command=k.command, length=k.length, args=k.args,
                           index=k.index, then="DECODE")
            with m.State("DECODE"):
                self._decode(m, k)
            self._copy_states(m, k)
            # RESET: the data memory is zeroed, a vector per cycle.
            with m.State("CLEAR"):
                m.d.comb += [k.data_w.addr.eq(k.address), k.data_w.data.eq(0),
                             k.data_w.en.eq(1)]
                m.d.sync += k.address.eq(k.address + 1)
                with m.If(k.address == self.depth - 1):
                    self._reply(m, k, Status.OK)
            self._run_states(m, k)
            # Responses: the header, then the bytes of out_word (results: one per vector).
            result_r = k.result_r
            response_states(m, link, status=k.status, reply_length=k.reply_length,
                            out_word=k.out_word, out_bytes=k.out_bytes,
                            words=k.results_follow, address=k.address, end=k.end,
                            fetch=lambda at: result_r.addr.eq(at),
                            load=lambda: (result_r.data, self.result_vector_bytes))
            k.states = state_flags(fsm)
        self._store_results(m, k)
        if platform == "formal":
            self.formal_state = k       # read by the RESET proof, elaborated next
        return m

    def _memories(self, m, k):
        """The weight rows, the data vectors and the results, each a memory with a write
        port and a read port (data a cycle after the address)."""
        m.submodules.weight_mem = weight_mem = memory.Memory(
            shape=self._row_bits, depth=self.array.rows, init=[])
        m.submodules.data_mem = data_mem = memory.Memory(
            shape=self._vector_bits, depth=self.depth, init=[])
        m.submodules.result_mem = result_mem = memory.Memory(
            shape=self._result_bits, depth=self.depth, init=[])
        weight_w, weight_r = weight_mem.write_port(), weight_mem.read_port(transparent_for=())
        data_w, data_r = data_mem.write_port(), data_mem.read_port(transparent_for=())
        result_w, result_r = result_mem.write_port(), result_mem.read_port(transparent_for=())
        k.weight_w, k.weight_r, k.data_w, k.data_r = weight_w, weight_r, data_w, data_r
        k.result_w, k.result_r = result_w, result_r

    def _registers(self, m, k):
        """A request's command, length and first payload bytes; what the top holds
        (weight rows written, results valid and their count, the last run's cycles); the
        reply; the copy's and the run's counters."""
        R, RB = self.array.rows, self.result_vector_bytes
        k.command, k.length = Signal(8, name="command"), Signal(16, name="length")
        k.args = Signal(40, name="args")
        k.first, k.second = k.args[:16], k.args[16:32]
        k.written = Signal(R, name="written")
        k.loaded, k.valid = Signal(name="loaded"), Signal(name="valid")
        m.d.comb += k.loaded.eq(k.written.all())
        k.result_count = Signal(16, name="result_count")
        k.cycles = Signal(32, name="cycles")
        k.status, k.reply_length = Signal(8, name="status"), Signal(16, name="reply_length")
        k.word_bytes = max(self.weight_row_bytes, self.data_vector_bytes)
        k.word = Signal(8 * k.word_bytes, name="word")
        k.out_word = Signal(max(8 * RB, 8 * STATUS_BYTES), name="out_word")
        k.out_bytes = Signal(range(max(RB, STATUS_BYTES) + 1), name="out_bytes")
        k.index = Signal(range(MAX_PAYLOAD + 1), name="index")
        k.byte_in_word = Signal(range(k.word_bytes), name="byte_in_word")
        k.address = Signal(16, name="address")
        k.count = Signal(16, name="count")
        k.end = Signal(17, name="end")
        k.accumulate, k.primed = Signal(name="accumulate"), Signal(name="primed")
        k.results_in = Signal(16, name="results_in")
        k.overflow = Signal(name="overflow")
        k.results_follow = Signal(name="results_follow")

    @staticmethod
    def _reply(m, k, code, nbytes=0, then_results=False):
        m.d.sync += [k.status.eq(code), k.reply_length.eq(nbytes),
                     k.results_follow.eq(then_results)]
        m.next = "HEADER"

    def _decode(self, m, k):
        """DECODE: a request's arguments checked; a reply, or the state that goes on."""
        D, RB, reply = self.depth, self.result_vector_bytes, self._reply
        first, second, length, command = k.first, k.second, k.length, k.command
        m.d.sync += [k.address.eq(first), k.count.eq(0), k.end.eq(2), k.index.eq(2),
                     k.byte_in_word.eq(0)]
        with m.Switch(command):
            with m.Case(Command.RESET, Command.STATUS):
                with m.If(length != 0):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Elif(command == Command.RESET):
                    m.d.sync += [k.written.eq(0), k.valid.eq(0), k.result_count.eq(0),
                                 k.cycles.eq(0), k.address.eq(0)]
                    m.d.comb += self._link.clear.eq(1)
                    m.next = "CLEAR"
                with m.Else():
                    m.d.sync += [k.out_word.eq(self._status_block(
                        k.loaded, k.valid, k.result_count, k.cycles, self._link)),
                        k.out_bytes.eq(STATUS_BYTES)]
                    reply(m, k, Status.OK, STATUS_BYTES)
            with m.Case(Command.WRITE_WEIGHTS):
                m.next = "MEASURE"
            with m.Case(Command.WRITE_DATA):
                with m.If(~k.loaded):
                    reply(m, k, Status.NO_WEIGHTS)
                with m.Else():
                    m.next = "MEASURE"
            with m.Case(Command.RUN):
                m.d.sync += [k.count.eq(first), k.accumulate.eq(second[0])]
                with m.If(length != 3):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Elif(~k.loaded):
                    reply(m, k, Status.NO_WEIGHTS)
                with m.Elif(second[0] & ~k.valid):
                    reply(m, k, Status.NO_RESULTS)
                with m.Elif((first == 0) | (first > D)
                            | (second[0] & (first > k.result_count))):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Else():
                    m.d.sync += [k.address.eq(0), k.primed.eq(0), k.cycles.eq(0),
                                 k.results_in.eq(0), k.overflow.eq(0), k.valid.eq(0)]
                    m.next = "RUN_WEIGHTS"
            with m.Case(Command.READ_RESULTS):
                m.d.sync += [k.count.eq(second), k.end.eq(first + second)]
                with m.If(length != 4):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Elif(~k.valid):
                    reply(m, k, Status.NO_RESULTS)
                with m.Elif((second == 0) | (first + second > k.result_count)
                            | (second > 0xFFFF // RB)):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Else():
                    reply(m, k, Status.OK, second * RB, then_results=True)
            with m.Default():
                reply(m, k, Status.UNKNOWN_COMMAND)

    def _copy_states(self, m, k):
        """WRITE_*: count the whole rows or vectors in the payload (no divider), then
        copy them into the weight or data memory, a byte a cycle."""
        R, D, reply = self.array.rows, self.depth, self._reply
        WB, DB, word_bytes = self.weight_row_bytes, self.data_vector_bytes, k.word_bytes
        is_weights = k.command == Command.WRITE_WEIGHTS
        weight_w, data_w, address = k.weight_w, k.data_w, k.address
        with m.State("MEASURE"):
            with m.If(k.end < k.length):
                m.d.sync += [k.end.eq(k.end + Mux(is_weights, WB, DB)),
                             k.count.eq(k.count + 1)]
            with m.Elif((k.end != k.length) | (k.count == 0)
                        | (k.first + k.count > Mux(is_weights, R, D))):
                reply(m, k, Status.BAD_ARGUMENT)
            with m.Else():
                m.next = "COPY_ADDRESS"
        with m.State("COPY_ADDRESS"):
            m.d.comb += self._link.buffer_addr.eq(k.index)
            m.d.sync += k.index.eq(k.index + 1)
            m.next = "COPY_DATA"
        with m.State("COPY_DATA"):
            new_word = Cat(k.word[8:], self._link.buffer_data)
            m.d.sync += [k.word.eq(new_word), k.byte_in_word.eq(k.byte_in_word + 1)]
            m.d.comb += [weight_w.addr.eq(address), data_w.addr.eq(address),
                         weight_w.data.eq(new_word[8 * (word_bytes - WB):]),
                         data_w.data.eq(new_word[8 * (word_bytes - DB):])]
            with m.If(k.byte_in_word == Mux(is_weights, WB - 1, DB - 1)):
                m.d.comb += [weight_w.en.eq(is_weights), data_w.en.eq(~is_weights)]
                m.d.sync += [k.byte_in_word.eq(0), address.eq(address + 1)]
                with m.If(is_weights):
                    m.d.sync += k.written.bit_select(address[:ceil_log2(R) or 1], 1).eq(1)
            with m.If(k.index == k.length):
                reply(m, k, Status.OK)
            with m.Else():
                m.next = "COPY_ADDRESS"

    def _run_states(self, m, k):
        """RUN: the tile's weights, then the data beats (results stored as they come:
        ``_store_results``), then the tile's last result; its cycles are the reply."""
        array, R, address = self._array, self.array.rows, k.address
        with m.State("RUN_WEIGHTS"):
            fire = array.weights.valid & array.weights.ready
            m.d.comb += [k.weight_r.addr.eq(Mux(fire, address + 1, address)),
                         array.weights.payload.eq(k.weight_r.data),
                         array.weights.valid.eq(k.primed)]
            m.d.sync += [k.primed.eq(1), k.cycles.eq(k.cycles + 1)]
            with m.If(fire):
                m.d.sync += address.eq(address + 1)
                with m.If(address == R - 1):
                    m.d.sync += [address.eq(0), k.primed.eq(0)]
                    m.next = "RUN_DATA"
        with m.State("RUN_DATA"):
            fire = array.data.valid & array.data.ready
            read_at = Mux(fire, address + 1, address)
            m.d.comb += [k.data_r.addr.eq(read_at), k.result_r.addr.eq(read_at),
                         array.data.payload.x.eq(k.data_r.data),
                         array.data.payload.psum.eq(Mux(k.accumulate, k.result_r.data, 0)),
                         array.data.payload.last.eq(address == k.count - 1),
                         array.data.valid.eq(k.primed)]
            m.d.sync += [k.primed.eq(1), k.cycles.eq(k.cycles + 1)]
            with m.If(fire):
                m.d.sync += address.eq(address + 1)
                with m.If(address == k.count - 1):
                    m.next = "RUN_DRAIN"
        with m.State("RUN_DRAIN"):
            m.d.sync += k.cycles.eq(k.cycles + 1)
            with m.If(array.result.valid & array.result.payload.last):
                m.d.sync += [k.valid.eq(1), k.result_count.eq(k.results_in + ~k.overflow),
                             k.cycles.eq(k.cycles + 1), k.out_word.eq(k.cycles + 1),
                             k.out_bytes.eq(4)]
                with m.If(k.overflow):
                    self._reply(m, k, Status.BAD_ARGUMENT)
                with m.Else():
                    self._reply(m, k, Status.OK, 4)

    def _store_results(self, m, k):
        """Results go into the result memory as they leave the array (only RUN makes
        any); an array makes one per vector, a NIC engine what it makes: those past the
        memory are dropped and the run answers BAD_ARGUMENT."""
        array = self._array
        m.d.comb += [array.result.ready.eq(1),
                     k.result_w.addr.eq(k.results_in),
                     k.result_w.data.eq(array.result.payload.acc),
                     k.result_w.en.eq(array.result.valid & ~k.overflow)]
        with m.If(array.result.valid & ~k.overflow):
            m.d.sync += k.results_in.eq(k.results_in + 1)
            with m.If(k.results_in == self.depth - 1):
                m.d.sync += k.overflow.eq(1)
