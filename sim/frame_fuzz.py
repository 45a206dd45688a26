"""Frames for the frame path's testbenches, built with scapy: gradient frames (IPv4 options,
padding, every class of value), the frames the packet rule leaves alone, and fuzzed ones
(cut, lengthened, lengths that disagree, bit flips, empty, runts, giants, flagged bad,
and for the receiver corrupt compressed messages in consistent frames).

``fuzz_frames(rng, count, direction, bound_bits, max_frame)`` draws ``count`` of them as
``(bytes, bad)``, each kind in its share; ``FUZZ_KINDS`` names the kinds.
"""

import numpy as np
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from codnn.golden.packets import ETH_HEADER, GRADIENT_TOS, UDP_HEADER, compress_frame
from codnn.sim.stimulus import message_values

__all__ = ["FUZZ_KINDS", "gradient_frame", "fuzz_frames"]

_ETH_IP_UDP = ETH_HEADER + 20 + UDP_HEADER


def _mac(rng):
    return ":".join(f"{b:02x}" for b in [2, *rng.integers(0, 256, 5)])


def _ip(rng):
    return ".".join(str(b) for b in rng.integers(1, 255, 4))


def gradient_frame(rng, values, *, tos=GRADIENT_TOS, options_words=0, **ip):
    """An Ethernet / IPv4 / UDP frame carrying ``values`` (float32, little-endian) with
    ``options_words`` 32-bit words of IPv4 options (NOPs and an end) and random addresses
    and ports."""
    options = b"\x01" * (4 * options_words - 1) + b"\x00" if options_words else b""
    packet = (Ether(src=_mac(rng), dst=_mac(rng))
              / IP(src=_ip(rng), dst=_ip(rng), tos=tos, options=options,
                   id=int(rng.integers(0, 1 << 16)), **ip)
              / UDP(sport=int(rng.integers(1, 1 << 16)), dport=int(rng.integers(1, 1 << 16)))
              / Raw(np.asarray(values, dtype="<f4").tobytes()))
    return bytes(packet)


def _values(rng, bound_bits, max_frame, options_words=0, small=False):
    room = (max_frame - _ETH_IP_UDP - 4 * options_words) // 4
    top = min(room, 24) if small else room
    n = int(rng.choice([0, 1, 7, 8, 9, rng.integers(0, top + 1), top]))
    return message_values(rng, min(n, room), bound_bits)


def _good(rng, direction, bound_bits, max_frame, small=False):
    """A gradient frame as the sender sees it, or (decompressing) as it reaches the receiver."""
    words = int(rng.choice([0, 0, 0, 1, 10]))
    frame = gradient_frame(rng, _values(rng, bound_bits, max_frame, words, small),
                           options_words=words)
    return compress_frame(frame, bound_bits) if direction == "decompress" else frame


def _rewrap(frame, payload):
    """``frame``'s Ethernet / IPv4 / UDP headers around ``payload``, lengths made to agree."""
    packet = Ether(frame)
    ip = packet[IP]
    del ip.len, ip.chksum, ip[UDP].len, ip[UDP].chksum
    ip[UDP].remove_payload()
    return bytes(packet / Raw(payload))


