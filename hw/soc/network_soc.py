# amaranth: UnusedElaboratable=no
# (the engine is built first, for its own parameter checks; a later check of the board
# top's parameters then drops it with a clear error, which the warning would only repeat)
"""A board-ready top: the network engine behind the UART host link."""

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import HEADER_WORDS
from codnn.hw.network import NetworkEngine

from .array_soc import status_block
from .executor import request_states, response_states
from .link import HostLink, check_link
from .protocol import MAX_PAYLOAD, STATUS_BYTES, Command, Engine, Status

__all__ = ["NetworkSoc"]

#: Program words whose writes the top keeps: the header's input and output regions.
_INPUT_WORD, _OUTPUT_WORD = HEADER_WORDS - 6, HEADER_WORDS - 3


class NetworkSoc(wiring.Component):
    """A ``hw.network.NetworkEngine`` run by requests over a UART (``hw.soc.protocol``).

    Requests: ``WRITE_PROGRAM`` (u16 first word, u32 words) and ``WRITE_WEIGHTS`` (u16
    first word, words of ``2 * cols`` bytes) fill the engine's program and weight
    memories; ``WRITE_DATA`` (u16 first word, u8 lanes ``L``, then words of ``L`` bytes,
    the word's other lanes zero) writes the input: the program's input region's words in
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
    the last one (or the program) ``BAD_INPUT``; a word outside a memory, data that is not the input
    region's next word or goes past the region, a lane count outside 1..rows or a payload
    of the wrong size ``BAD_ARGUMENT``.

    Latency of ``RUN``: the engine's (``golden.network_program.step_cycles``), then the
    output's channels, one a cycle (a cycle more per word, three more in all), to the
    class.

    Parameters
    ----------
    rows, cols, alpha, mac, act_words, acc_words, psum_words, weight_words, program_words
        The engine's (``NetworkEngine``); rows and cols at most 255 and 127, the buffers at
        most 65535 words, the program and weight memories at most 65536.
    divisor, timeout_bytes
        As ``hw.soc.HostLink``.

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
                 psum_words=1024, weight_words=4096, program_words=1024, divisor=104,
                 timeout_bytes=2000):
        self._engine = NetworkEngine(rows=rows, cols=cols, alpha=alpha, mac=mac,
                                     act_words=act_words, acc_words=acc_words,
                                     psum_words=psum_words, weight_words=weight_words,
                                     program_words=program_words)
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

    def elaborate(self, platform):
        m = Module()
        m.submodules.link = link = self._link
        engine = self._engine
        abort = Signal()                        # a run past its cycle limit: reset it
        m.submodules.engine = ResetInserter(abort)(engine)
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx),
                     self.busy.eq(link.request.ready == 0)]
        p = engine.params
        R = p["rows"]
        weight_bytes = 2 * p["cols"]
        word_bytes = max(4, weight_bytes, R)

        command, length = Signal(8), Signal(16)
        args = Signal(40)                       # the first five payload bytes
        first, second, third = args[:16], args[16:32], args[32:40]
        program_in, weights_in, valid = Signal(), Signal(), Signal()
        image_words = Signal(17)                # data words written since the last run
        cycles = Signal(32)
        budget, spent = Signal(32), Signal(32)  # RUN's cycle limit (0: none), its cycles
        status, reply_length = Signal(8), Signal(16)
        out_word = Signal(max(8 * STATUS_BYTES, 32 * R))
        out_bytes = Signal(range(max(STATUS_BYTES, 4 * R) + 1))
        index = Signal(range(MAX_PAYLOAD + 1))
        header_bytes = Signal(2)                # bytes of the request before its words
        unit = Signal(range(word_bytes + 1))    # bytes per word of the request
        byte_in_word = Signal(range(word_bytes))
        word = Signal(8 * word_bytes)
        address = Signal(17)
        count = Signal(17)
        end = Signal(17)
        limit = Signal(18)

        # The header's input and output regions, kept as the program is written.
        regions = [Signal(32 * 3, name=n) for n in ("input_region", "output_region")]
        write = engine.program_write
        for region, at in zip(regions, (_INPUT_WORD, _OUTPUT_WORD)):
            for k in range(3):
                with m.If(write.en & (write.addr == at + k)):
                    m.d.sync += region.word_select(k, 32).eq(write.data)
        (in_first, in_c, in_hw), (out_first, out_c, out_hw) = (
            [r.word_select(k, 32) for k in range(3)] for r in regions)
        in_addr, out_addr, out_is_acc = in_first[:30], out_first[:30], out_first[31]
        in_words = Signal(33)                   # ceil(C / rows) * H * W, by repeated steps
        channels_left = Signal(32)
        in_area, out_area = Signal(32), Signal(32)      # H * W, registered
        m.d.sync += [in_area.eq(in_hw[:16] * in_hw[16:]), out_area.eq(out_hw[:16] * out_hw[16:])]

        # RUN's class: the first largest of the output's channels at its first position.
        channel, lane = Signal(32), Signal(range(R))
        best, best_channel = Signal(signed(34)), Signal(16)
        value = Mux(out_is_acc, engine.acc_read_data.word_select(lane, 32).as_signed(),
                    engine.act_read_data.word_select(lane, 8))
        # A lane read is registered as the candidate, compared with the best a cycle later.
        candidate, candidate_channel = Signal(signed(34)), Signal(16)
        candidate_valid = Signal()
        m.d.sync += candidate_valid.eq(0)
        with m.If(candidate_valid & ((candidate_channel == 0) | (candidate > best))):
            m.d.sync += [best.eq(candidate), best_channel.eq(candidate_channel)]

        def reply(code, nbytes=0):
            m.d.sync += [status.eq(code), reply_length.eq(nbytes)]
            m.next = "HEADER"

        def measure_input(then):
            """Count the input region's words, then go to ``then``."""
            m.d.sync += [in_words.eq(0), channels_left.eq(in_c)]
            m.next = then

        is_acc_read = third[0]
        with m.FSM():
            request_states(m, link, command=command, length=length, args=args, index=index,
                           then="DECODE")
            with m.State("DECODE"):
                m.d.sync += [address.eq(first), count.eq(0), byte_in_word.eq(0), word.eq(0)]
                with m.Switch(command):
                    with m.Case(Command.RESET, Command.STATUS):
                        with m.If(length != 0):
                            reply(Status.BAD_ARGUMENT)
                        with m.Elif(command == Command.RESET):
                            m.d.sync += [program_in.eq(0), weights_in.eq(0), valid.eq(0),
                                         image_words.eq(0), cycles.eq(0)]
                            m.d.comb += link.clear.eq(1)
                            reply(Status.OK)
                        with m.Else():
                            m.d.sync += [out_word.eq(status_block(
                                Engine.NETWORK,
                                {"alpha": p["alpha"], "bitserial": p["mac"] == "bitserial",
                                 "acc_words": p["acc_words"], "psum_words": p["psum_words"]},
                                {"rows": R, "cols": p["cols"], "acc_bits": 32,
                                 "depth": p["act_words"], "weights_loaded": program_in
                                 & weights_in, "results_valid": valid,
                                 "frames_ok": link.frames_ok, "frames_bad": link.frames_bad,
                                 "last_run_cycles": cycles})),
                                out_bytes.eq(STATUS_BYTES)]
                            reply(Status.OK, STATUS_BYTES)
                    with m.Case(Command.WRITE_PROGRAM):
                        m.d.sync += [unit.eq(4), header_bytes.eq(2), end.eq(2),
                                     limit.eq(p["program_words"])]
                        m.next = "MEASURE"
                    with m.Case(Command.WRITE_WEIGHTS):
                        m.d.sync += [unit.eq(weight_bytes), header_bytes.eq(2), end.eq(2),
                                     limit.eq(p["weight_words"])]
                        m.next = "MEASURE"
                    with m.Case(Command.WRITE_DATA):
                        m.d.sync += [unit.eq(second[:8]), header_bytes.eq(3), end.eq(3)]
                        with m.If(~program_in):
                            reply(Status.NO_WEIGHTS)
                        with m.Elif((length < 4) | (second[:8] == 0) | (second[:8] > R)):
                            reply(Status.BAD_ARGUMENT)
                        with m.Else():
                            measure_input("INPUT_WORDS")
                    with m.Case(Command.RUN):
                        m.d.sync += budget.eq(Mux(length == 4, args[:32], 0))
                        with m.If((length != 0) & (length != 4)):
                            reply(Status.BAD_ARGUMENT)
                        with m.Elif(~program_in | ~weights_in):
                            reply(Status.NO_WEIGHTS)
                        with m.Else():
                            measure_input("INPUT_WORDS")
                    with m.Case(Command.READ_RESULTS):
                        nbytes = Mux(is_acc_read, 4 * R, R)
                        with m.If((length != 5) | (third > 1) | (second == 0)
                                  | (first + second > Mux(is_acc_read, p["acc_words"],
                                                          p["act_words"]))
                                  | (second * nbytes > 0xFFFF)):
                            reply(Status.BAD_ARGUMENT)
                        with m.Else():
                            m.d.sync += end.eq(first + second)
                            reply(Status.OK, second * nbytes)
                    with m.Default():
                        reply(Status.UNKNOWN_COMMAND)

            # The input region's words: a row block of lanes at a time.
            with m.State("INPUT_WORDS"):
                with m.If(channels_left != 0):
                    m.d.sync += [in_words.eq(in_words + in_area),
                                 channels_left.eq(Mux(channels_left > R, channels_left - R, 0))]
                with m.Elif(command == Command.RUN):
                    with m.If(image_words != in_words):
                        m.d.sync += image_words.eq(0)
                        reply(Status.BAD_INPUT)
                    with m.Else():
                        m.d.comb += engine.start.eq(1)
                        m.d.sync += [image_words.eq(0), valid.eq(0), spent.eq(0)]
                        m.next = "RUN"
                with m.Else():
                    m.d.sync += limit.eq(in_addr + in_words)
                    with m.If((first != in_addr + image_words)
                              | (in_addr + in_words > p["act_words"])):
                        reply(Status.BAD_ARGUMENT)
                    with m.Else():
                        m.next = "MEASURE"

            # WRITE_*: count the whole words in the payload (no divider), then copy them.
            with m.State("MEASURE"):
                with m.If(end < length):
                    m.d.sync += [end.eq(end + unit), count.eq(count + 1)]
                with m.Elif((end != length) | (count == 0) | (first + count > limit)):
                    reply(Status.BAD_ARGUMENT)
                with m.Else():
                    m.d.sync += index.eq(header_bytes)
                    m.next = "COPY_ADDRESS"
            with m.State("COPY_ADDRESS"):
                m.d.comb += link.buffer_addr.eq(index)
                m.d.sync += index.eq(index + 1)
                m.next = "COPY_DATA"
            with m.State("COPY_DATA"):
                whole = Signal.like(word)
                m.d.comb += [whole.eq(word),
                             whole.word_select(byte_in_word, 8).eq(link.buffer_data)]
                m.d.sync += [word.eq(whole), byte_in_word.eq(byte_in_word + 1)]
                with m.If(byte_in_word == unit - 1):
                    m.d.sync += [word.eq(0), byte_in_word.eq(0), address.eq(address + 1)]
                    with m.Switch(command):
                        with m.Case(Command.WRITE_PROGRAM):
                            m.d.comb += [write.addr.eq(address), write.data.eq(whole),
                                         write.en.eq(1)]
                            m.d.sync += [program_in.eq(1), image_words.eq(0), valid.eq(0)]
                        with m.Case(Command.WRITE_WEIGHTS):
                            m.d.comb += [engine.weight_write.addr.eq(address),
                                         engine.weight_write.data.eq(whole),
                                         engine.weight_write.en.eq(1)]
                            m.d.sync += weights_in.eq(1)
                        with m.Case(Command.WRITE_DATA):
                            m.d.comb += [engine.act_write.addr.eq(address),
                                         engine.act_write.data.eq(whole),
                                         engine.act_write.en.eq(1)]
                            m.d.sync += image_words.eq(image_words + 1)
                with m.If(index == length):
                    reply(Status.OK)
                with m.Else():
                    m.next = "COPY_ADDRESS"

            # RUN: the engine, then the class over the output's channels.
            with m.State("RUN"):
                m.d.sync += spent.eq(spent + 1)
                with m.If(engine.busy & (budget != 0) & (spent == budget)):
                    m.d.comb += abort.eq(1)
                    m.d.sync += cycles.eq(spent)
                    reply(Status.RUN_TIMEOUT)
                with m.Elif(~engine.busy):
                    m.d.sync += cycles.eq(engine.cycles)
                    with m.If(engine.error):
                        reply(Status.BAD_PROGRAM)
                    with m.Elif(out_c == 0):
                        m.d.sync += [valid.eq(1), best_channel.eq(0)]
                        m.next = "CLASS_DONE"
                    with m.Else():
                        m.d.sync += [valid.eq(1), address.eq(out_addr), channel.eq(0),
                                     lane.eq(0), best_channel.eq(0)]
                        m.next = "CLASS_ADDRESS"
            with m.State("CLASS_ADDRESS"):
                m.d.comb += [engine.act_read.eq(address), engine.acc_read.eq(address)]
                m.next = "CLASS"
            with m.State("CLASS"):
                m.d.comb += [engine.act_read.eq(address), engine.acc_read.eq(address)]
                m.d.sync += [candidate.eq(value), candidate_channel.eq(channel),
                             candidate_valid.eq(1)]
                m.d.sync += [channel.eq(channel + 1), lane.eq(lane + 1)]
                with m.If(channel + 1 == out_c):
                    m.next = "CLASS_LAST"
                with m.Elif(lane == R - 1):
                    m.d.sync += [lane.eq(0), address.eq(address + out_area)]
                    m.next = "CLASS_ADDRESS"
            with m.State("CLASS_LAST"):              # the last candidate compared
                m.next = "CLASS_DONE"
            with m.State("CLASS_DONE"):
                m.d.sync += [out_word.eq(Cat(cycles, best_channel)), out_bytes.eq(6)]
                reply(Status.OK, 6)

            # Responses: the header, then the bytes of out_word (READ_RESULTS: a word each).
            response_states(
                m, link, status=status, reply_length=reply_length, out_word=out_word,
                out_bytes=out_bytes,
                words=(command == Command.READ_RESULTS) & (status == Status.OK),
                address=address, end=end,
                fetch=lambda at: [engine.act_read.eq(at), engine.acc_read.eq(at)],
                load=lambda: (Mux(is_acc_read, engine.acc_read_data, engine.act_read_data),
                              Mux(is_acc_read, 4 * R, R)))
        return m
