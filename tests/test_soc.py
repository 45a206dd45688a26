# amaranth: UnusedElaboratable=no
"""The board top's UART, CRC and host link, and the host driver against the RTL."""

import random

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from codnn.board import Board, DeviceError, LinkError
from codnn.golden.column_combining import pack
from codnn.golden.inceptionn import compress, decompress
from codnn.golden.systolic import run_layer
from codnn.golden.tq_array import run_tq_layer
from codnn.golden.value_frames import special_values, value_frame
from codnn.golden.workloads import quantize_symmetric, structured_layer
from codnn.hw.common.crc import crc16_update
from codnn.hw.soc.link import HostLink
from codnn.hw.soc.nic import NicSoc
from codnn.hw.soc.protocol import PROTOCOL_VERSION, SYNC, Command, Engine, Status, crc16, frame
from codnn.hw.soc.systolic import SystolicSoc
from codnn.hw.soc.tq import TqSoc
from codnn.hw.soc.uart import UartRx, UartTx
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
        (Engine.SYSTOLIC, 4, 3, 2, 4)
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
    assert status.engine == Engine.TQ and status.config == {
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
    assert status.engine == Engine.NIC and status.config == {"lanes": 2, "kind": 0}


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


def test_reset_forgets_every_weight_row_and_zeroes_the_data():
    """After RESET the weights count as loaded only once every row has been written again
    (the last row alone is not enough: RUN answers NO_WEIGHTS), and a run over vectors not
    written since the RESET sees zeros, not the data from before it."""
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

    before, after = run_with_port(dut, 4, host)
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
