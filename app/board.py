"""Host driver of the board tops (``codnn.hw.soc``: systolic, TQ and NIC) over a serial port.

``Board`` speaks the framed protocol of ``codnn.hw.soc.protocol`` over any object with
pyserial's ``write(bytes)`` and ``read(n)`` (``read`` returns fewer bytes on a timeout): a
``serial.Serial`` on a real board, a simulated UART in the tests.
"""

from dataclasses import dataclass

import numpy as np

from codnn.golden.lanes import pack_lanes, unpack_lanes
from codnn.golden.network_program import (HEADER_CYCLES, encode_program, host_words,
                                          image_word, output_values, step_cycles)
from codnn.golden.systolic import check_fits, make_tiles, select_bits, tile_beats, wrap
from codnn.golden.term_quant import ENCODINGS, group
from codnn.golden.tq_array import (
    data_vector_word,
    make_tq_tiles,
    term_slot_bits,
    weight_row_word,
)
from codnn.hw.nic import NIC_ENGINES
from codnn.hw.soc.protocol import (
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    SYNC,
    Command,
    EngineKind,
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
    """The STATUS block: the engine, the array's size, its state and counters; ``config``
    holds the engine's own parameters (``codnn.hw.soc.protocol.CONFIG_FIELDS``)."""

    version: int
    engine: EngineKind
    rows: int
    cols: int
    acc_bits: int
    depth: int
    max_payload: int
    weights_loaded: bool
    results_valid: bool
    frames_ok: int
    frames_bad: int
    result_count: int
    last_run_cycles: int
    config: dict

    @classmethod
    def parse(cls, block):
        """Decode a STATUS payload (``codnn.hw.soc.protocol.STATUS_FIELDS``); ``LinkError`` if
        it comes from another protocol version or is malformed."""
        block = bytes(block)
        if block and block[0] != PROTOCOL_VERSION:
            raise LinkError(f"device speaks protocol {block[0]}, the driver "
                            f"{PROTOCOL_VERSION}")
        try:
            return cls(**unpack_status(block))
        except ValueError as error:
            raise LinkError(str(error)) from None


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
        return DeviceStatus.parse(self.request(Command.STATUS))

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
        raw = np.array([unpack_lanes(int.from_bytes(data[i * nbytes:(i + 1) * nbytes],
                                                    "little"), status.acc_bits, status.rows)
                        for i in range(count)], dtype=object)
        return wrap(raw, status.acc_bits).astype(np.int64)

    def _status_of(self, engine):
        status = self.status()
        if status.engine != engine:
            raise ValueError(f"the device runs the {status.engine.name.lower()} array, not "
                             f"the {engine.name.lower()} array")
        return status

    def _run_tiles(self, tiles, N, T, status, write, progress):
        """Run ``tiles`` (row blocks outer, column blocks inner) over ``T`` vectors in
        chunks of the device's depth; ``write(tile, t0)`` loads a tile's weights and the
        chunk's vectors and returns how many. Returns ``(acc, cycles)``."""
        acc = np.zeros((N, T), dtype=np.int64)
        cycles, done = 0, 0
        blocks = {}
        for tile in tiles:
            blocks.setdefault(tile.row_block, []).append(tile)
        for row_block, row_tiles in blocks.items():
            r0 = row_block * status.rows
            k = min(status.rows, N - r0)
            for t0 in range(0, T, status.depth):
                for tile in row_tiles:              # column blocks accumulate on the device
                    count = write(tile, t0)
                    cycles += self.run(count, accumulate=tile.col_block > 0)
                    done += 1
                    if progress:
                        progress(done, len(tiles) * -(-T // status.depth), cycles)
                results = self.read_results(0, count, status)
                acc[r0:r0 + k, t0:t0 + count] = results[:, :k].T
        return acc, cycles

    def _write(self, command, words, nbytes):
        self._write_rows(command, 0, [w.to_bytes(nbytes, "little") for w in words], nbytes)

    def run_layer(self, packed, X, *, bias=None, progress=None):
        """Run a packed layer (``codnn.golden.column_combining.PackedLayer``) on inputs ``X``
        (channels x vectors) on the systolic array; return ``(acc, cycles)``: the ``N x T``
        accumulators as ``codnn.golden.systolic.run_layer`` computes them, and the cycles of all
        runs. ``progress(done, total, cycles)`` is called after each run on the device."""
        st = self._status_of(EngineKind.SYSTOLIC)
        alpha, wb, db = (st.config[k] for k in ("alpha", "weight_bits", "data_bits"))
        check_fits(packed, alpha=alpha, weight_bits=wb)
        X = np.asarray(X, dtype=np.int64)
        cell = wb + select_bits(alpha)
        row_bytes, vector_bytes = -(-st.cols * cell // 8), -(-st.cols * alpha * db // 8)

        def write(tile, t0):
            self._write(Command.WRITE_WEIGHTS, [
                pack_lanes([(int(w) & ((1 << wb) - 1)) | int(s) << wb
                            for w, s in zip(tile.weights[r], tile.selects[r])], cell)
                for r in range(st.rows)], row_bytes)
            beats = tile_beats(tile, X[:, t0:t0 + st.depth])
            self._write(Command.WRITE_DATA, [pack_lanes(beat.reshape(-1), db)
                                             for beat in beats], vector_bytes)
            return len(beats)

        acc, cycles = self._run_tiles(make_tiles(packed, st.rows, st.cols, alpha),
                                      packed.P.shape[0],
                                      X.shape[1], st, write, progress)
        return _add_bias(acc, bias, st.acc_bits), cycles

    def run_tq_layer(self, W, X, *, bias=None, progress=None):
        """Run a quantized layer ``W`` (``N x K`` integers within the device's
        ``mag_bits``) on inputs ``X`` (``K x T``) on the TQ array; return ``(acc,
        cycles)``: the accumulators as ``codnn.golden.tq_array.run_tq_layer`` computes them (with
        the device's g, alpha, beta and encoding), and the cycles of all runs.
        ``progress(done, total, cycles)`` is called after each run on the device."""
        st = self._status_of(EngineKind.TQ)
        g, alpha, mb = (st.config[k] for k in ("g", "alpha", "mag_bits"))
        W, X = np.asarray(W, dtype=np.int64), np.asarray(X, dtype=np.int64)
        if W.ndim != 2 or X.ndim != 2 or X.shape[0] != W.shape[1]:
            raise ValueError(f"Expected N x K weights and K x T inputs, not {W.shape} and "
                             f"{X.shape}")
        top = (1 << mb) - 1
        for name, values in (("Weights", W), ("Inputs", X)):
            if values.size and np.abs(values).max() > top:
                raise ValueError(f"{name} must lie in -{top}..{top} for {mb} magnitude "
                                 f"bits, not {np.abs(values).max()}")
        slot_bits = term_slot_bits(mb, g)
        row_bytes = -(-st.cols * alpha * slot_bits // 8)
        vector_bytes = -(-st.cols * g * (mb + 1) // 8)
        Xg = group(X.T, g)                                           # T x G x g

        def write(tile, t0):
            self._write(Command.WRITE_WEIGHTS, [
                weight_row_word(tile.queues[r], alpha=alpha, mag_bits=mb, g=g)
                for r in range(st.rows)], row_bytes)
            chunk = Xg[t0:t0 + st.depth]
            beats = np.zeros((len(chunk), st.cols, g), dtype=np.int64)
            valid = tile.groups >= 0
            beats[:, valid] = chunk[:, tile.groups[valid]]
            self._write(Command.WRITE_DATA, [data_vector_word(beat, mag_bits=mb)
                                             for beat in beats], vector_bytes)
            return len(beats)

        tiles = make_tq_tiles(W, g=g, alpha=alpha, rows=st.rows, cols=st.cols,
                              encoding=ENCODINGS[st.config["encoding"]], mag_bits=mb)
        acc, cycles = self._run_tiles(tiles, W.shape[0], X.shape[1], st, write, progress)
        return _add_bias(acc, bias, st.acc_bits), cycles


    def run_frames(self, frames, **config):
        """Stream AXI4-Stream frames (bytes: value messages or compressed messages, as
        ``codnn.hw.nic.layouts`` defines them) one by one through the device's NIC engine with
        the configuration ``config`` (the engine's ``settings``: raw port values, the
        rest at their reset values; TernGrad's scaler as its float32 bits). Returns
        ``(outputs, report, cycles)``: the output frames, the engine's report after the last
        frame (a dict: error, error_count, ...) and the cycles of all runs.

        Raises
        ------
        ValueError
            For a configuration field the engine does not have or a value too wide, an
            empty frame, or a frame whose input or output does not fit the device's depth.
        """
        st = self._status_of(EngineKind.NIC)
        kind = list(NIC_ENGINES)[st.config["kind"]]
        fields, report_fields = NIC_ENGINES[kind].settings, NIC_ENGINES[kind].reports
        unknown = set(config) - {name for name, _, _ in fields}
        if unknown:
            raise ValueError(f"The {kind} has no setting {sorted(unknown)[0]!r}; it has "
                             f"{', '.join(n for n, _, _ in fields) or 'none'}")
        word, offset = 0, 0
        for name, bits, init in fields:
            value = int(config.get(name, init))
            if not 0 <= value < 1 << bits:
                raise ValueError(f"{name} must lie in 0..{(1 << bits) - 1}, not {value}")
            word, offset = word | value << offset, offset + bits
        nb = 4 * st.config["lanes"]
        beat_bytes = -(-(9 * nb + 1) // 8)
        outputs, cycles, report = [], 0, {}
        for number, stream_frame in enumerate(frames):
            stream_frame = bytes(stream_frame)
            chunks = [stream_frame[i:i + nb] for i in range(0, len(stream_frame), nb)]
            if not chunks or len(chunks) > st.depth:
                raise ValueError(f"frame {number} has {len(chunks)} beats; the device takes "
                                 f"1..{st.depth}")
            self._write(Command.WRITE_WEIGHTS, [word], max(1, -(-offset // 8)))
            self._write(Command.WRITE_DATA, [
                int.from_bytes(chunk, "little") | ((1 << len(chunk)) - 1) << 8 * nb
                | int(k == len(chunks) - 1) << 9 * nb
                for k, chunk in enumerate(chunks)], beat_bytes)
            try:
                cycles += self.run(len(chunks))
            except DeviceError as error:
                if error.status != Status.BAD_ARGUMENT:
                    raise
                raise ValueError(f"the output of frame {number} does not fit the device's "
                                 f"{st.depth} beats") from None
            count = self.status().result_count
            data = self.request(Command.READ_RESULTS, (0).to_bytes(2, "little")
                                + count.to_bytes(2, "little"))
            beats = [int.from_bytes(data[k * beat_bytes:(k + 1) * beat_bytes], "little")
                     for k in range(count)]
            out = b""
            for beat in beats[:-1]:                 # the last one is the terminator
                kept = bin(beat >> 8 * nb & ((1 << nb) - 1)).count("1")
                out += (beat & ((1 << 8 * nb) - 1)).to_bytes(nb, "little")[:kept]
                if beat >> 9 * nb & 1:
                    outputs.append(out)
                    out = b""
            report, value = {}, beats[-1]
            for name, bits in report_fields:
                report[name], value = value & ((1 << bits) - 1), value >> bits
        return outputs, report, cycles


    def load_network(self, program, image):
        """Write a compiled network's program (``codnn.golden.network_program.Program``) and its
        weight image (bytes) into the device's network engine.

        Raises
        ------
        ValueError
            If the device's engine has another array than the program was compiled for,
            smaller buffers, or too small a program or weight memory.
        """
        st = self._status_of(EngineKind.NETWORK)
        e = program.engine
        device = {"rows": st.rows, "cols": st.cols, "alpha": st.config["alpha"],
                  "mac": "bitserial" if st.config["bitserial"] else "parallel",
                  "act_words": st.depth, "acc_words": st.config["acc_words"],
                  "psum_words": st.config["psum_words"]}
        wanted = {name: getattr(e, name) for name in device}
        sizes = ("act_words", "acc_words", "psum_words")
        if any(device[n] != wanted[n] for n in device if n not in sizes) or any(
                wanted[n] > device[n] for n in sizes):
            raise ValueError(f"the device's engine has {device}; the program was compiled "
                             f"for {wanted} (the same array, buffers at most the device's)")
        binary, word = encode_program(program), image_word(e)
        image = bytes(image)
        for command, data, nbytes, what in (
                (Command.WRITE_PROGRAM, binary, 4, "program"),
                (Command.WRITE_WEIGHTS, image, word, "weight image")):
            try:
                self._write_rows(command, 0, [data[k:k + nbytes]
                                              for k in range(0, len(data), nbytes)], nbytes)
            except DeviceError as error:
                if error.status != Status.BAD_ARGUMENT:
                    raise
                raise ValueError(f"the {what} ({len(data) // nbytes} words) does not fit "
                                 f"the device's {what.split()[0]} memory") from None

    @staticmethod
    def image_link_bytes(program):
        """``(to device, from device)``: the bytes ``run_image`` moves over the link for
        one input of ``program``, frames and responses whole."""
        rows = program.engine.rows
        words = program.input.words(rows)
        lanes = min(rows, program.input.map_shape[0])
        per_frame = (MAX_PAYLOAD - 3) // lanes
        frames = -(-words // per_frame)
        out = program.output
        nbytes = 4 * rows if out.memory == "acc" else rows
        reads = -(-out.words(rows) // (0xFFFF // nbytes))
        overhead = 6                                # SYNC, code, length, CRC
        sent = (frames * (overhead + 3) + words * lanes + overhead + 4
                + reads * (overhead + 5))
        received = (frames + 1 + reads) * overhead + 6 + out.words(rows) * nbytes
        return sent, received

    def run_image(self, program, x, cycle_limit=None):
        """Run one input ``x`` (integers, the program's input shape) through the network
        loaded by ``load_network``; return ``(outputs, label, cycles)``: the output
        region's values, the class the device picked and the engine's cycles.
        ``cycle_limit``: the device resets a run that takes longer and answers
        ``RUN_TIMEOUT`` (default twice the program's cycle model, and 1000 more)."""
        rows = program.engine.rows                  # the device's: load_network checked
        _, _, act = host_words(program, b"", x)
        lanes = min(rows, program.input.map_shape[0])
        per_frame = (MAX_PAYLOAD - 3) // lanes
        for start in range(0, len(act), per_frame):
            chunk = act[start:start + per_frame]
            self.request(Command.WRITE_DATA, chunk[0][0].to_bytes(2, "little")
                         + bytes([lanes]) + b"".join(w.to_bytes(rows, "little")[:lanes]
                                                     for _, w in chunk))
        if cycle_limit is None:
            cycle_limit = 2 * (HEADER_CYCLES + sum(step_cycles(program))) + 1000
        reply = self.request(Command.RUN, int(cycle_limit).to_bytes(4, "little"))
        cycles, label = int.from_bytes(reply[:4], "little"), int.from_bytes(reply[4:], "little")
        out = program.output
        is_acc = out.memory == "acc"
        nbytes = 4 * rows if is_acc else rows
        total, per_read = out.words(rows), 0xFFFF // nbytes
        words = []
        for start in range(0, total, per_read):
            count = min(per_read, total - start)
            data = self.request(Command.READ_RESULTS, (out.addr + start).to_bytes(2, "little")
                                + count.to_bytes(2, "little") + bytes([is_acc]))
            words += [int.from_bytes(data[k * nbytes:(k + 1) * nbytes], "little")
                      for k in range(count)]
        return output_values(program, words), label, cycles


def _add_bias(acc, bias, acc_bits):
    """The device runs without bias; adding it on the host is the same modulo 2**acc_bits."""
    if bias is None:
        return acc
    return wrap(acc + np.asarray(bias, dtype=np.int64)[:, None], acc_bits)
