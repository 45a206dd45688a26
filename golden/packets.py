"""The NIC engine's packet rule (docs/semantics.md section 4): gradient frames compressed in
flight.

A *gradient frame* is an Ethernet II frame (no FCS) carrying IPv4 (EtherType 0x0800,
version 4, header of ``IHL * 4`` bytes, not fragmented) carrying UDP (protocol 17), whose
IPv4 ToS byte is ``GRADIENT_TOS`` (0x28), whose lengths agree (UDP length = IPv4 total
length - header length, all within the frame) and whose UDP payload is a whole number of
float32 values (little-endian). ``compress_frame`` replaces that payload with the
INCEPTIONN message (``codnn.golden.inceptionn.compress``), sets the UDP length and the IPv4
total length, recomputes the IPv4 header checksum and sets the UDP checksum to 0 (no
checksum, allowed over IPv4). Every other frame passes unchanged, byte for byte. Bytes
past the IPv4 packet (Ethernet padding) are dropped from a rewritten frame, which is then
padded with zeros to the 60-byte Ethernet minimum again.

``decompress_frame`` is the receiver's inverse for frames with ToS 0x28: the payload is
decoded back into float32 values (a corrupt message raises
``codnn.golden.inceptionn.CorruptMessage``; so does a ToS 0x28 frame the sender could not
compress, its payload not whole float32 values: senders mark only gradient frames).

``codec`` (``FRAME_CODECS``) chooses the message: ``inceptionn`` (the default) or
``rice`` (``codnn.golden.rice``, rounding to nearest; its settings byte names the bound,
so the receiver decodes whatever bound the sender used). Both ends of a link use one.

A compressed payload is at most ``4 + n/4`` bytes longer than the ``4n`` it replaces
(every value raw, plus the count and the tag words; Rice: ``9 + ceil(ceil(n / 16) * 757
/ 8)`` bytes for ``4n``, every value escaping), so a full-size frame of incompressible
values grows past a 1500-byte MTU: the sender should leave that room.

``frame_path`` is what the gateware frame path (``codnn.hw.nic.frame_path``) does to a stream
of frames: the packet rule in one direction, within a largest frame ``max_frame`` and
with the MAC's bad-frame flag; see its docstring for every case.
"""

from collections import Counter

import numpy as np

from codnn.golden import inceptionn, rice
from codnn.golden.inceptionn import DEFAULT_BOUND_BITS, CorruptMessage

__all__ = ["GRADIENT_TOS", "MIN_FRAME", "DEFAULT_MAX_FRAME", "DIRECTIONS", "FRAME_CODECS",
           "ETH_HEADER", "ETHERTYPE_IPV4", "IPPROTO_UDP", "UDP_HEADER", "ipv4_checksum",
           "gradient_payload", "compress_frame", "decompress_frame", "frame_path"]

GRADIENT_TOS = 0x28
#: Smallest Ethernet frame without its FCS.
MIN_FRAME = 60

#: The frame path's largest frame (without FCS) unless built with another.
DEFAULT_MAX_FRAME = 2048
#: What a frame path does: the sender's rule or the receiver's inverse.
DIRECTIONS = ("compress", "decompress")
#: The messages a gradient frame may carry.
FRAME_CODECS = ("inceptionn", "rice")

#: Ethernet II header bytes, the IPv4 EtherType, UDP's IP protocol number, UDP header bytes.
ETH_HEADER = 14
ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17
UDP_HEADER = 8


def ipv4_checksum(header):
    """The Internet checksum (RFC 1071) of an IPv4 header whose checksum field is zero."""
    header = bytes(header)
    if len(header) % 2:
        header += b"\0"
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _udp_payload(frame, tos):
    """``(ip_start, ip_header_bytes, payload_start, payload_end)`` if ``frame`` is an
    unfragmented Ethernet II / IPv4 / UDP frame with ToS ``tos`` and consistent lengths,
    else None."""
    if len(frame) < ETH_HEADER + 20 + UDP_HEADER:
        return None
    if int.from_bytes(frame[12:14], "big") != ETHERTYPE_IPV4:
        return None
    ip = ETH_HEADER
    version, ihl = frame[ip] >> 4, frame[ip] & 0xF
    header = 4 * ihl
    if version != 4 or ihl < 5 or frame[ip + 1] != tos or frame[ip + 9] != IPPROTO_UDP:
        return None
    total = int.from_bytes(frame[ip + 2:ip + 4], "big")
    fragment = int.from_bytes(frame[ip + 6:ip + 8], "big")
    if fragment & 0x3FFF:                          # more fragments, or a fragment offset
        return None
    if total < header + UDP_HEADER or ip + total > len(frame):
        return None
    udp = ip + header
    if int.from_bytes(frame[udp + 4:udp + 6], "big") != total - header:
        return None
    return ip, header, udp + UDP_HEADER, ip + total


def gradient_payload(frame):
    """The float32 values a gradient frame carries, or None for any other frame."""
    frame = bytes(frame)
    found = _udp_payload(frame, GRADIENT_TOS)
    if found is None or (found[3] - found[2]) % 4:
        return None
    return np.frombuffer(frame[found[2]:found[3]], dtype="<f4")


