"""Packet captures through the packet rule (``codnn pcap``): classic libpcap files of
Ethernet frames in, the same capture with every gradient frame compressed (or, with
``decompress``, restored) out.

A classic pcap file is a 24-byte header (magic ``0xA1B2C3D4``, or ``0xA1B23C4D`` for
nanosecond timestamps, in the writer's byte order; version 2.4; snap length; link type,
1 for Ethernet) and records of a 16-byte header (seconds, fraction, captured length,
original length) and the captured bytes. Records keep their timestamps; a rewritten
frame's original length is its new length.
"""

import struct
from pathlib import Path

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS, CorruptMessage, check_bound_bits
from codnn.golden.packets import compress_frame, decompress_frame, gradient_payload

__all__ = ["PcapError", "read_frames", "write_frames", "rewrite_pcap"]

_MAGICS = (0xA1B2C3D4, 0xA1B23C4D)     # micro- and nanosecond timestamps (copied as they are)
_ETHERNET = 1


class PcapError(ValueError):
    """A capture that cannot be read: not pcap, not Ethernet, or cut short."""


def _read(path):
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise PcapError(f"cannot read {path}: {error.strerror}") from None
    if len(data) < 24:
        raise PcapError(f"{path} is not a pcap file (shorter than its 24-byte header)")
    for order in "<>":
        magic = struct.unpack(order + "I", data[:4])[0]
        if magic in _MAGICS:
            break
    else:
        raise PcapError(f"{path} is not a classic pcap file (magic {data[:4].hex()}; "
                        f"pcapng is not supported: convert with editcap -F pcap)")
    header = data[:24]
    linktype = struct.unpack(order + "I", data[20:24])[0] & 0xFFFF
    if linktype != _ETHERNET:
        raise PcapError(f"{path} holds link type {linktype}, not Ethernet (1)")
    records, offset = [], 24
    while offset < len(data):
        if offset + 16 > len(data):
            raise PcapError(f"{path} is cut inside the record header at byte {offset}")
        seconds, fraction, captured, original = struct.unpack(order + "IIII",
                                                              data[offset:offset + 16])
        if offset + 16 + captured > len(data):
            raise PcapError(f"{path} is cut inside record {len(records)} at byte {offset}")
        records.append((seconds, fraction, data[offset + 16:offset + 16 + captured],
                        original))
        offset += 16 + captured
    return order, header, records


def read_frames(path):
    """The frames of a capture, in order (bytes each).

    Raises
    ------
    PcapError
        For a capture that cannot be read.
    """
    return [frame for _, _, frame, _ in _read(path)[2]]


def write_frames(path, frames):
    """Write ``frames`` (bytes each) as a classic little-endian pcap of Ethernet frames,
    one microsecond apart."""
    longest = max((len(frame) for frame in frames), default=0)
    out = bytearray(struct.pack("<IHHiIII", _MAGICS[0], 2, 4, 0, 0, max(longest, 65535),
                                _ETHERNET))
    for number, frame in enumerate(frames):
        out += struct.pack("<IIII", number // 1_000_000, number % 1_000_000, len(frame),
                           len(frame)) + frame
    Path(path).write_bytes(bytes(out))


def rewrite_pcap(path, output, *, bound_bits=DEFAULT_BOUND_BITS, decompress=False,
                 codec="inceptionn"):
    """Apply the packet rule (``codnn.golden.packets``, ``codec``'s messages) to every
    frame of a capture; write ``output``; return a report: frames, gradient frames, their
    bytes before and after.

    Raises
    ------
    PcapError
        For a capture that cannot be read.
    ValueError
        For a bound outside 7..15, an unknown codec, or (``decompress``) a ToS 0x28 frame
        that does not hold a whole compressed message (the message names the record).
    """
    check_bound_bits(bound_bits)
    compress_frame(b"", bound_bits, codec)              # an unknown codec, before reading
    order, header, records = _read(path)
    out = bytearray(header)
    gradient, before, after, values, longest = 0, 0, 0, 0, 0
    for number, (seconds, fraction, frame, original) in enumerate(records):
        try:
            new = (decompress_frame if decompress else compress_frame)(frame, bound_bits,
                                                                       codec)
        except CorruptMessage as error:
            raise ValueError(f"{path}, record {number}: {error}") from None
        if new != frame:
            gradient += 1
            before, after = before + len(frame), after + len(new)
            payload = gradient_payload(frame if not decompress else new)
            values += 0 if payload is None else len(payload)
            original = len(new)
        out += struct.pack(order + "IIII", seconds, fraction, len(new), original) + new
        longest = max(longest, len(new))
    if longest > struct.unpack(order + "I", header[16:20])[0]:   # an incompressible frame grew
        out[16:20] = struct.pack(order + "I", longest)
    Path(output).write_bytes(bytes(out))
    return {"frames": len(records), "gradient_frames": gradient, "values": values,
            "gradient_bytes_in": before, "gradient_bytes_out": after,
            "ratio": round(before / after, 3) if after else None,
            "direction": "decompress" if decompress else "compress", "codec": codec,
            "bound_bits": bound_bits, "output": str(output)}
