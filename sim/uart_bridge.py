"""A serial port whose other end is a simulated UART line of an Amaranth design.

The port has pyserial's ``write``/``read`` (``read`` returns fewer bytes on a timeout), so
the host driver (``codnn.board.Board``) runs unchanged against RTL, on one of two kinds
of simulator:

- ``"verilator"`` (default) or ``"icarus"``: the design built by ``codnn.sim.runner`` and
  the cocotb bench ``codnn.sim.tb_uart_bridge`` in a simulator process, the host in this
  one, the two joined by a Unix socket (``SocketPort``). Device time passes only while
  the device has bytes to receive or the host waits for some; a read the device leaves
  unanswered for ``quiet_cycles`` cycles returns short. A build first (seconds to tens of
  seconds, cached), then about ten times the Python simulator's speed on the same top.
- ``"amaranth"``: Amaranth's Python simulator in this process; the host runs in a thread
  while the simulator bit-bangs the bytes it wrote onto the design's ``rx`` pin and
  decodes the design's ``tx`` pin back into bytes (``SimulatedPort``). Time runs freely;
  ``read`` waits ``timeout`` seconds. No build; about 1,500 cycles a second on the
  network engine's board top.
"""

import queue
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

from amaranth.sim import Simulator

__all__ = ["BRIDGE_SIMULATORS", "SimulatedPort", "SocketPort", "run_with_port"]

#: Where ``run_with_port`` can run a design, the default first.
BRIDGE_SIMULATORS = ("verilator", "icarus", "amaranth")


class SimulatedPort:
    """The host's end: bytes written go to the simulated ``rx``, bytes read come from
    ``tx``; ``sent`` and ``received`` count them."""

    def __init__(self, timeout=60.0):
        self.timeout = timeout
        self.to_device = queue.Queue()
        self.from_device = queue.Queue()
        self.sent = self.received = 0

    def write(self, data):
        for byte in bytes(data):
            self.to_device.put(byte)
        self.sent += len(data)
        return len(data)

    def read(self, n):
        out = bytearray()
        deadline = time.monotonic() + self.timeout
        while len(out) < n:
            try:
                out.append(self.from_device.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        self.received += len(out)
        return bytes(out)


async def _ticks(ctx, count):
    """Wait ``count`` clock edges. Not ``ctx.tick().repeat(count)``: that one runs an
    asynchronous generator, and a background testbench left suspended inside it when the
    simulation ends makes closing it fail ("aclose(): asynchronous generator is already
    running") when the machine is loaded."""
    for _ in range(count):
        await ctx.tick()


def run_with_port(dut, divisor, host, *, simulator="verilator", timeout=60.0,
                  quiet_cycles=1 << 24):
    """Simulate ``dut`` (ports ``rx``, ``tx``; ``divisor`` clock cycles a bit) on
    ``simulator`` (one of ``BRIDGE_SIMULATORS``) while ``host(port)`` drives it; return what
    ``host`` returned (re-raising what it raised). ``timeout`` is the port's read timeout
    in seconds on Amaranth's simulator; ``quiet_cycles`` the same in device cycles on the
    others.

    Raises
    ------
    ValueError
        If ``simulator`` is not one of ``BRIDGE_SIMULATORS``.
    codnn.sim.runner.SimulationFailure
        If the design does not build or its simulation fails.
    """
    if simulator not in BRIDGE_SIMULATORS:
        raise ValueError(f"Simulator must be one of {', '.join(BRIDGE_SIMULATORS)}, "
                         f"not {simulator!r}")
    if simulator != "amaranth":
        return _run_with_socket(dut, divisor, host, simulator, quiet_cycles)
    port = SimulatedPort(timeout)
    outcome = {}
    finished = threading.Event()

    def thread():
        try:
            outcome["value"] = host(port)
        except BaseException as error:       # handed to the caller below
            outcome["error"] = error
        finished.set()

    async def drive_rx(ctx):
        while not finished.is_set():
            try:
                byte = port.to_device.get_nowait()
            except queue.Empty:
                await _ticks(ctx, divisor)
                continue
            for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                ctx.set(dut.rx, bit)
                await _ticks(ctx, divisor)

    async def sample_tx(ctx):
        while not finished.is_set():
            await ctx.tick()
            if ctx.get(dut.tx):
                continue
            await _ticks(ctx, divisor // 2)
            byte = 0
            for i in range(8):
                await _ticks(ctx, divisor)
                byte |= ctx.get(dut.tx) << i
            await _ticks(ctx, divisor)
            port.from_device.put(byte)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(drive_rx, background=True)
    sim.add_testbench(sample_tx, background=True)

    async def wait(ctx):
        while not finished.is_set():
            await _ticks(ctx, 64)

    worker = threading.Thread(target=thread, daemon=True)
    worker.start()
    sim.add_testbench(wait)
    sim.run()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class SocketPort:
    """The host's end of ``codnn.sim.tb_uart_bridge``'s socket, with pyserial's
    ``write``/``read``; ``sent`` and ``received`` count the bytes. A read on a socket the
    simulator closed returns what it has (short)."""

    def __init__(self, connection):
        self._connection = connection
        self.sent = self.received = 0

    def write(self, data):
        data = bytes(data)
        self._connection.sendall(b"W" + struct.pack("<I", len(data)) + data)
        self.sent += len(data)
        return len(data)

    def read(self, n):
        try:
            self._connection.sendall(b"R" + struct.pack("<I", n))
            length = struct.unpack("<I", self._receive(4))[0]
            data = self._receive(length)
        except (OSError, EOFError):
            return b""
        self.received += len(data)
        return data

    def _receive(self, n):
        out = bytearray()
        while len(out) < n:
            chunk = self._connection.recv(n - len(out))
            if not chunk:
                raise EOFError("the simulator closed the link")
            out += chunk
        return bytes(out)


def _run_with_socket(dut, divisor, host, simulator, quiet_cycles):
    """``run_with_port`` on a simulator process: the cocotb bridge bench in a thread of
    this process (it waits for the simulator), ``host`` in this thread."""
    from .runner import SimulationFailure, simulate
    with tempfile.TemporaryDirectory(prefix="codnn-uart-") as folder:
        path = str(Path(folder) / "uart")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(1.0)
        outcome = {}

        def run():
            try:
                simulate(dut, top="uart_soc", testbench="codnn.sim.tb_uart_bridge",
                         simulator=simulator, config={"socket": path, "divisor": divisor,
                                                      "quiet_cycles": quiet_cycles})
            except BaseException as error:   # handed to the caller below
                outcome["error"] = error

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        with listener:
            connection = None
            while connection is None:
                try:
                    connection, _ = listener.accept()
                except TimeoutError:
                    if not worker.is_alive():
                        raise outcome.get("error") or SimulationFailure(
                            f"{simulator} ended before it opened the UART link") from None
        connection.settimeout(None)
        try:
            value = host(SocketPort(connection))
        except BaseException as error:
            connection.close()
            worker.join()
            if "error" in outcome:
                raise outcome["error"] from error
            raise
        connection.close()
        worker.join()
        if "error" in outcome:
            raise outcome["error"]
        return value