def _corrupt_message(rng, frame):
    """A receiver's frame whose compressed message is bad, in consistent headers."""
    udp = 14 + 4 * (frame[14] & 15)
    payload = bytearray(frame[udp + 8:14 + int.from_bytes(frame[16:18], "big")])
    how = rng.integers(0, 4)
    if how == 0 and len(payload) > 4:                         # cut
        payload = payload[:int(rng.integers(0, len(payload)))]
    elif how == 1:                                           # bytes past the last block
        payload += bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8))
    elif how == 2 and len(payload) >= 4:                     # another count
        count = int.from_bytes(payload[:4], "little") + int(rng.choice([-9, -1, 1, 8, 1000]))
        payload[:4] = (count % (1 << 32)).to_bytes(4, "little")
    else:                                                    # a flipped bit
        if payload:
            bit = int(rng.integers(0, 8 * len(payload)))
            payload[bit // 8] ^= 1 << bit % 8
    return _rewrap(frame, bytes(payload))


def _other(rng):
    """A frame the rule leaves alone: another ToS, TCP, ARP, VLAN, IPv6 or a fragment."""
    values = message_values(rng, int(rng.integers(0, 40)), 10).tobytes()
    which = rng.integers(0, 7)
    ether = Ether(src=_mac(rng), dst=_mac(rng))
    if which == 0:
        return gradient_frame(rng, np.frombuffer(values, "<f4"),
                              tos=int(rng.choice([0, 0x20, 0x29, 0xA8, 0xFF])))
    if which == 1:
        return bytes(ether / IP(tos=GRADIENT_TOS) / TCP() / Raw(values))
    if which == 2:
        return bytes(ether / ARP(psrc=_ip(rng), pdst=_ip(rng)))
    if which == 3:
        return bytes(ether / Dot1Q(vlan=int(rng.integers(1, 4095)))
                     / IP(tos=GRADIENT_TOS) / UDP() / Raw(values))
    if which == 4:
        return bytes(ether / IPv6(tc=GRADIENT_TOS) / UDP() / Raw(values))
    if which == 5:
        return gradient_frame(rng, np.frombuffer(values, "<f4"), flags="MF")
    return gradient_frame(rng, np.frombuffer(values, "<f4"), frag=int(rng.integers(1, 8192)))


def _set_field(frame, offset, value):
    frame = bytearray(frame)
    frame[offset:offset + 2] = (value % (1 << 16)).to_bytes(2, "big")
    return bytes(frame)


#: The kinds of frame ``fuzz_frames`` draws, with their weights.
FUZZ_KINDS = {"gradient": 6, "padded": 1, "other": 3, "odd_payload": 1, "ip_length": 1,
              "udp_length": 1, "cut": 2, "bit_flips": 3, "runt": 1, "empty": 1 / 4,
              "giant": 1 / 2, "largest": 1 / 2, "corrupt_message": 3, "flagged": 1}


def _draw(rng, kind, direction, bound_bits, max_frame):
    good = _good(rng, direction, bound_bits, max_frame, small=True)
    if kind == "gradient":
        return _good(rng, direction, bound_bits, max_frame)
    if kind == "padded":                # Ethernet padding, or bytes past the IPv4 packet
        return good + bytes(rng.integers(0, 256, int(rng.integers(1, 30)), dtype=np.uint8))
    if kind == "other":
        return _other(rng)
    if kind == "odd_payload":
        values = message_values(rng, int(rng.integers(0, 30)), bound_bits).tobytes()
        frame = gradient_frame(rng, [])
        return _rewrap(frame, values + bytes(int(rng.integers(1, 4))))
    if kind == "ip_length":
        total = int.from_bytes(good[16:18], "big")
        return _set_field(good, 16, total + int(rng.choice([-4, -1, 1, 4, 4000])))
    if kind == "udp_length":
        udp = 14 + 4 * (good[14] & 15)
        length = int.from_bytes(good[udp + 4:udp + 6], "big")
        return _set_field(good, udp + 4, length + int(rng.choice([-4, -1, 1, 4])))
    if kind == "cut":
        return good[:int(rng.integers(1, len(good)))]
    if kind == "bit_flips":
        frame = bytearray(good)
        for bit in rng.integers(0, 8 * len(frame), int(rng.integers(1, 4))):
            frame[bit // 8] ^= 1 << bit % 8
        return bytes(frame)
    if kind == "runt":
        return bytes(rng.integers(0, 256, int(rng.integers(1, 60)), dtype=np.uint8))
    if kind == "empty":
        return b""
    if kind == "giant":
        return good + bytes(max_frame + int(rng.integers(1, 80)) - len(good))
    if kind == "largest":
        return good + bytes(max_frame - len(good))
    if kind == "corrupt_message":
        return _corrupt_message(rng, good) if direction == "decompress" \
            else _other(rng)
    raise ValueError(kind)


def fuzz_frames(rng, count, direction, bound_bits, max_frame):
    """``count`` frames ``(bytes, bad)`` of the kinds of ``FUZZ_KINDS`` in their shares
    (``flagged``: a kind drawn again, with the MAC's bad flag)."""
    names = list(FUZZ_KINDS)
    weights = np.array([FUZZ_KINDS[name] for name in names], float)
    frames = []
    for kind in rng.choice(names, count, p=weights / weights.sum()):
        bad = kind == "flagged"
        if bad:
            kind = rng.choice(names[:-1])
        frames.append((_draw(rng, kind, direction, bound_bits, max_frame), bool(bad)))
    return frames
