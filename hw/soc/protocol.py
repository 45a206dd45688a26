"""The host link's framed command protocol: byte codes, CRC and frame layout.

Plain Python, shared by the gateware (``codnn.hw.soc.link``, ``codnn.hw.soc.systolic``)
and the host driver (``codnn.board``) so both sides agree on every number.

A frame, host to device and device to host alike::

    SYNC (0xA5) | code (u8) | length (u16 LE) | payload (length bytes) | CRC (u16 LE)

The CRC is CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, no reflection, no
final XOR) over the code, the length and the payload. A request's code is a ``Command``, a
response's a ``Status``. Every request gets exactly one response, after which the device
takes the next request; bytes that arrive while it executes a request are dropped.
"""

from enum import IntEnum

__all__ = ["SYNC", "MAX_PAYLOAD", "PROTOCOL_VERSION", "STATUS_FIELDS", "STATUS_BYTES",
           "CONFIG_FIELDS", "EngineKind", "Command", "Status", "crc16", "frame",
           "unpack_status"]

SYNC = 0xA5
#: Largest request payload the device buffers; responses may be longer (up to 65535).
MAX_PAYLOAD = 256
PROTOCOL_VERSION = 2


class EngineKind(IntEnum):
    """What the device runs (the STATUS block's ``engine``)."""

    SYSTOLIC = 1             # column-combined systolic array (codnn.hw.systolic)
    TQ = 2                   # term-quantization array (hw.tq)
    NIC = 3                  # a NIC engine (codnn.hw.nic)
    NETWORK = 4              # the network engine (codnn.hw.network)


#: The STATUS response's payload: little-endian bit fields in this order, (name, bits);
#: names starting with ``_`` are reserved (zero). ``config`` is the engine's own
#: parameters, laid out as ``CONFIG_FIELDS[engine]``.
STATUS_FIELDS = (
    ("version", 8), ("engine", 8), ("rows", 8), ("cols", 8), ("acc_bits", 8),
    ("depth", 16), ("max_payload", 16), ("weights_loaded", 1), ("results_valid", 1),
    ("_state", 6), ("frames_ok", 16), ("frames_bad", 16), ("result_count", 16),
    ("last_run_cycles", 32), ("config", 48))
STATUS_BYTES = sum(bits for _, bits in STATUS_FIELDS) // 8
#: Each engine's ``config`` fields (48 bits, the rest zero). TQ's ``encoding`` indexes
#: ``codnn.golden.term_quant.ENCODINGS``; a NIC's ``kind`` indexes
#: ``codnn.hw.nic.NIC_ENGINES``, whose ``settings`` are the fields of its configuration
#: word (``WRITE_WEIGHTS``) and ``reports`` those of its terminator beat, each packed from
#: bit 0.
CONFIG_FIELDS = {
    EngineKind.SYSTOLIC: (("alpha", 8), ("weight_bits", 8), ("data_bits", 8),
                      ("data_signed", 1), ("bitserial", 1)),
    EngineKind.TQ: (("g", 8), ("alpha", 8), ("beta", 8), ("mag_bits", 8), ("encoding", 8)),
    EngineKind.NIC: (("lanes", 8), ("kind", 8)),
    EngineKind.NETWORK: (("alpha", 8), ("bitserial", 8), ("acc_words", 16), ("psum_words", 16)),
}

class Command(IntEnum):
    """Request codes and their payloads (all integers little-endian)."""

    #: no payload; forget the weights and results, zero the counters.
    RESET = 0x01
    #: no payload; the response carries the status block (``codnn.board.DeviceStatus``).
    STATUS = 0x02
    #: u16 first row, then whole weight rows (``weight_row_bytes`` each) of the tile.
    WRITE_WEIGHTS = 0x10
    #: u16 first vector, then whole data vectors (``data_vector_bytes`` each).
    WRITE_DATA = 0x11
    #: u16 vector count, u8 flags (bit 0: accumulate onto the stored results); the
    #: response carries the run's cycle count (u32).
    RUN = 0x12
    #: u16 first vector, u16 count; the response carries the results
    #: (``result_vector_bytes`` each). The network engine's: u16 first word, u16 count,
    #: u8 memory (0 activations, 1 accumulators).
    READ_RESULTS = 0x13
    #: The network engine's program: u16 first word, then u32 words.
    WRITE_PROGRAM = 0x14


class Status(IntEnum):
    """Response codes."""

    OK = 0x00
    BAD_CRC = 0x01           # the request's CRC did not match: nothing was done
    UNKNOWN_COMMAND = 0x02
    BAD_LENGTH = 0x03        # length above MAX_PAYLOAD: the rest of the frame is dropped
    TRUNCATED = 0x04         # the line went quiet in the middle of a frame
    NO_WEIGHTS = 0x05        # data written or a run started before the tile's weights
    NO_RESULTS = 0x06        # results read (or accumulated onto) before a run
    BAD_ARGUMENT = 0x07      # a row, vector or count outside the device's memories
    BAD_PROGRAM = 0x08       # the network engine's program does not match the engine
    BAD_INPUT = 0x09         # a run whose input is not the program's input region, whole
    RUN_TIMEOUT = 0x0A       # the run passed its cycle limit: the engine was reset


def crc16(data, crc=0xFFFF):
    """CRC-16/CCITT-FALSE of ``data`` (bytes), continuing from ``crc``."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def frame(code, payload=b""):
    """Return the bytes of a frame with ``code`` and ``payload``."""
    payload = bytes(payload)
    if len(payload) > 0xFFFF:
        raise ValueError(f"Payload must be at most 65535 bytes, not {len(payload)}")
    body = bytes([code]) + len(payload).to_bytes(2, "little") + payload
    return bytes([SYNC]) + body + crc16(body).to_bytes(2, "little")


def _unpack(word, fields):
    values = {}
    for name, bits in fields:
        value = word & ((1 << bits) - 1)
        word >>= bits
        if not name.startswith("_"):
            values[name] = bool(value) if bits == 1 else value
    return values


def unpack_status(block):
    """The named ``STATUS_FIELDS`` of a status payload, as ints (bools for 1-bit fields);
    ``config`` decoded as a dict by the engine's ``CONFIG_FIELDS``.

    Raises
    ------
    ValueError
        If ``block`` is not ``STATUS_BYTES`` long or names an unknown engine.
    """
    block = bytes(block)
    if len(block) != STATUS_BYTES:
        raise ValueError(f"status block has {len(block)} bytes, not {STATUS_BYTES}")
    values = _unpack(int.from_bytes(block, "little"), STATUS_FIELDS)
    if values["engine"] not in EngineKind._value2member_map_:
        raise ValueError(f"status block names unknown engine {values['engine']}")
    values["engine"] = EngineKind(values["engine"])
    values["config"] = _unpack(values["config"], CONFIG_FIELDS[values["engine"]])
    return values
