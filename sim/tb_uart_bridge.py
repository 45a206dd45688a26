"""cocotb bench: a board top's UART line, bridged to a host in another process.

``codnn.sim.uart_bridge.run_with_port`` listens on a Unix socket (``socket`` in the
configuration) and runs the host driver there; this bench connects to it, turns the bytes
the host writes into start/data/stop bits on ``rx`` (``divisor`` clock cycles a bit) and
decodes ``tx`` into bytes for the host's reads.

Simulated time passes only while the device has bytes to receive or the host waits for
bytes: while the host computes, the device is frozen, so a slow host never cuts a frame by
the device's inter-byte timeout. A read the device does not fill within ``quiet_cycles``
cycles of its last byte returns short (the host's serial timeout, in device time).

Messages host -> bench: ``W`` + u32 length + bytes (send them), ``R`` + u32 n (read n
bytes); bench -> host: u32 length + bytes, one per ``R``. The host closing the socket ends
the simulation.
"""

import collections
import socket
import struct

import cocotb
from cocotb.triggers import Event, FallingEdge, First, Timer
from cocotb.simtime import get_sim_time

from codnn.sim.testbench import load_config, start_clock_and_reset, write_report

_PERIOD_NS = 10      # start_clock_and_reset's clock
_POLL_CYCLES = 512   # how long time runs between looks at the socket while the host is busy


class _HostSocket:
    """The bench's end of the socket: complete messages, waiting for them or not."""

    def __init__(self, path):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._buffer = bytearray()
        self.closed = False

    def next_message(self, wait):
        """``(kind, value)`` of the next complete message, or None (none yet, or the host
        closed the socket: then ``closed``); blocks for one when ``wait``."""
        while True:
            message = self._parse()
            if message is not None or self.closed:
                return message
            self._sock.setblocking(wait)
            try:
                data = self._sock.recv(1 << 16)
            except BlockingIOError:
                return None
            if not data:
                self.closed = True
                return None
            self._buffer += data

    def _parse(self):
        if len(self._buffer) < 5:
            return None
        kind, value = self._buffer[:1].decode(), struct.unpack("<I", self._buffer[1:5])[0]
        if kind == "R":
            del self._buffer[:5]
            return kind, value
        if len(self._buffer) < 5 + value:
            return None
        data = bytes(self._buffer[5:5 + value])
        del self._buffer[:5 + value]
        return kind, data

    def reply(self, data):
        self._sock.setblocking(True)
        self._sock.sendall(struct.pack("<I", len(data)) + data)


@cocotb.test()
async def bridge(dut):
    """Serve the host until it closes the socket; report the cycles and bytes moved."""
    config = load_config()
    divisor, quiet_ns = config["divisor"], config["quiet_cycles"] * _PERIOD_NS
    host = _HostSocket(config["socket"])
    dut.rx.value = 1
    await start_clock_and_reset(dut)
    to_device, from_device = collections.deque(), bytearray()
    state = {"sending": False, "last_byte_ns": 0}
    queued, received = Event(), Event()

    bit_time = Timer(divisor * _PERIOD_NS, "ns")

    async def drive_rx():
        await FallingEdge(dut.clk)     # bits change between the edges the device samples at
        while True:
            if not to_device:
                state["sending"] = False
                queued.clear()
                await queued.wait()
                continue
            state["sending"] = True
            byte = to_device.popleft()
            for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                dut.rx.value = bit
                await bit_time

    async def sample_tx():
        while True:
            await FallingEdge(dut.tx)
            await Timer((divisor // 2 * 2 + 1) * _PERIOD_NS // 2, "ns")  # mid-bit, clock low
            byte = 0
            for i in range(8):
                await bit_time
                byte |= int(dut.tx.value) << i
            await bit_time
            from_device.append(byte)
            state["last_byte_ns"] = get_sim_time("ns")
            received.set()

    cocotb.start_soon(drive_rx())
    cocotb.start_soon(sample_tx())
    wanted, asked_ns, moved = None, 0, [0, 0]
    while True:
        if wanted is not None:
            quiet = get_sim_time("ns") - max(asked_ns, state["last_byte_ns"]) >= quiet_ns
            if len(from_device) >= wanted or quiet:
                data = bytes(from_device[:wanted])
                del from_device[:wanted]
                host.reply(data)
                moved[1] += len(data)
                wanted = None
        busy = wanted is not None or bool(to_device) or state["sending"]
        message = host.next_message(wait=not busy)
        if host.closed:
            break
        if message is None:
            received.clear()
            await First(Timer(_POLL_CYCLES * _PERIOD_NS, "ns"), received.wait())
        elif message[0] == "W":
            to_device.extend(message[1])
            moved[0] += len(message[1])
            queued.set()
        else:
            wanted, asked_ns = message[1], get_sim_time("ns")
    write_report(config, {"cycles": int(get_sim_time("ns")) // _PERIOD_NS,
                          "bytes_to_device": moved[0], "bytes_from_device": moved[1]})
