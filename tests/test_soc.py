# amaranth: UnusedElaboratable=no
"""The board top's UART, CRC and host link, and the host driver against the RTL."""

import dataclasses
import random
import time
from functools import partial

import numpy as np
import pytest
from amaranth.hdl import Fragment, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from codnn.board import Board, DeviceError, LinkError
from codnn.golden.column_combining import pack
from codnn.golden.inceptionn import compress, decompress
from codnn.golden.network import Flatten, IntegerNetwork, Pool
from codnn.golden.network_program import (EngineConfig, encode_program, image_word,
                                          run_program)
from codnn.golden.systolic import run_layer
from codnn.golden.tq_array import run_tq_layer
from codnn.golden.value_frames import special_values, value_frame
from codnn.golden.workloads import (quantize_symmetric, random_layer, residual_network,
                                    structured_layer)
from codnn.hw.common.crc import crc16_update
from codnn.hw.soc.link import HostLink
from codnn.hw.soc.network_soc import NetworkSoc
from codnn.hw.soc.nic import NicSoc
from codnn.hw.soc.protocol import PROTOCOL_VERSION, SYNC, Command, EngineKind, Status, crc16, frame
from codnn.hw.soc.systolic import SystolicSoc
from codnn.hw.soc.tq import TqSoc
from codnn.hw.soc.uart import UartRx, UartTx
from codnn.model.compile import compile_network
from codnn.sim.uart_bridge import run_with_port

SEED = 20261122


