"""``RESET`` forgets every weight row: a board top (``codnn.hw.soc.ArraySoc``) driven at
the level of its requests, with ports in the host link's place."""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.formal.streams import stream_rules
from codnn.hw.soc.array_soc import ArraySoc
from codnn.hw.soc.link_frames import executor_ports
from codnn.hw.soc.protocol import MAX_PAYLOAD, Command, Status

__all__ = ["LinkPorts", "soc_reset_top"]


class LinkPorts(wiring.Component):
    """The host link's signature (``HostLink``'s) with nothing inside: a proof drives
    the executor's side of it. No latency: it holds no logic."""

    def __init__(self):
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), **executor_ports()})

    def elaborate(self, platform):
        return Module()


def soc_reset_top(soc):
    """A board top ``soc`` (``ArraySoc``, built with ``link=LinkPorts()``) taking
    requests as its link gives them: any command and length (at most ``MAX_PAYLOAD``)
    at any cycle, held until taken, any payload bytes (read a cycle after their
    address), each response header and byte taken at any pace; a reset at any cycle.
    Beside it (``_RowsWritten``), the rows each ``WRITE_WEIGHTS`` answered ``OK`` wrote
    (from the row its payload's first two bytes give, ``(length - 2) /
    weight_row_bytes`` rows), forgotten at a ``RESET`` answered ``OK``. Properties:

    - a ``RUN`` or ``WRITE_DATA`` is answered ``OK`` only when every weight row has been
      written since the last ``RESET`` (or power-up): ``RESET`` forgets every row;
    - ``NO_WEIGHTS`` is answered only when a row has not: a row written is not lost;
    - a response header only for a request taken, one for each.

    Cover: a ``RUN`` answered ``NO_WEIGHTS`` after a ``RESET`` that followed the last
    row's write."""
    if not isinstance(soc, ArraySoc) or not isinstance(soc.link, LinkPorts):
        raise ValueError("The RESET proof takes an ArraySoc built with link=LinkPorts()")
    m, ports = Module(), soc.link
    m.submodules.soc = soc
    request = ports.request
    m.d.comb += [request.valid.eq(AnySeq(1)), request.payload.eq(AnySeq(24)),
                 Assume(request.payload.length <= MAX_PAYLOAD),
                 ports.response.ready.eq(AnySeq(1)), ports.response_data.ready.eq(AnySeq(1)),
                 ports.frames_ok.eq(AnySeq(16)), ports.frames_bad.eq(AnySeq(16))]
    stream_rules(m, request, "request", assume=True)
    m.submodules.rows = _RowsWritten(soc)
    return m


