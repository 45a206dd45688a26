"""A serial port whose other end is a simulated UART line of an Amaranth design.

``SimulatedPort`` has pyserial's ``write``/``read`` (``read`` returns what arrived within
``timeout`` seconds), so the host driver (``codnn.board.Board``) runs unchanged against
RTL: it runs in a thread while the Amaranth simulator bit-bangs the bytes it wrote onto
the design's ``rx`` pin and decodes the design's ``tx`` pin back into bytes for it.
"""

import queue
import threading
import time

from amaranth.sim import Simulator

__all__ = ["SimulatedPort", "run_with_port"]


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


def run_with_port(dut, divisor, host, *, timeout=60.0):
    """Simulate ``dut`` (ports ``rx``, ``tx``) while ``host(port)`` runs in a thread;
    return what ``host`` returned (re-raising what it raised)."""
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
