# amaranth: UnusedElaboratable=no
# (the engine is built first, for its own parameter checks; a later check of the board
# top's parameters then drops it with a clear error, which the warning would only repeat)
"""A board-ready top: the network engine behind the UART host link."""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Module, Mux, ResetInserter, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.hw.network import NetworkEngine

from .array_soc import status_block
from .executor import request_states, response_states
from .link import HostLink, check_link
from .protocol import MAX_PAYLOAD, STATUS_BYTES, Command, EngineKind, Status

__all__ = ["NetworkSoc"]

#: Program words whose writes the top keeps: the header's input and output regions.
_INPUT_WORD, _OUTPUT_WORD = 3, 6


@dataclass(slots=True)
class _Top:
    """What the board top's states share, each field set by the method named above it."""

    # _registers: the run's abort, the request (its command, length, first five payload
    # bytes and their fields), what the engine holds, the run's cycles, RUN's cycle limit
    # and its cycles, the reply, a request's words (bytes before them, bytes per word).
    abort: Signal = None
    command: Signal = None
    length: Signal = None
    args: Signal = None
    first: Value = None
    second: Value = None
    third: Value = None
    program_in: Signal = None
    weights_in: Signal = None
    valid: Signal = None
    image_words: Signal = None          # data words written since the run
    cycles: Signal = None
    budget: Signal = None
    spent: Signal = None
    status: Signal = None
    reply_length: Signal = None
    out_word: Signal = None
    out_bytes: Signal = None
    index: Signal = None
    header_bytes: Signal = None
    unit: Signal = None
    byte_in_word: Signal = None
    word: Signal = None
    address: Signal = None
    count: Signal = None
    end: Signal = None
    limit: Signal = None
    # _kept_regions: the program's input and output regions (first word, channels, and
    # whether the output is the accumulators), the input's words and their count, the
    # maps' areas.
    in_c: Value = None
    out_c: Value = None
    in_addr: Value = None
    out_addr: Value = None
    out_is_acc: Value = None
    in_words: Signal = None
    channels_left: Signal = None
    in_area: Signal = None
    out_area: Signal = None
    # _class_compare: the channel and lane read, the best so far, the value read and the
    # candidate registered from it.
    channel: Signal = None
    lane: Signal = None
    best_channel: Signal = None
    value: Value = None
    candidate: Signal = None
    candidate_channel: Signal = None
    candidate_valid: Signal = None