def _rewrite(frame, found, payload):
    ip, header, start, _ = found
    total = header + UDP_HEADER + len(payload)
    if total > 0xFFFF:
        raise ValueError(f"a rewritten IPv4 packet of {total} bytes exceeds 65535")
    out = bytearray(frame[:start] + payload)
    out[ip + 2:ip + 4] = total.to_bytes(2, "big")
    out[ip + 10:ip + 12] = b"\0\0"
    out[ip + 10:ip + 12] = ipv4_checksum(out[ip:ip + header]).to_bytes(2, "big")
    udp = ip + header
    out[udp + 4:udp + 6] = (UDP_HEADER + len(payload)).to_bytes(2, "big")
    out[udp + 6:udp + 8] = b"\0\0"
    return bytes(out.ljust(MIN_FRAME, b"\0"))


def _check_codec(codec):
    if codec not in FRAME_CODECS:
        raise ValueError(f"Codec must be one of {', '.join(FRAME_CODECS)}, not {codec!r}")


def compress_frame(frame, bound_bits=DEFAULT_BOUND_BITS, codec="inceptionn"):
    """Apply the packet rule to one frame (bytes, no FCS) with ``codec``'s message;
    return the frame to send."""
    _check_codec(codec)
    frame = bytes(frame)
    values = gradient_payload(frame)
    if values is None:
        return frame
    message = inceptionn.compress(values, bound_bits) if codec == "inceptionn" else \
        rice.compress(values, bound_bits)
    return _rewrite(frame, _udp_payload(frame, GRADIENT_TOS), message)


def decompress_frame(frame, bound_bits=DEFAULT_BOUND_BITS, codec="inceptionn"):
    """The receiver's inverse: a frame with ToS 0x28 gets its float32 values back; other
    frames pass unchanged. (A Rice message names its own bound; ``bound_bits`` is then
    not read.)

    Raises
    ------
    codnn.golden.inceptionn.CorruptMessage
        If a ToS 0x28 frame's payload is not a whole compressed message.
    """
    _check_codec(codec)
    frame = bytes(frame)
    found = _udp_payload(frame, GRADIENT_TOS)
    if found is None:
        return frame
    payload = frame[found[2]:found[3]]
    values = inceptionn.decompress(payload, bound_bits) if codec == "inceptionn" else \
        rice.decompress(payload)
    return _rewrite(frame, found, np.asarray(values, dtype="<f4").tobytes())


def frame_path(frames, direction, bound_bits=DEFAULT_BOUND_BITS, max_frame=DEFAULT_MAX_FRAME,
               codec="inceptionn"):
    """The frame path's output for ``frames``, in order, and its counters.

    Each frame is bytes (no FCS) or ``(bytes, bad)``, ``bad`` being the MAC's flag that
    the frame arrived damaged (a bad FCS); gradient frames carry ``codec``'s message
    (the gateware frame path codes ``inceptionn``). In order:

    - an empty frame, or one longer than ``max_frame`` bytes, is dropped;
    - a frame flagged bad leaves unchanged and still flagged (*flagged*), never rewritten;
    - ``"compress"``: a gradient frame (``gradient_payload``) leaves as ``compress_frame``
      makes it (*changed*) unless that frame would be longer than ``max_frame``; then, and
      for every other frame, it leaves unchanged (*passed*);
    - ``"decompress"``: a frame with ToS 0x28 and consistent Ethernet / IPv4 / UDP lengths
      leaves as ``decompress_frame`` makes it (*changed*), but is dropped when its payload
      is not a whole compressed message (``CorruptMessage``, a payload under 4 bytes
      included) or when the frame it would become is longer than ``max_frame``; every
      other frame leaves unchanged (*passed*).

    Returns
    -------
    (list of (bytes, bool), collections.Counter)
        The frames that leave with their flag, and the counts of ``passed``, ``changed``,
        ``dropped`` and ``flagged`` frames.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"Direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    _check_codec(codec)
    out, counts = [], Counter(passed=0, changed=0, dropped=0, flagged=0)
    for frame in frames:
        frame, bad = (frame, False) if isinstance(frame, (bytes, bytearray)) else frame
        frame = bytes(frame)
        if not frame or len(frame) > max_frame:
            verdict, sent = "dropped", None
        elif bad:
            verdict, sent = "flagged", frame
        elif direction == "compress":
            sent = compress_frame(frame, bound_bits, codec)
            verdict = "changed"
            if gradient_payload(frame) is None or len(sent) > max_frame:
                verdict, sent = "passed", frame
        else:
            verdict, sent = _receive(frame, bound_bits, max_frame, codec)
        counts[verdict] += 1
        if sent is not None:
            out.append((sent, bad))
    return out, counts


def _receive(frame, bound_bits, max_frame, codec):
    """The receiving frame path's verdict on one good frame and the frame it sends."""
    found = _udp_payload(frame, GRADIENT_TOS)
    if found is None:
        return "passed", frame
    _, _, start, end = found
    if end - start < 4 or start + 4 * int.from_bytes(frame[start:start + 4], "little") \
            > max_frame:
        return "dropped", None
    try:
        return "changed", decompress_frame(frame, bound_bits, codec)
    except CorruptMessage:
        return "dropped", None
