"""Host driver of the board top (``hw.soc.systolic.SystolicSoc``) over a serial port.

``Board`` speaks the framed protocol of ``hw.soc.protocol`` over any object with
pyserial's ``write(bytes)`` and ``read(n)`` (``read`` returns fewer bytes on a timeout): a
``serial.Serial`` on a real board, a simulated UART in the tests.
"""

from dataclasses import dataclass

import numpy as np

from golden.systolic import check_fits, make_tiles, tile_beats, wrap
from hw.soc.protocol import (
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    SYNC,
    Command,
    Status,
    crc16,
    frame,
    unpack_status,
)

__all__ = ["Board", "DeviceError", "DeviceStatus", "LinkError", "open_serial"]


class LinkError(RuntimeError):
    """No response, or a response with a bad frame or CRC."""


class DeviceError(RuntimeError):
    """The device answered with an error status (``status``: a ``Status``)."""

    def __init__(self, status, command):
        super().__init__(f"device answered {status.name} to {command.name}")
        self.status = status


@dataclass(frozen=True)
class DeviceStatus:
    """The STATUS block: the array's configuration, state and counters."""

    version: int
    rows: int
    cols: int
    alpha: int
    weight_bits: int
    data_bits: int
    data_signed: bool
    bitserial: bool
    acc_bits: int
    depth: int
    max_payload: int
    weights_loaded: bool
    results_valid: bool
    frames_ok: int
    frames_bad: int
    result_count: int
    last_run_cycles: int

    @classmethod
    def parse(cls, block):
        """Decode a STATUS payload (``hw.soc.protocol.STATUS_FIELDS``); ``LinkError`` if
        it has the wrong size."""
        try:
            return cls(**unpack_status(block))
        except ValueError as error:
            raise LinkError(str(error)) from None

    @property
    def sel_bits(self):
        return max(1, (self.alpha - 1).bit_length())


def _pack(values, width):
    """Little-endian bytes of ``values`` as consecutive ``width``-bit fields."""
    word = 0
    for i, v in enumerate(values):
        word |= (int(v) & ((1 << width) - 1)) << (i * width)
    return word.to_bytes(-(-len(values) * width // 8), "little")


def open_serial(port, baud=115200, timeout=2.0):
    """Open a serial port with pyserial (8N1)."""
    import serial
    return serial.Serial(port, baudrate=baud, timeout=timeout)


class Board:
    """The board top at the other end of ``port``.

    Every method sends one request and waits for its response; an error status raises
    ``DeviceError``, a lost or damaged response ``LinkError``.
    """

    def __init__(self, port):
        self.port = port

    def request(self, command, payload=b""):
        """Send a request; return the response's payload (raises on an error status)."""
        self.port.write(frame(command, payload))
        head = self._read(4)
        while head[0] != SYNC:                     # skip noise before the response
            head = head[1:] + self._read(1)
        length = int.from_bytes(head[2:4], "little")
        rest = self._read(length + 2)
        body, crc = head[1:] + rest[:length], int.from_bytes(rest[length:], "little")
        if crc16(body) != crc:
            raise LinkError(f"response to {command.name} has a bad CRC")
        status = Status(head[1]) if head[1] in Status._value2member_map_ else None
        if status is None:
            raise LinkError(f"response to {command.name} has unknown status {head[1]}")
        if status != Status.OK:
            raise DeviceError(status, command)
        return body[3:]

    def _read(self, n):
        data = self.port.read(n)
        if len(data) != n:
            raise LinkError(f"no response from the device (got {len(data)} of {n} bytes)")
        return bytes(data)

    def status(self):
        status = DeviceStatus.parse(self.request(Command.STATUS))
        if status.version != PROTOCOL_VERSION:
            raise LinkError(f"device speaks protocol {status.version}, the driver "
                            f"{PROTOCOL_VERSION}")
        return status

    def reset(self):
        self.request(Command.RESET)

    def _write_rows(self, command, first, rows, nbytes):
        per_frame = (MAX_PAYLOAD - 2) // nbytes
        for start in range(0, len(rows), per_frame):
            chunk = b"".join(rows[start:start + per_frame])
            self.request(command, (first + start).to_bytes(2, "little") + chunk)

    def run(self, count, accumulate=False):
        """Run ``count`` stored vectors on the loaded tile; return the cycles it took."""
        payload = count.to_bytes(2, "little") + bytes([int(accumulate)])
        return int.from_bytes(self.request(Command.RUN, payload), "little")

    def read_results(self, first, count, status):
        nbytes = -(-status.rows * status.acc_bits // 8)
        data = self.request(Command.READ_RESULTS, first.to_bytes(2, "little")
                            + count.to_bytes(2, "little"))
        words = [int.from_bytes(data[i * nbytes:(i + 1) * nbytes], "little")
                 for i in range(count)]
        mask = (1 << status.acc_bits) - 1
        raw = np.array([[(w >> (r * status.acc_bits)) & mask for r in range(status.rows)]
                        for w in words], dtype=object)
        return wrap(raw, status.acc_bits).astype(np.int64)

    def run_layer(self, packed, X, *, bias=None, progress=None):
        """Run a packed layer (``golden.column_combining.PackedLayer``) on inputs ``X``
        (channels x vectors); return ``(acc, cycles)``: the ``N x T`` accumulators as
        ``golden.systolic.run_layer`` computes them, and the cycles of all runs."""
        st = self.status()
        check_fits(packed, alpha=st.alpha, weight_bits=st.weight_bits)
        X = np.asarray(X, dtype=np.int64)
        N, T = packed.P.shape[0], X.shape[1]
        acc = np.zeros((N, T), dtype=np.int64)
        cycles = 0
        tiles = make_tiles(packed, st.rows, st.cols)
        blocks = {}
        for tile in tiles:
            blocks.setdefault(tile.row_block, []).append(tile)
        cell = st.weight_bits + st.sel_bits
        done = 0
        for row_block, row_tiles in blocks.items():
            r0, k = row_block * st.rows, min(st.rows, N - row_block * st.rows)
            for t0 in range(0, T, st.depth):
                for tile in row_tiles:              # column blocks accumulate on the device
                    rows = [_pack([(int(w) & ((1 << st.weight_bits) - 1))
                                   | int(s) << st.weight_bits
                                   for w, s in zip(tile.weights[r], tile.selects[r])], cell)
                            for r in range(st.rows)]
                    self._write_rows(Command.WRITE_WEIGHTS, 0, rows, len(rows[0]))
                    beats = tile_beats(tile, X[:, t0:t0 + st.depth])
                    vectors = [_pack(beat.reshape(-1), st.data_bits) for beat in beats]
                    self._write_rows(Command.WRITE_DATA, 0, vectors, len(vectors[0]))
                    cycles += self.run(len(beats), accumulate=tile.col_block > 0)
                    done += 1
                    if progress:
                        progress(done, len(tiles) * -(-T // st.depth))
                results = self.read_results(0, len(beats), st)
                acc[r0:r0 + k, t0:t0 + len(beats)] = results[:, :k].T
        if bias is not None:
            acc = wrap(acc + np.asarray(bias, dtype=np.int64)[:, None], st.acc_bits)
        return acc, cycles