class NetworkSoc(wiring.Component):
    """A ``codnn.hw.network.NetworkEngine`` run by requests over a UART
    (``codnn.hw.soc.protocol``).

    Requests: ``WRITE_PROGRAM`` (u16 first word, u32 words) and ``WRITE_WEIGHTS`` (u16
    first word, words of ``2 * cols`` bytes) fill the engine's program and weight
    memories; ``WRITE_DATA`` (u16 first word, u8 lanes ``L``, then words of ``L`` bytes,
    lane ``l`` of a word the byte ``l % L``: a map of fewer channels than lanes holds
    each channel in every lane that ``write_region`` says) writes the input: the program's input region's words in
    order, from its first (each request goes on where the last one stopped); ``RUN`` (no
    payload) runs the program and answers with its cycles (u32) and the class (u16): the
    first largest value of the output region's channels at its first position (signed
    accumulators, or unsigned activations); with a u32 payload, a cycle limit (0: none)
    past which the engine is reset and ``RUN`` answers ``RUN_TIMEOUT``;
    ``READ_RESULTS`` (u16 first
    word, u16 count, u8 memory: 0 activations, 1 accumulators) sends words of the
    activation buffer (``rows`` bytes each) or the accumulator buffer (``4 * rows``);
    ``STATUS`` answers with the status block (engine 4; ``depth`` the activation words;
    config: alpha, bit-serial, accumulator and partial-sum words); ``RESET`` forgets what
    was written (the program and the weights must be written again) and zeroes the
    counters.

    Errors: ``RUN`` before a program and weights ``NO_WEIGHTS``; ``WRITE_DATA`` before a
    program ``NO_WEIGHTS``; a program whose header does not match the engine
    ``BAD_PROGRAM``; a ``RUN`` unless exactly the input region's words were written since
    the last one (or the program) ``BAD_INPUT``; a word outside a memory, data that is not
    the input region's next word or goes past the region, a lane count outside 1..rows or
    a payload of the wrong size ``BAD_ARGUMENT``.

    Latency of ``RUN``: the engine's (``codnn.golden.network_program.step_cycles``), then the
    output's channels, one a cycle (a cycle more per word, three more in all), to the
    class.

    Parameters
    ----------
    rows, cols, alpha, mac, act_words, acc_words, psum_words, weight_words, program_words,
    gather_ports, requant, weight_ports
        The engine's (``NetworkEngine``); rows and cols at most 255 and 127, the buffers at
        most 65535 words, the program and weight memories at most 65536.
    divisor, timeout_bytes
        As ``codnn.hw.soc.HostLink``.

    Attributes
    ----------
    rx : In(1)
    tx : Out(1)
    busy : Out(1)
        High while a request executes (an LED).

    Raises
    ------
    TypeError, ValueError
        As ``NetworkEngine`` and ``HostLink``; a size too large for the link.
    """

    def __init__(self, *, rows, cols, alpha, mac="bitserial", act_words=2048, acc_words=16,
                 psum_words=1024, weight_words=4096, program_words=1024, gather_ports=2,
                 requant="shift", weight_ports=2, divisor=104, timeout_bytes=2000):
        self._engine = NetworkEngine(rows=rows, cols=cols, alpha=alpha, mac=mac,
                                     act_words=act_words, acc_words=acc_words,
                                     psum_words=psum_words, weight_words=weight_words,
                                     program_words=program_words, gather_ports=gather_ports,
                                     requant=requant, weight_ports=weight_ports)
        for value, what, top in ((rows, "Row count", 255), (cols, "Column count", 127),
                                 (alpha, "Alpha", 255), (act_words, "Activation words", 0xFFFF),
                                 (acc_words, "Accumulator words", 0xFFFF),
                                 (psum_words, "Partial-sum words", 0xFFFF),
                                 (weight_words, "Weight words", 0x10000),
                                 (program_words, "Program words", 0x10000)):
            if value > top:
                raise ValueError(f"{what} must be at most {top} for the host link, not "
                                 f"{value}")
        check_link(divisor, timeout_bytes)
        self._link = HostLink(divisor=divisor, timeout_bytes=timeout_bytes)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "busy": Out(1)})

    engine = property(lambda self: self._engine, doc="The network engine.")

    @classmethod
    def for_program(cls, program, *, divisor=104, timeout_bytes=2000):
        """The board top of the engine a ``codnn.golden.network_program.Program`` was
        compiled for (``NetworkEngine.for_program``: its buffers the program's, its weight
        memory on chip and, with the program memory, just large enough)."""
        p = NetworkEngine.program_params(program)
        return cls(**{name: p[name] for name in (
            "rows", "cols", "alpha", "mac", "act_words", "acc_words", "psum_words",
            "weight_words", "program_words", "gather_ports", "requant", "weight_ports")},
            divisor=divisor,
            timeout_bytes=timeout_bytes)

    def elaborate(self, platform):
        m = Module()
        k = _Top()
        self._registers(m, k)
        self._kept_regions(m, k)
        self._class_compare(m, k)
        with m.FSM():
            request_states(m, self._link, command=k.command, length=k.length, args=k.args,
                           index=k.index, then="DECODE")
            with m.State("DECODE"):
                self._decode(m, k)
            with m.State("INPUT_WORDS"):
                self._input_words(m, k)
            self._copy_states(m, k)
            self._run_states(m, k)
            # Responses: the header, then the bytes of out_word (READ_RESULTS: a word each).
            engine, R = self._engine, self._engine.params["rows"]
            is_acc_read = k.third[0]
            response_states(
                m, self._link, status=k.status, reply_length=k.reply_length,
                out_word=k.out_word, out_bytes=k.out_bytes,
                words=(k.command == Command.READ_RESULTS) & (k.status == Status.OK),
                address=k.address, end=k.end,
                fetch=lambda at: [engine.act_read.eq(at), engine.acc_read.eq(at)],
                load=lambda: (Mux(is_acc_read, engine.acc_read_data, engine.act_read_data),
                              Mux(is_acc_read, 4 * R, R)))
        return m

    def _registers(self, m, k):
        """The link and the engine (reset when a run passes its cycle limit), and the
        registers of a request: its command, length and first payload bytes, the words
        it writes, what the engine holds, the reply."""
        m.submodules.link = link = self._link
        engine = self._engine
        k.abort = Signal(name="abort")          # a run past its cycle limit: reset it
        m.submodules.engine = ResetInserter(k.abort)(engine)
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx),
                     self.busy.eq(link.request.ready == 0)]
        p = engine.params
        R = p["rows"]
        word_bytes = max(4, 2 * p["cols"], R)
        k.command, k.length = Signal(8, name="command"), Signal(16, name="length")
        k.args = Signal(40, name="args")        # the first five payload bytes
        k.first, k.second, k.third = k.args[:16], k.args[16:32], k.args[32:40]
        k.program_in, k.weights_in = Signal(name="program_in"), Signal(name="weights_in")
        k.valid = Signal(name="valid")
        k.image_words = Signal(17, name="image_words")
        k.cycles = Signal(32, name="cycles")
        # RUN's cycle limit (0: none), its cycles
        k.budget, k.spent = Signal(32, name="budget"), Signal(32, name="spent")
        k.status, k.reply_length = Signal(8, name="status"), Signal(16, name="reply_length")
        k.out_word = Signal(max(8 * STATUS_BYTES, 32 * R), name="out_word")
        k.out_bytes = Signal(range(max(STATUS_BYTES, 4 * R) + 1), name="out_bytes")
        k.index = Signal(range(MAX_PAYLOAD + 1), name="index")
        k.header_bytes = Signal(2, name="header_bytes")  # bytes before the request's words
        k.unit = Signal(range(word_bytes + 1), name="unit")  # bytes per word of the request
        k.byte_in_word = Signal(range(word_bytes), name="byte_in_word")
        k.word = Signal(8 * word_bytes, name="word")
        k.address, k.count = Signal(17, name="address"), Signal(17, name="count")
        k.end, k.limit = Signal(17, name="end"), Signal(18, name="limit")

    def _kept_regions(self, m, k):
        """The header's input and output regions, kept as the program is written, and
        their sizes: ``in_words`` (``ceil(C / rows) * H * W``, by repeated steps)."""
        write = self._engine.program_write
        regions = [Signal(32 * 3, name=n) for n in ("input_region", "output_region")]
        for region, at in zip(regions, (_INPUT_WORD, _OUTPUT_WORD)):
            for i in range(3):
                with m.If(write.en & (write.addr == at + i)):
                    m.d.sync += region.word_select(i, 32).eq(write.data)
        (in_first, k.in_c, in_hw), (out_first, k.out_c, out_hw) = (
            [r.word_select(i, 32) for i in range(3)] for r in regions)
        k.in_addr, k.out_addr, k.out_is_acc = in_first[:30], out_first[:30], out_first[31]
        k.in_words = Signal(33, name="in_words")
        k.channels_left = Signal(32, name="channels_left")
        k.in_area, k.out_area = Signal(32, name="in_area"), Signal(32, name="out_area")
        m.d.sync += [k.in_area.eq(in_hw[:16] * in_hw[16:]),
                     k.out_area.eq(out_hw[:16] * out_hw[16:])]

    def _class_compare(self, m, k):
        """RUN's class: the first largest of the output's channels at its first position.
        A lane read is registered as the candidate, compared with the best a cycle
        later."""
        engine, R = self._engine, self._engine.params["rows"]
        k.channel, k.lane = Signal(32, name="channel"), Signal(range(R), name="lane")
        best, k.best_channel = Signal(signed(34), name="best"), Signal(16, name="best_channel")
        k.value = Mux(k.out_is_acc, engine.acc_read_data.word_select(k.lane, 32).as_signed(),
                      engine.act_read_data.word_select(k.lane, 8))
        k.candidate = Signal(signed(34), name="candidate")
        k.candidate_channel = Signal(16, name="candidate_channel")
        k.candidate_valid = Signal(name="candidate_valid")
        m.d.sync += k.candidate_valid.eq(0)
        with m.If(k.candidate_valid & ((k.candidate_channel == 0) | (k.candidate > best))):
            m.d.sync += [best.eq(k.candidate), k.best_channel.eq(k.candidate_channel)]

    @staticmethod
    def _reply(m, k, code, nbytes=0):
        m.d.sync += [k.status.eq(code), k.reply_length.eq(nbytes)]
        m.next = "HEADER"

    @staticmethod
    def _measure_input(m, k):
        """Count the input region's words (INPUT_WORDS)."""
        m.d.sync += [k.in_words.eq(0), k.channels_left.eq(k.in_c)]
        m.next = "INPUT_WORDS"

    def _decode(self, m, k):
        """DECODE: a request's arguments checked; a reply, or the state that goes on."""
        engine, link, reply = self._engine, self._link, self._reply
        p = engine.params
        R = p["rows"]
        first, second, third, length = k.first, k.second, k.third, k.length
        m.d.sync += [k.address.eq(first), k.count.eq(0), k.byte_in_word.eq(0), k.word.eq(0)]
        with m.Switch(k.command):
            with m.Case(Command.RESET, Command.STATUS):
                with m.If(length != 0):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Elif(k.command == Command.RESET):
                    m.d.sync += [k.program_in.eq(0), k.weights_in.eq(0), k.valid.eq(0),
                                 k.image_words.eq(0), k.cycles.eq(0)]
                    m.d.comb += link.clear.eq(1)
                    reply(m, k, Status.OK)
                with m.Else():
                    m.d.sync += [k.out_word.eq(status_block(
                        EngineKind.NETWORK,
                        {"alpha": p["alpha"], "bitserial": p["mac"] == "bitserial",
                         "acc_words": p["acc_words"], "psum_words": p["psum_words"]},
                        {"rows": R, "cols": p["cols"], "acc_bits": 32,
                         "depth": p["act_words"], "weights_loaded": k.program_in
                         & k.weights_in, "results_valid": k.valid,
                         "frames_ok": link.frames_ok, "frames_bad": link.frames_bad,
                         "last_run_cycles": k.cycles})),
                        k.out_bytes.eq(STATUS_BYTES)]
                    reply(m, k, Status.OK, STATUS_BYTES)
            with m.Case(Command.WRITE_PROGRAM):
                m.d.sync += [k.unit.eq(4), k.header_bytes.eq(2), k.end.eq(2),
                             k.limit.eq(p["program_words"])]
                m.next = "MEASURE"
            with m.Case(Command.WRITE_WEIGHTS):
                m.d.sync += [k.unit.eq(2 * p["cols"]), k.header_bytes.eq(2), k.end.eq(2),
                             k.limit.eq(p["weight_words"])]
                m.next = "MEASURE"
            with m.Case(Command.WRITE_DATA):
                m.d.sync += [k.unit.eq(second[:8]), k.header_bytes.eq(3), k.end.eq(3)]
                with m.If(~k.program_in):
                    reply(m, k, Status.NO_WEIGHTS)
                with m.Elif((length < 4) | (second[:8] == 0) | (second[:8] > R)):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Else():
                    self._measure_input(m, k)
            with m.Case(Command.RUN):
                m.d.sync += k.budget.eq(Mux(length == 4, k.args[:32], 0))
                with m.If((length != 0) & (length != 4)):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Elif(~k.program_in | ~k.weights_in):
                    reply(m, k, Status.NO_WEIGHTS)
                with m.Else():
                    self._measure_input(m, k)
            with m.Case(Command.READ_RESULTS):
                is_acc_read = third[0]
                nbytes = Mux(is_acc_read, 4 * R, R)
                with m.If((length != 5) | (third > 1) | (second == 0)
                          | (first + second > Mux(is_acc_read, p["acc_words"],
                                                  p["act_words"]))
                          | (second * nbytes > 0xFFFF)):
                    reply(m, k, Status.BAD_ARGUMENT)
                with m.Else():
                    m.d.sync += k.end.eq(first + second)
                    reply(m, k, Status.OK, second * nbytes)
            with m.Default():
                reply(m, k, Status.UNKNOWN_COMMAND)

    def _input_words(self, m, k):
        """INPUT_WORDS: the input region's words, a row block of lanes at a time; then a
        RUN starts the engine, a WRITE_DATA checks where its words go."""
        engine, reply = self._engine, self._reply
        R, act_words = engine.params["rows"], engine.params["act_words"]
        with m.If(k.channels_left != 0):
            m.d.sync += [k.in_words.eq(k.in_words + k.in_area),
                         k.channels_left.eq(Mux(k.channels_left > R, k.channels_left - R, 0))]
        with m.Elif(k.command == Command.RUN):
            with m.If(k.image_words != k.in_words):
                m.d.sync += k.image_words.eq(0)
                reply(m, k, Status.BAD_INPUT)
            with m.Else():
                m.d.comb += engine.start.eq(1)
                m.d.sync += [k.image_words.eq(0), k.valid.eq(0), k.spent.eq(0)]
                m.next = "RUN"
        with m.Else():
            m.d.sync += k.limit.eq(k.in_addr + k.in_words)
            with m.If((k.first != k.in_addr + k.image_words)
                      | (k.in_addr + k.in_words > act_words)):
                reply(m, k, Status.BAD_ARGUMENT)
            with m.Else():
                m.next = "MEASURE"

    def _copy_states(self, m, k):
        """WRITE_*: count the whole words in the payload (no divider), then copy them into
        the program, weight or activation memory, a byte a cycle."""
        engine, link, reply = self._engine, self._link, self._reply
        with m.State("MEASURE"):
            with m.If(k.end < k.length):
                m.d.sync += [k.end.eq(k.end + k.unit), k.count.eq(k.count + 1)]
            with m.Elif((k.end != k.length) | (k.count == 0) | (k.first + k.count > k.limit)):
                reply(m, k, Status.BAD_ARGUMENT)
            with m.Else():
                m.d.sync += k.index.eq(k.header_bytes)
                m.next = "COPY_ADDRESS"
        with m.State("COPY_ADDRESS"):
            m.d.comb += link.buffer_addr.eq(k.index)
            m.d.sync += k.index.eq(k.index + 1)
            m.next = "COPY_DATA"
        with m.State("COPY_DATA"):
            whole = Signal.like(k.word)
            m.d.comb += [whole.eq(k.word),
                         whole.word_select(k.byte_in_word, 8).eq(link.buffer_data)]
            m.d.sync += [k.word.eq(whole), k.byte_in_word.eq(k.byte_in_word + 1)]
            with m.If(k.byte_in_word == k.unit - 1):
                m.d.sync += [k.word.eq(0), k.byte_in_word.eq(0), k.address.eq(k.address + 1)]
                memories = {Command.WRITE_PROGRAM: engine.program_write,
                            Command.WRITE_WEIGHTS: engine.weight_write,
                            Command.WRITE_DATA: engine.act_write}
                # An input word of ``L`` lanes holds lane ``l % L`` in every lane ``l``, as
                # the engine's maps of fewer channels than lanes hold them.
                R = engine.params["rows"]
                copies = Cat(Array(whole.word_select(lane % n, 8) for n in range(1, R + 1))
                             [k.unit - 1] for lane in range(R))
                with m.Switch(k.command):
                    for command, write in memories.items():
                        data = copies if command == Command.WRITE_DATA else whole
                        with m.Case(command):
                            m.d.comb += [write.addr.eq(k.address), write.data.eq(data),
                                         write.en.eq(1)]
                            m.d.sync += {
                                Command.WRITE_PROGRAM: [k.program_in.eq(1),
                                                        k.image_words.eq(0), k.valid.eq(0)],
                                Command.WRITE_WEIGHTS: [k.weights_in.eq(1)],
                                Command.WRITE_DATA: [k.image_words.eq(k.image_words + 1)],
                            }[command]
            with m.If(k.index == k.length):
                reply(m, k, Status.OK)
            with m.Else():
                m.next = "COPY_ADDRESS"

    def _run_states(self, m, k):
        """RUN: the engine (reset past the cycle limit), then the class over the output's
        channels, a lane a cycle and a cycle more per word."""
        engine, reply = self._engine, self._reply
        R = engine.params["rows"]
        with m.State("RUN"):
            m.d.sync += k.spent.eq(k.spent + 1)
            with m.If(engine.busy & (k.budget != 0) & (k.spent == k.budget)):
                m.d.comb += k.abort.eq(1)
                m.d.sync += k.cycles.eq(k.spent)
                reply(m, k, Status.RUN_TIMEOUT)
            with m.Elif(~engine.busy):
                m.d.sync += k.cycles.eq(engine.cycles)
                with m.If(engine.error):
                    reply(m, k, Status.BAD_PROGRAM)
                with m.Elif(k.out_c == 0):
                    m.d.sync += [k.valid.eq(1), k.best_channel.eq(0)]
                    m.next = "CLASS_DONE"
                with m.Else():
                    m.d.sync += [k.valid.eq(1), k.address.eq(k.out_addr), k.channel.eq(0),
                                 k.lane.eq(0), k.best_channel.eq(0)]
                    m.next = "CLASS_ADDRESS"
        with m.State("CLASS_ADDRESS"):
            m.d.comb += [engine.act_read.eq(k.address), engine.acc_read.eq(k.address)]
            m.next = "CLASS"
        with m.State("CLASS"):
            m.d.comb += [engine.act_read.eq(k.address), engine.acc_read.eq(k.address)]
            m.d.sync += [k.candidate.eq(k.value), k.candidate_channel.eq(k.channel),
                         k.candidate_valid.eq(1)]
            m.d.sync += [k.channel.eq(k.channel + 1), k.lane.eq(k.lane + 1)]
            with m.If(k.channel + 1 == k.out_c):
                m.next = "CLASS_LAST"
            with m.Elif(k.lane == R - 1):
                m.d.sync += [k.lane.eq(0), k.address.eq(k.address + k.out_area)]
                m.next = "CLASS_ADDRESS"
        with m.State("CLASS_LAST"):              # the last candidate compared
            m.next = "CLASS_DONE"
        with m.State("CLASS_DONE"):
            m.d.sync += [k.out_word.eq(Cat(k.cycles, k.best_channel)), k.out_bytes.eq(6)]
            reply(m, k, Status.OK, 6)