class _RowsWritten(Elaboratable):
    """``soc_reset_top``'s payload, ghost rows and properties, built once the top has
    been elaborated for the formal platform (its ``formal_state``)."""

    def __init__(self, soc):
        self.soc = soc

    def elaborate(self, platform):
        m, soc = Module(), self.soc
        ports, k = soc.link, soc.formal_state
        request, response = ports.request, ports.response
        rows, row_bytes = soc.array.rows, soc.weight_row_bytes
        # The request served and its payload: the first two bytes held, the others any.
        serving = Signal(name="serving")          # a request taken, its header not yet
        command = Signal(8, name="command")
        length = Signal(16, name="length")
        first = Signal(16, name="first_row")
        address = Signal.like(ports.buffer_addr, name="buffer_address")
        m.d.sync += address.eq(ports.buffer_addr)
        m.d.comb += ports.buffer_data.eq(Mux(address == 0, first[:8],
                                             Mux(address == 1, first[8:], AnySeq(8))))
        with m.If(request.valid & request.ready):
            m.d.sync += [serving.eq(1), command.eq(request.payload.command),
                         length.eq(request.payload.length), first.eq(AnySeq(16))]

        def span(start, end):                     # rows start .. end - 1
            return Cat((start <= r) & (r < end) for r in range(rows))
        count = 0
        for n in range(1, rows + 1):
            count = Mux(length == 2 + n * row_bytes, n, count)
        # The rows written since the last RESET, as the answers say.
        written = Signal(rows, name="rows_written")
        forgot = Signal(name="forgot")            # every row written, then RESET
        status = response.payload.status
        needs_rows = (command == Command.RUN) | (command == Command.WRITE_DATA)
        with m.If(response.valid & response.ready):
            m.d.sync += serving.eq(0)
            m.d.comb += [Assert(~((status == Status.OK) & needs_rows) | written.all()),
                         Assert((status != Status.NO_WEIGHTS) | ~written.all()),
                         Cover(forgot & (command == Command.RUN)
                               & (status == Status.NO_WEIGHTS))]
            with m.If((status == Status.OK) & (command == Command.RESET)):
                m.d.sync += [written.eq(0), forgot.eq(written.all())]
            with m.If((status == Status.OK) & (command == Command.WRITE_WEIGHTS)):
                m.d.sync += written.eq(written | span(first, first + count))
        m.d.comb += Assert(~response.valid | serving)
        # The invariants: the executor's state and registers against the ghosts.
        s = k.states
        ok = k.status == Status.OK
        weights, reset = command == Command.WRITE_WEIGHTS, command == Command.RESET
        copying = s.COPY_ADDRESS | s.COPY_DATA
        unit = Mux(weights, row_bytes, soc.data_vector_bytes)     # bytes a row or vector
        expected = Mux(weights & copying, written | span(k.first, k.address),
                   Mux(weights & s.HEADER & ok, written | span(k.first, k.first + k.count),
                   Mux(reset & (s.CLEAR | s.HEADER & ok), 0, written)))
        after_args = ~(s.IDLE | s.ARGS | s.FETCH | s.LOAD | s.EMIT)
        m.d.comb += [
            Assert(sum(vars(s).values()) == 1),
            Assert(serving == ~(s.IDLE | s.FETCH | s.LOAD | s.EMIT)),
            Assert(k.written == Mux(serving, expected, written)),
            Assert(~serving | (k.command == command) & (k.length == length)),
            Assert(~after_args | (k.first == first)),
            Assert(~(copying | s.MEASURE) | weights | (command == Command.WRITE_DATA)),
            Assert(~s.CLEAR | reset),
            # A request that needs every row past DECODE: it had them, and has them.
            Assert(~(s.RUN_WEIGHTS | s.RUN_DATA | s.RUN_DRAIN)
                   | k.loaded & (command == Command.RUN)),
            Assert(~((copying | s.MEASURE) & (command == Command.WRITE_DATA)) | k.loaded),
            Assert(~(s.HEADER & ok & needs_rows) | k.loaded),
            Assert(~(s.HEADER & (k.status == Status.NO_WEIGHTS)) | ~k.loaded),
            Assert(~s.ARGS | (k.index <= len(k.args) // 8)),
            Assert(~(s.ARGS & (k.index != 0)) | (address == k.index - 1)),
            *self._args_held(k, first),
            Assert(~serving | (length <= MAX_PAYLOAD)),
            # A copy: the payload bytes taken are the rows or vectors and bytes written.
            Assert(~(copying | weights & s.HEADER & ok)
                   | (k.count != 0) & (k.first + k.count <= Mux(weights, rows, soc.depth))
                   & (k.address >= k.first) & (k.address <= k.first + k.count)
                   & (k.length == 2 + k.count * unit)),
            Assert(~s.MEASURE | (k.end == 2 + k.count * unit) & (k.address == k.first)
                   & (k.index == 2) & (k.byte_in_word == 0)),
            Assert(~s.COPY_ADDRESS | (k.index < k.length)
                   & (k.index + k.first * unit == 2 + k.address * unit + k.byte_in_word)),
            Assert(~s.COPY_DATA | (k.index <= k.length)
                   & (k.index + k.first * unit == 3 + k.address * unit + k.byte_in_word)),
            Assert(~copying | (k.byte_in_word < unit)),
        ]
        return m

    @staticmethod
    def _args_held(k, first):
        """While the executor reads its arguments (``ARGS``, the byte at ``index - 1``
        arriving), the bytes read so far sit at the top of ``args``: the payload's
        first two, ``first``, among them."""
        checks, top = [], len(k.args)
        for index in range(2, top // 8 + 1):
            at = top - 8 * (index - 1)
            for byte in range(min(index - 1, 2)):
                held = k.args[at + 8 * byte:at + 8 * byte + 8] == first[8 * byte:8 * byte + 8]
                checks.append(Assert(~(k.states.ARGS & (k.index == index)) | held))
        return checks
