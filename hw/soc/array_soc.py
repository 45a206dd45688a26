"""A board-ready top: a weight-stationary array behind the UART host link."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from amaranth.utils import ceil_log2

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
    Engine,
    Status,
)

__all__ = ["ArraySoc", "status_block"]


def _nbytes(bits):
    return -(-bits // 8)


def status_block(engine, config, values):
    """The STATUS payload (``hw.soc.protocol.STATUS_FIELDS``) as one value: ``values`` by
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


class ArraySoc(wiring.Component):
    """A weight-stationary array (``hw.common.ws_array.WeightStationaryArray``: the
    systolic or the TQ array; or ``hw.soc.nic.NicCore``, a NIC engine with the same
    streams) with memories for one tile, run by requests over a UART.

    Memories: the tile's weights (``rows`` rows of ``weight_row_bytes``), ``depth`` data
    vectors (``data_vector_bytes``: the ``x`` field of a data beat) and ``depth`` results
    (``result_vector_bytes``: the ``acc`` field). Rows, vectors and results travel as
    little-endian bytes of the array's own bit layouts.

    Requests (``hw.soc.protocol.Command``): ``WRITE_WEIGHTS`` and ``WRITE_DATA`` copy whole
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

    The status block is ``hw.soc.protocol.STATUS_FIELDS``: the array's configuration,
    whether weights and results are held, the link's frame counters, the stored results
    and the last run's cycles.

    Latency of ``RUN``: ``rows`` cycles of weights, then the array's (its latency plus one
    beat per vector, ``ColumnCombinedArray``), plus a few cycles of memory reads.

    Parameters
    ----------
    array : WeightStationaryArray or NicCore
        The array (``rows``, ``cols``, ``acc_bits`` at most 255; streams ``weights``,
        ``data`` with ``x``, ``psum``, ``last``, ``result`` with ``acc``, ``last``).
    engine : hw.soc.protocol.Engine
        What the STATUS block says the device runs.
    config : dict
        The engine's parameters for the STATUS block (``CONFIG_FIELDS[engine]``).
    depth : int
        Data vectors and results held (1..65535).
    divisor : int
        Clock cycles per UART bit.
    timeout_bytes : int
        Quiet byte times that end a frame cut short (``HostLink``).

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

    def __init__(self, array, *, engine, config, depth=64, divisor=104, timeout_bytes=2000):
        self._array, self._engine, self._config = array, Engine(engine), dict(config)
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
        self._link = HostLink(divisor=divisor, timeout_bytes=timeout_bytes)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1)})

    array = property(lambda self: self._array, doc="The array.")
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
        m.submodules.link = link = self._link
        m.submodules.array = array = self._array
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx)]
        R, D = self.array.rows, self.depth
        WB, DB, RB = self.weight_row_bytes, self.data_vector_bytes, self.result_vector_bytes

        m.submodules.weight_mem = weight_mem = memory.Memory(
            shape=self._row_bits, depth=R, init=[])
        m.submodules.data_mem = data_mem = memory.Memory(
            shape=self._vector_bits, depth=D, init=[])
        m.submodules.result_mem = result_mem = memory.Memory(
            shape=self._result_bits, depth=D, init=[])
        weight_w, weight_r = weight_mem.write_port(), weight_mem.read_port(transparent_for=())
        data_w, data_r = data_mem.write_port(), data_mem.read_port(transparent_for=())
        result_w, result_r = result_mem.write_port(), result_mem.read_port(transparent_for=())

        command = Signal(8)
        length = Signal(16)
        args = Signal(40)                       # the first five payload bytes
        first, second = args[:16], args[16:32]
        written = Signal(R)                     # weight rows written since the last RESET
        loaded, valid = Signal(), Signal()      # weights loaded, results valid
        m.d.comb += loaded.eq(written.all())
        result_count = Signal(16)
        cycles = Signal(32)
        status, reply_length = Signal(8), Signal(16)
        word_bytes = max(WB, DB)
        word = Signal(8 * word_bytes)           # request bytes shift in at the top
        out_bits = max(8 * RB, 8 * STATUS_BYTES)
        out_word = Signal(out_bits)             # response bytes leave at the bottom
        out_bytes = Signal(range(max(RB, STATUS_BYTES) + 1))
        index = Signal(range(MAX_PAYLOAD + 1))  # payload byte (args, copies)
        byte_in_word = Signal(range(word_bytes))
        address = Signal(16)                    # memory row / vector
        count = Signal(16)                      # rows or vectors of the request
        end = Signal(17)
        accumulate = Signal()
        primed = Signal()
        results_in = Signal(16)
        overflow = Signal()                     # the result memory is full

        m.d.comb += self.busy.eq(link.request.ready == 0)

        results_follow = Signal()               # the reply's payload: stored results

        def reply(code, nbytes=0, then_results=False):
            m.d.sync += [status.eq(code), reply_length.eq(nbytes),
                         results_follow.eq(then_results)]
            m.next = "HEADER"

        with m.FSM():
            request_states(m, link, command=command, length=length, args=args, index=index,
                           then="DECODE")
            with m.State("DECODE"):
                m.d.sync += [address.eq(first), count.eq(0), end.eq(2), index.eq(2),
                             byte_in_word.eq(0)]
                with m.Switch(command):
                    with m.Case(Command.RESET, Command.STATUS):
                        with m.If(length != 0):
                            reply(Status.BAD_ARGUMENT)
                        with m.Elif(command == Command.RESET):
                            m.d.sync += [written.eq(0), valid.eq(0), result_count.eq(0),
                                         cycles.eq(0), address.eq(0)]
                            m.d.comb += link.clear.eq(1)
                            m.next = "CLEAR"
                        with m.Else():
                            m.d.sync += [out_word.eq(self._status_block(
                                loaded, valid, result_count, cycles, link)),
                                out_bytes.eq(STATUS_BYTES)]
                            reply(Status.OK, STATUS_BYTES)
                    with m.Case(Command.WRITE_WEIGHTS):
                        m.next = "MEASURE"
                    with m.Case(Command.WRITE_DATA):
                        with m.If(~loaded):
                            reply(Status.NO_WEIGHTS)
                        with m.Else():
                            m.next = "MEASURE"
                    with m.Case(Command.RUN):
                        m.d.sync += [count.eq(first), accumulate.eq(second[0])]
                        with m.If(length != 3):
                            reply(Status.BAD_ARGUMENT)
                        with m.Elif(~loaded):
                            reply(Status.NO_WEIGHTS)
                        with m.Elif(second[0] & ~valid):
                            reply(Status.NO_RESULTS)
                        with m.Elif((first == 0) | (first > D)
                                    | (second[0] & (first > result_count))):
                            reply(Status.BAD_ARGUMENT)
                        with m.Else():
                            m.d.sync += [address.eq(0), primed.eq(0), cycles.eq(0),
                                         results_in.eq(0), overflow.eq(0), valid.eq(0)]
                            m.next = "RUN_WEIGHTS"
                    with m.Case(Command.READ_RESULTS):
                        m.d.sync += [count.eq(second), end.eq(first + second)]
                        with m.If(length != 4):
                            reply(Status.BAD_ARGUMENT)
                        with m.Elif(~valid):
                            reply(Status.NO_RESULTS)
                        with m.Elif((second == 0) | (first + second > result_count)
                                    | (second > 0xFFFF // RB)):
                            reply(Status.BAD_ARGUMENT)
                        with m.Else():
                            reply(Status.OK, second * RB, then_results=True)
                    with m.Default():
                        reply(Status.UNKNOWN_COMMAND)

            # WRITE_*: count the whole rows or vectors in the payload (no divider), copy.
            is_weights = command == Command.WRITE_WEIGHTS
            with m.State("MEASURE"):
                with m.If(end < length):
                    m.d.sync += [end.eq(end + Mux(is_weights, WB, DB)), count.eq(count + 1)]
                with m.Elif((end != length) | (count == 0)
                            | (first + count > Mux(is_weights, R, D))):
                    reply(Status.BAD_ARGUMENT)
                with m.Else():
                    m.next = "COPY_ADDRESS"
            with m.State("COPY_ADDRESS"):
                m.d.comb += link.buffer_addr.eq(index)
                m.d.sync += index.eq(index + 1)
                m.next = "COPY_DATA"
            with m.State("COPY_DATA"):
                new_word = Cat(word[8:], link.buffer_data)
                m.d.sync += [word.eq(new_word), byte_in_word.eq(byte_in_word + 1)]
                m.d.comb += [weight_w.addr.eq(address), data_w.addr.eq(address),
                             weight_w.data.eq(new_word[8 * (word_bytes - WB):]),
                             data_w.data.eq(new_word[8 * (word_bytes - DB):])]
                with m.If(byte_in_word == Mux(is_weights, WB - 1, DB - 1)):
                    m.d.comb += [weight_w.en.eq(is_weights), data_w.en.eq(~is_weights)]
                    m.d.sync += [byte_in_word.eq(0), address.eq(address + 1)]
                    with m.If(is_weights):
                        m.d.sync += written.bit_select(address[:ceil_log2(R) or 1], 1).eq(1)
                with m.If(index == length):
                    reply(Status.OK)
                with m.Else():
                    m.next = "COPY_ADDRESS"

            # RESET: the data memory is zeroed, a vector per cycle.
            with m.State("CLEAR"):
                m.d.comb += [data_w.addr.eq(address), data_w.data.eq(0), data_w.en.eq(1)]
                m.d.sync += address.eq(address + 1)
                with m.If(address == D - 1):
                    reply(Status.OK)

            # RUN: the tile's weights, then the data beats; results stored as they come.
            with m.State("RUN_WEIGHTS"):
                fire = array.weights.valid & array.weights.ready
                m.d.comb += [weight_r.addr.eq(Mux(fire, address + 1, address)),
                             array.weights.payload.eq(weight_r.data),
                             array.weights.valid.eq(primed)]
                m.d.sync += [primed.eq(1), cycles.eq(cycles + 1)]
                with m.If(fire):
                    m.d.sync += address.eq(address + 1)
                    with m.If(address == R - 1):
                        m.d.sync += [address.eq(0), primed.eq(0)]
                        m.next = "RUN_DATA"
            with m.State("RUN_DATA"):
                fire = array.data.valid & array.data.ready
                read_at = Mux(fire, address + 1, address)
                m.d.comb += [data_r.addr.eq(read_at), result_r.addr.eq(read_at),
                             array.data.payload.x.eq(data_r.data),
                             array.data.payload.psum.eq(Mux(accumulate, result_r.data, 0)),
                             array.data.payload.last.eq(address == count - 1),
                             array.data.valid.eq(primed)]
                m.d.sync += [primed.eq(1), cycles.eq(cycles + 1)]
                with m.If(fire):
                    m.d.sync += address.eq(address + 1)
                    with m.If(address == count - 1):
                        m.next = "RUN_DRAIN"
            with m.State("RUN_DRAIN"):
                m.d.sync += cycles.eq(cycles + 1)
                with m.If(array.result.valid & array.result.payload.last):
                    m.d.sync += [valid.eq(1), result_count.eq(results_in + ~overflow),
                                 cycles.eq(cycles + 1), out_word.eq(cycles + 1),
                                 out_bytes.eq(4)]
                    with m.If(overflow):
                        reply(Status.BAD_ARGUMENT)
                    with m.Else():
                        reply(Status.OK, 4)

            # Responses: the header, then the bytes of out_word (results: one per vector).
            response_states(m, link, status=status, reply_length=reply_length,
                            out_word=out_word, out_bytes=out_bytes, words=results_follow,
                            address=address, end=end,
                            fetch=lambda at: result_r.addr.eq(at),
                            load=lambda: (result_r.data, RB))

        # Results go into the result memory as they leave the array (only RUN makes any);
        # an array makes one per vector, a NIC engine what it makes: those past the memory
        # are dropped and the run answers BAD_ARGUMENT.
        m.d.comb += [array.result.ready.eq(1),
                     result_w.addr.eq(results_in), result_w.data.eq(array.result.payload.acc),
                     result_w.en.eq(array.result.valid & ~overflow)]
        with m.If(array.result.valid & ~overflow):
            m.d.sync += results_in.eq(results_in + 1)
            with m.If(results_in == D - 1):
                m.d.sync += overflow.eq(1)
        return m