@pytest.mark.parametrize("build,error,message", [
    (lambda: UartRx(divisor=3), ValueError, "at least 4, not 3"),
    (lambda: UartTx(divisor=0), TypeError, "positive integer"),
    (lambda: HostLink(divisor=8, timeout_bytes=15), ValueError, "at least 16 byte times"),
    (lambda: HostLink(divisor=2), ValueError, "at least 4, not 2"),
    (lambda: SystolicSoc(rows=2, cols=2, divisor=2), ValueError, "at least 4, not 2"),
    (lambda: SystolicSoc(rows=256, cols=2), ValueError, "Row count must be at most 255"),
    (lambda: SystolicSoc(rows=2, cols=2, depth=0), TypeError, "Depth must be a positive"),
    (lambda: SystolicSoc(rows=2, cols=2, depth=65536), ValueError, "at most 65535"),
    (lambda: SystolicSoc(rows=2, cols=200, alpha=2), ValueError, "A data vector takes"),
    (lambda: SystolicSoc(rows=2, cols=2, mac="serial"), ValueError, "MAC kind"),
    (lambda: TqSoc(rows=2, cols=2, g=256, alpha=2), ValueError, "g must be at most 255"),
    (lambda: TqSoc(rows=2, cols=2, encoding="csd"), ValueError, "Encoding must be one of"),
    (lambda: NicSoc(kind="zip"), ValueError, "NIC engine must be one of compressor"),
    (lambda: NicSoc(kind="terngrad", lanes=1), ValueError, "report takes 49 bits"),
    (lambda: NicSoc(kind="compressor", lanes=3), ValueError, "Lane count must be one of"),
])
def test_invalid_parameters(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_crc_matches_protocol():
    assert crc16(b"123456789") == 0x29B1         # the CRC-16/CCITT-FALSE check value

    class Update(wiring.Component):
        crc: In(16)
        byte: In(8)
        out: Out(16)

        def elaborate(self, platform):
            m = Module()
            m.d.comb += self.out.eq(crc16_update(self.crc, self.byte))
            return m

    dut, rng = Update(), random.Random(SEED)

    async def bench(ctx):
        for crc, byte in [(0xFFFF, 0), (0, 0xFF), (0x8000, 0x80)] + [
                (rng.getrandbits(16), rng.getrandbits(8)) for _ in range(300)]:
            ctx.set(dut.crc, crc)
            ctx.set(dut.byte, byte)
            assert ctx.get(dut.out) == crc16(bytes([byte]), crc), (hex(crc), hex(byte))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


class _Loop(wiring.Component):
    """UartTx -> line -> UartRx, with the line's level forced low when ``break_line``."""

    def __init__(self, divisor):
        self.tx_unit, self.rx_unit = UartTx(divisor=divisor), UartRx(divisor=divisor)
        super().__init__({"break_line": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.rx = self.tx_unit, self.rx_unit
        m.d.comb += self.rx_unit.rx.eq(self.tx_unit.tx & ~self.break_line)
        return m


@pytest.mark.parametrize("divisor", [4, 7, 16])
def test_uart_loopback(divisor):
    """Random bytes back to back and with gaps arrive intact; a byte with a low stop bit
    is dropped with ``frame_error``."""
    rng = random.Random(SEED + divisor)
    print(f"seed {SEED + divisor}")
    dut = _Loop(divisor)
    sent = [0x00, 0xFF, 0x55, 0xAA] + [rng.getrandbits(8) for _ in range(40)]
    got, errors = [], []

    async def send(ctx):
        for byte in sent:
            ctx.set(dut.tx_unit.data.payload, byte)
            ctx.set(dut.tx_unit.data.valid, 1)
            await ctx.tick().until(dut.tx_unit.data.ready)
            ctx.set(dut.tx_unit.data.valid, 0)
            if rng.random() < 0.3:
                await ctx.tick().repeat(rng.randrange(1, 3 * divisor))
        await ctx.tick().repeat(12 * divisor)
        # A frame whose stop bit is held low: dropped, flagged.
        ctx.set(dut.tx_unit.data.payload, 0x3C)
        ctx.set(dut.tx_unit.data.valid, 1)
        await ctx.tick().until(dut.tx_unit.data.ready)
        ctx.set(dut.tx_unit.data.valid, 0)
        await ctx.tick().repeat(9 * divisor)
        ctx.set(dut.break_line, 1)
        await ctx.tick().repeat(divisor)
        ctx.set(dut.break_line, 0)
        await ctx.tick().repeat(12 * divisor)

    async def listen(ctx):
        async for _, _, valid, payload, error in ctx.tick().sample(
                dut.rx_unit.data.valid, dut.rx_unit.data.payload, dut.rx_unit.frame_error):
            if valid:
                got.append(payload)
            if error:
                errors.append(1)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(send)
    sim.add_process(listen)
    sim.run()
    assert got == sent
    assert errors == [1]


def _layer(rng):
    F, _ = quantize_symmetric(structured_layer(rng, 6, 10, 0.6), 8)
    return pack(F, 2, 0.5), rng.integers(0, 256, (10, 7))


def test_layer_through_the_uart_equals_golden():
    """The driver runs a multi-tile layer (2 row blocks x 2 column blocks, 7 vectors in
    chunks of 4) through the simulated UART; the accumulators equal golden."""
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    packed, X = _layer(rng)
    bias = rng.integers(-1000, 1000, packed.P.shape[0])
    dut = SystolicSoc(rows=4, cols=3, alpha=2, depth=4, divisor=4, timeout_bytes=16)

    def host(port):
        board = Board(port)
        acc, cycles = board.run_layer(packed, X, bias=bias)
        return acc, cycles, board.status()

    acc, cycles, status = run_with_port(dut, 4, host)
    _, want = run_layer(packed, X, rows=4, cols=3, bias=bias)
    np.testing.assert_array_equal(acc, want)
    assert (status.engine, status.rows, status.cols, status.config["alpha"], status.depth) == \
        (EngineKind.SYSTOLIC, 4, 3, 2, 4)
    assert status.weights_loaded and status.results_valid and status.frames_bad == 0
    assert cycles > 0 and status.last_run_cycles > 0


def test_tq_layer_through_the_uart_equals_golden():
    """The TQ array's top: a layer of 3 filters over 10 inputs in groups of 4 (3 groups:
    2 column blocks on a 2 x 2 array, 2 row blocks), 5 vectors in chunks of 4; the
    accumulators equal golden, and the systolic driver call is refused."""
    rng = np.random.default_rng(SEED + 1)
    print(f"seed {SEED + 1}")
    W = rng.integers(-127, 128, size=(3, 10))
    X = rng.integers(-127, 128, size=(10, 5))
    X[:, 0] = 127
    bias = rng.integers(-1000, 1000, 3)
    dut = TqSoc(rows=2, cols=2, g=4, alpha=6, beta=2, depth=4, divisor=4, timeout_bytes=16)

    def host(port):
        board = Board(port)
        with pytest.raises(ValueError, match="runs the tq array, not the systolic array"):
            board.run_layer(None, X)
        with pytest.raises(ValueError, match="Weights must lie in -127..127"):
            board.run_tq_layer(W * 2, X)
        acc, cycles = board.run_tq_layer(W, X, bias=bias)
        return acc, cycles, board.status()

    acc, cycles, status = run_with_port(dut, 4, host)
    _, want = run_tq_layer(W, X, g=4, alpha=6, beta=2, rows=2, cols=2, bias=bias)
    np.testing.assert_array_equal(acc, want)
    assert status.engine == EngineKind.TQ and status.config == {
        "g": 4, "alpha": 6, "beta": 2, "mag_bits": 7, "encoding": 1}
    assert status.frames_bad == 0 and cycles > 0


def test_nic_compressor_through_the_uart_equals_golden():
    """Value messages (0, 1, 9 and 40 values, every class edge, NaNs and infinities) go
    through the compressor's top at a run-time bound of 2**-12, then with bypass on; every
    output byte equals golden."""
    rng = np.random.default_rng(SEED + 2)
    print(f"seed {SEED + 2}")
    values = [(rng.standard_normal(n) * 0.1).astype(np.float32) for n in (0, 1, 9, 40)]
    values.append(special_values(12)[:60])
    dut = NicSoc(kind="compressor", lanes=2, depth=48, divisor=4, timeout_bytes=16)

    def host(port):
        board = Board(port)
        with pytest.raises(ValueError, match="has no setting 'seed'"):
            board.run_frames([b"x"], seed=1)
        with pytest.raises(ValueError, match="runs the nic array, not the tq array"):
            board.run_tq_layer(np.zeros((1, 1)), np.zeros((1, 1)))
        compressed = board.run_frames([value_frame(v, 2) for v in values], bound_bits=12)
        bypassed = board.run_frames([value_frame(values[2], 2)], bypass=1)
        return compressed, bypassed, board.status()

    (outputs, report, cycles), (passed, _, _), status = run_with_port(dut, 4, host)
    assert outputs == [compress(v, 12) for v in values]
    assert report == {"error": 0, "error_count": 0} and cycles > 0
    assert passed == [value_frame(values[2], 2)]
    assert status.engine == EngineKind.NIC and status.config == {"lanes": 2, "kind": 0}


def test_nic_decompressor_flags_a_cut_message_and_overflow_is_an_error():
    """Compressed messages through the decompressor's top: a cut one raises the error flag
    and counts, the next decodes; a message whose output exceeds the result memory is a
    clear error and the device stays responsive."""
    rng = np.random.default_rng(SEED + 3)
    print(f"seed {SEED + 3}")
    good = (rng.standard_normal(21) * 0.3).astype(np.float32)
    message = compress(good, 10)
    dut = NicSoc(kind="decompressor", lanes=2, depth=16, divisor=4, timeout_bytes=16)

    def host(port):
        board = Board(port)
        first = board.run_frames([message])
        cut = board.run_frames([message[:9], message])
        with pytest.raises(ValueError, match="output of frame 0 does not fit the device's 16"):
            board.run_frames([compress(np.zeros(100, np.float32), 10)])
        return first, cut, board.status()

    (first, report, _), (after_cut, cut_report, _), status = run_with_port(dut, 4, host)
    want = value_frame(decompress(message, 10), 2)
    assert first == [want] and report == {"error": 0, "error_count": 0}
    assert after_cut[1] == want
    assert cut_report["error"] == 1 and cut_report["error_count"] == 1
    assert status.frames_bad == 0 and status.result_count == 16


def _raw(port, data):
    """Send raw bytes; return the response's (status, payload)."""
    port.write(data)
    head = port.read(4)
    assert head[0] == SYNC, head
    n = int.from_bytes(head[2:4], "little")
    rest = port.read(n + 2)
    assert crc16(head[1:] + rest[:n]) == int.from_bytes(rest[n:], "little")
    return Status(head[1]), rest[:n]


def test_bad_requests_get_error_responses():
    """Bad CRC, unknown command, oversize and truncated frames, data before weights,
    results before a run, bad arguments: each gets its error status, and the device
    still answers STATUS right after."""
    dut = SystolicSoc(rows=2, cols=2, alpha=1, depth=4, divisor=4, timeout_bytes=16)

    def host(port):
        board = Board(port)
        seen = []

        def expect(status, data):
            got, _ = _raw(port, data)
            seen.append(got)
            assert got == status, (status, got, data.hex())
            assert board.status().version == PROTOCOL_VERSION  # still responsive

        good = frame(Command.STATUS)
        expect(Status.BAD_CRC, good[:-1] + bytes([good[-1] ^ 1]))
        expect(Status.UNKNOWN_COMMAND, frame(0x7E))
        expect(Status.BAD_LENGTH, bytes([SYNC, Command.WRITE_DATA, 0x01, 0x01]) + bytes(259))
        expect(Status.TRUNCATED, frame(Command.WRITE_WEIGHTS, bytes(4))[:5])
        expect(Status.NO_WEIGHTS, frame(Command.WRITE_DATA, bytes(4)))
        expect(Status.NO_WEIGHTS, frame(Command.RUN, bytes([1, 0, 0])))
        expect(Status.NO_RESULTS, frame(Command.READ_RESULTS, bytes([0, 0, 1, 0])))
        expect(Status.BAD_ARGUMENT, frame(Command.WRITE_WEIGHTS, bytes(3)))      # half a row
        expect(Status.BAD_ARGUMENT, frame(Command.WRITE_WEIGHTS, bytes([2, 0]) + bytes(3)))
        expect(Status.BAD_ARGUMENT, frame(Command.STATUS, bytes(1)))
        expect(Status.OK, frame(Command.WRITE_WEIGHTS, bytes([0, 0]) + bytes(6)))
        expect(Status.BAD_ARGUMENT, frame(Command.RUN, bytes([5, 0, 0])))         # > depth
        expect(Status.NO_RESULTS, frame(Command.RUN, bytes([1, 0, 1])))           # accumulate
        expect(Status.OK, frame(Command.WRITE_DATA, bytes([0, 0, 0x12, 0x34])))
        expect(Status.OK, frame(Command.RUN, bytes([1, 0, 0])))
        expect(Status.BAD_ARGUMENT, frame(Command.RUN, bytes([2, 0, 1])))  # > stored results
        expect(Status.BAD_ARGUMENT, frame(Command.READ_RESULTS, bytes([1, 0, 1, 0])))
        assert board.read_results(0, 1, board.status()).shape == (1, 2)
        board.reset()
        with pytest.raises(DeviceError, match="NO_RESULTS"):
            board.read_results(0, 1, board.status())
        st = board.status()
        assert not st.weights_loaded and st.frames_bad == 0 and st.frames_ok == 3
        return seen

    seen = run_with_port(dut, 4, host)
    assert len(seen) == 17


def test_a_simulator_process_holds_the_device_while_the_host_computes():
    """On Verilator the device's time passes only while the host waits for it: a STATUS
    frame written in two parts, the host pausing between them, is one frame; the first
    part of a WRITE_WEIGHTS frame followed by a read is cut by the device's timeout (time
    runs during the read); a read the device never answers returns short after
    ``quiet_cycles``, and the link still works after it."""
    dut = SystolicSoc(rows=2, cols=2, alpha=1, depth=4, divisor=4, timeout_bytes=16)
    status = frame(Command.STATUS)

    def host(port):
        port.write(status[:3])
        time.sleep(0.5)
        whole, _ = _raw(port, status[3:])
        cut, _ = _raw(port, frame(Command.WRITE_WEIGHTS, bytes(4))[:5])
        silence = port.read(4)
        return whole, cut, silence, Board(port).status().frames_ok, port.sent, port.received

    whole, cut, silence, frames_ok, sent, received = run_with_port(
        dut, 4, host, simulator="verilator", quiet_cycles=5000)
    assert (whole, cut, silence, frames_ok) == (Status.OK, Status.TRUNCATED, b"", 2)
    assert sent == len(status) * 2 + 5 and received > 0


def test_run_with_port_names_its_simulators():
    with pytest.raises(ValueError, match="Simulator must be one of verilator, icarus, amaranth"):
        run_with_port(None, 4, Board, simulator="xsim")


def test_reset_forgets_every_weight_row_and_zeroes_the_data():
    """After RESET the weights count as loaded only once every row has been written again
    (the last row alone is not enough: RUN answers NO_WEIGHTS), and a run over vectors not
    written since the RESET sees zeros, not the data from before it. On Amaranth's
    simulator: the one board-top test of that path of ``run_with_port``."""
    dut = SystolicSoc(rows=2, cols=2, alpha=1, depth=4, divisor=4, timeout_bytes=16)
    row = bytes([3, 0, 5, 0, 0, 0])             # w = 3 and 5 (sel 0), 3 bytes a row

    def host(port):
        board = Board(port)
        results = []
        for data in (bytes([0x12, 0x34]), None):
            assert _raw(port, frame(Command.WRITE_WEIGHTS, bytes([0, 0]) + row[:3] * 2))[0] \
                == Status.OK
            if data:
                assert _raw(port, frame(Command.WRITE_DATA, bytes([0, 0]) + data))[0] \
                    == Status.OK
            assert _raw(port, frame(Command.RUN, bytes([1, 0, 0])))[0] == Status.OK
            results.append(board.read_results(0, 1, board.status()))
            board.reset()
            assert not board.status().weights_loaded
            assert _raw(port, frame(Command.WRITE_WEIGHTS, bytes([1, 0]) + row[:3]))[0] \
                == Status.OK
            assert not board.status().weights_loaded
            assert _raw(port, frame(Command.RUN, bytes([1, 0, 0])))[0] == Status.NO_WEIGHTS
            assert _raw(port, frame(Command.WRITE_DATA, bytes([0, 0, 1, 1])))[0] \
                == Status.NO_WEIGHTS
        return results

    before, after = run_with_port(dut, 4, host, simulator="amaranth")
    assert before.any(), before
    assert not after.any(), after


def test_driver_reports_a_silent_device():
    class Silent:
        def write(self, data):
            return len(data)

        def read(self, n):
            return b""

    with pytest.raises(LinkError, match="no response"):
        Board(Silent()).status()


def _small_networks(rng, rows, cols, alpha, mac="parallel"):
    """A convolution over two lane blocks of output channels, max pooling, a flatten and a
    dense layer, compiled for a ``rows x cols`` engine twice: with logits (accumulators)
    and with activations out (shift 2: most of them clamp to 255, so the class is a tie
    that the first one wins)."""
    layer = partial(random_layer, rng, alpha=alpha)
    steps = (layer("conv", "x", "a", 5, 2 * 9, shift=9, kernel=3, padding=1),
             Pool("pool", "a", "p", "max", kernel=2, stride=2),
             Flatten("flat", "p", "f"),
             layer("fc", "f", "y", 7, 20, shift=None))
    engine = EngineConfig(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=64,
                          acc_words=4, psum_words=32)
    return [compile_network(IntegerNetwork((*steps[:3], dataclasses.replace(steps[3],
                                                                               shift=shift)),
                                           "x", "y", (2, 4, 4), 1.0, 1.0), engine)
            for shift in (None, 2)]


def _network_soc(compiled, **overrides):
    e = compiled.program.engine
    return NetworkSoc(**{
        "rows": e.rows, "cols": e.cols, "alpha": e.alpha, "mac": e.mac,
        "act_words": e.act_words, "acc_words": e.acc_words, "psum_words": e.psum_words,
        "gather_ports": e.gather_ports, "weight_words": len(compiled.image) // image_word(e),
        "program_words": len(encode_program(compiled.program)) // 4, "divisor": 4,
        "timeout_bytes": 16, **overrides})


@pytest.mark.parametrize("rows,cols,mac", [
    (4, 3, "parallel"), pytest.param(5, 2, "bitserial", marks=pytest.mark.long)])
def test_network_through_the_uart_equals_golden(rows, cols, mac):
    """A program and its weight image go to the network engine's board top once; then per
    image its input, RUN (its cycles and the class) and the outputs: every value equals
    the program's golden run, the cycles the engine's model, the class golden's first
    largest output. Then a second program on the same top, its outputs activations (the
    first image). Five
    rows: an output FIFO per row in the array, and the logits over two words."""
    rng = np.random.default_rng(SEED + 4)
    print(f"seed {SEED + 4} rows {rows} cols {cols} {mac}")
    logits, activations = _small_networks(rng, rows=rows, cols=cols, alpha=2, mac=mac)
    images = rng.integers(0, 256, (2, 2, 4, 4))
    images[1] = 0

    def host(port):
        board = Board(port)
        runs = []
        for compiled in (logits, activations):
            board.load_network(compiled.program, compiled.image)
            for x in images if compiled is logits else images[:1]:
                sent, received = port.sent, port.received
                runs.append((compiled, x, board.run_image(compiled.program, x)))
                assert (port.sent - sent, port.received - received) == \
                    Board.image_link_bytes(compiled.program)
        return runs, board.status()

    runs, status = run_with_port(_network_soc(logits), 4, host)
    for compiled, x, (values, label, cycles) in runs:
        want = run_program(compiled.program, compiled.image, x)
        np.testing.assert_array_equal(values, want)
        assert label == int(np.argmax(want)) and cycles == compiled.cycles
    assert activations.program.output.memory == "act"
    assert np.sum(run_program(activations.program, activations.image, images[0]) == 255) > 1
    assert status.engine == EngineKind.NETWORK and (status.rows, status.cols, status.depth) == \
        (rows, cols, 64)
    assert status.config == {"alpha": 2, "bitserial": int(mac == "bitserial"),
                             "acc_words": 4, "psum_words": 32}
    assert status.weights_loaded and status.results_valid and status.frames_bad == 0
    assert status.last_run_cycles == activations.cycles


@pytest.mark.long
def test_network_soc_refuses_what_does_not_fit_or_match():
    """Runs and data before a program, a program for another engine, an image of the wrong
    size or out of order, words outside the memories: each its error status, the device
    answering the next request (STATUS after the malformed ones); the driver refuses an
    engine and memories that are not the program's, and a good run still follows."""
    rng = np.random.default_rng(SEED + 5)
    print(f"seed {SEED + 5}")
    compiled = _small_networks(rng, rows=4, cols=3, alpha=2)[0]
    program = compiled.program
    other = encode_program(dataclasses.replace(
        program, engine=dataclasses.replace(program.engine, psum_words=33)))
    x = rng.integers(0, 256, (2, 4, 4))
    first = program.input.addr.to_bytes(2, "little")
    words = program.input.words(4)

    def host(port):
        board = Board(port)

        def expect(status, command, payload=b"", then_status=False):
            got, _ = _raw(port, frame(command, payload))
            assert got == status, (status, got, command, payload.hex())
            if then_status:
                assert board.status().engine == EngineKind.NETWORK  # still responsive

        expect(Status.NO_WEIGHTS, Command.RUN)
        expect(Status.NO_WEIGHTS, Command.WRITE_DATA, first + bytes([2, 1, 2]))
        with pytest.raises(ValueError, match="compiled for"):
            Board(port).load_network(dataclasses.replace(
                program, engine=dataclasses.replace(program.engine, alpha=4)), compiled.image)
        expect(Status.BAD_ARGUMENT, Command.WRITE_PROGRAM, bytes(2) + bytes(5),
               then_status=True)
        expect(Status.BAD_ARGUMENT, Command.WRITE_PROGRAM,                # past the memory
               (len(other) // 4).to_bytes(2, "little") + bytes(4), then_status=True)
        for k in range(0, len(other), 4 * 60):
            expect(Status.OK, Command.WRITE_PROGRAM, (k // 4).to_bytes(2, "little")
                   + other[k:k + 4 * 60])
        expect(Status.NO_WEIGHTS, Command.RUN)                       # no weights yet
        board.load_network(program, compiled.image)
        expect(Status.BAD_INPUT, Command.RUN)                        # no input written
        expect(Status.BAD_ARGUMENT, Command.WRITE_DATA, first + bytes([0]))      # no lanes
        expect(Status.BAD_ARGUMENT, Command.WRITE_DATA, first + bytes([5, 1, 2, 3, 4, 5]))
        expect(Status.BAD_ARGUMENT, Command.WRITE_DATA, first + bytes([2, 1, 2, 3]))
        expect(Status.BAD_ARGUMENT, Command.WRITE_DATA,              # not the next word
               (program.input.addr + 1).to_bytes(2, "little") + bytes([2, 1, 2]))
        expect(Status.BAD_ARGUMENT, Command.WRITE_DATA,              # past the region
               first + bytes([1]) + bytes(words + 1), then_status=True)
        expect(Status.OK, Command.WRITE_DATA, first + bytes([1]) + bytes(words - 1))
        expect(Status.BAD_INPUT, Command.RUN)                        # a word short
        expect(Status.BAD_ARGUMENT, Command.READ_RESULTS, bytes([0, 0, 1, 0, 2]))
        expect(Status.BAD_ARGUMENT, Command.READ_RESULTS, bytes([4, 0, 1, 0, 1]))
        expect(Status.BAD_ARGUMENT, Command.READ_RESULTS, bytes([0, 0, 0, 0, 1]))
        expect(Status.BAD_ARGUMENT, Command.WRITE_WEIGHTS,               # past the end
               (len(compiled.image) // 6).to_bytes(2, "little") + bytes(6), then_status=True)
        for k in range(0, len(other), 4 * 60):                       # the wrong program
            expect(Status.OK, Command.WRITE_PROGRAM, (k // 4).to_bytes(2, "little")
                   + other[k:k + 4 * 60])
        expect(Status.OK, Command.WRITE_DATA, first + bytes([1]) + bytes(words))
        expect(Status.BAD_PROGRAM, Command.RUN)
        with pytest.raises(ValueError, match="does not fit the device's weight memory"):
            board.load_network(program, compiled.image + bytes(6))
        board.reset()
        expect(Status.NO_WEIGHTS, Command.RUN)
        board.load_network(program, compiled.image)
        expect(Status.BAD_ARGUMENT, Command.RUN, bytes(2))          # a limit of 2 bytes
        with pytest.raises(DeviceError, match="RUN_TIMEOUT"):        # reset mid-run
            board.run_image(program, x, cycle_limit=compiled.cycles // 2)
        assert board.status().last_run_cycles == compiled.cycles // 2
        return board.run_image(program, x)                          # and runs again

    values, _, cycles = run_with_port(_network_soc(compiled), 4, host)
    np.testing.assert_array_equal(values, run_program(program, compiled.image, x))
    assert cycles == compiled.cycles


def test_network_soc_parameters():
    with pytest.raises(ValueError, match="Column count must be at most 127"):
        NetworkSoc(rows=2, cols=128, alpha=1)
    with pytest.raises(ValueError, match="Activation words must be at most 65535"):
        NetworkSoc(rows=2, cols=2, alpha=1, act_words=65536)
    with pytest.raises(TypeError, match="Row count must be a positive integer"):
        NetworkSoc(rows=0, cols=2, alpha=1)
    with pytest.raises(ValueError, match="Gather ports must be at most 8, not 9"):
        NetworkSoc(rows=2, cols=2, alpha=1, gather_ports=9)
    # The board top for a program is built with the program's gather ports (elaborated,
    # as a built top is).
    engine = EngineConfig(rows=4, cols=3, alpha=2, act_words=512, acc_words=16,
                          psum_words=64, gather_ports=3)
    compiled = compile_network(residual_network(np.random.default_rng(SEED)), engine)
    soc = NetworkSoc.for_program(compiled.program)
    Fragment.get(soc, None)
    assert soc.engine.params["gather_ports"] == 3
