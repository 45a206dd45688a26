"""The packet rule: gradient frames built and parsed with scapy (an independent Ethernet /
IPv4 / UDP implementation), every other frame unchanged."""

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from codnn.golden import rice
from codnn.golden.inceptionn import CorruptMessage, compress, decompress
from codnn.golden.packets import (
    GRADIENT_TOS,
    MIN_FRAME,
    compress_frame,
    decompress_frame,
    frame_path,
    gradient_payload,
    ipv4_checksum,
)

SEED = 20261123


def _values(rng, n):
    values = (rng.standard_normal(n) * 0.05).astype(np.float32)
    values[: min(n, 3)] = [1.5, -np.inf, np.nan][: min(n, 3)]
    return values


def _frame(payload, tos=GRADIENT_TOS, **ip):
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                 / IP(src="10.0.0.1", dst="10.0.0.2", tos=tos, **ip)
                 / UDP(sport=4791, dport=4791) / Raw(payload))


def test_rfc1071_checksum():
    header = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert ipv4_checksum(header) == 0xB861


def _checksum_agrees(packet):
    """Whether scapy computes the IPv4 header checksum ``packet`` carries."""
    rebuilt = packet[IP].copy()
    del rebuilt.chksum
    return IP(bytes(rebuilt)).chksum == packet[IP].chksum


#: Each codec's message and decoder, and the bound its receiver is given: INCEPTIONN's
#: the sender's; Rice's another, since its message names its own.
_CODECS = {"inceptionn": (compress, decompress, lambda b: b),
           "rice": (rice.compress, lambda message, b: rice.decompress(message),
                    lambda b: 7 if b != 7 else 15)}


@pytest.mark.parametrize("codec, count", [*[("inceptionn", n) for n in (1, 7, 8, 9, 300)],
                                          *[("rice", n) for n in (1, 16, 17, 300)]])
@pytest.mark.parametrize("bound_bits", [7, 10, 15])
def test_gradient_frame_is_rewritten_and_restored(codec, count, bound_bits):
    # The packet rule with either codec's message (Rice to nearest): lengths, the IPv4
    # checksum (scapy's) and the UDP checksum; restored by the receiver.
    rng = np.random.default_rng(SEED + count)
    print(f"seed {SEED + count}")
    encode, decode, receiver_bound = _CODECS[codec]
    values = _values(rng, count)
    original = _frame(values.astype("<f4").tobytes())
    sent = compress_frame(original, bound_bits, codec)
    message = encode(values, bound_bits)

    parsed = Ether(sent)
    assert parsed[IP].tos == GRADIENT_TOS and parsed[Raw].load[:len(message)] == message
    assert parsed[IP].len == 20 + 8 + len(message) and parsed[UDP].len == 8 + len(message)
    assert parsed[UDP].chksum == 0 and _checksum_agrees(parsed)
    assert len(sent) == max(MIN_FRAME, 14 + 20 + 8 + len(message))
    assert sent[:12] == original[:12] and parsed[UDP].sport == 4791

    received = Ether(decompress_frame(sent, receiver_bound(bound_bits), codec))
    restored = np.frombuffer(received[Raw].load[:4 * count], dtype="<f4")
    want = decode(message, bound_bits)
    np.testing.assert_array_equal(restored.view(np.uint32), want.view(np.uint32))
    assert received[IP].len == Ether(original)[IP].len
    assert received[UDP].len == 8 + 4 * count
    assert _checksum_agrees(received)


def test_rice_frame_path_cases_and_unknown_codecs():
    """frame_path with Rice messages: a gradient frame changed each way, a corrupt
    message and one whose restored frame is over the largest dropped, others passed."""
    values = np.full(100, 0.01, dtype=np.float32)
    gradient = _frame(values.tobytes())
    out, counts = frame_path([gradient, _frame(b"abc", tos=0)], "compress", 10,
                             codec="rice")
    sent = compress_frame(gradient, 10, codec="rice")
    assert out == [(sent, False), (_frame(b"abc", tos=0), False)] and len(sent) < len(gradient) / 3
    assert counts == {"passed": 1, "changed": 1, "dropped": 0, "flagged": 0}
    bad = bytearray(sent)
    bad[-20] ^= 1                                       # inside the message: its CRC fails
    frames = [sent, bytes(bad), _frame(b"\x01\x00")]
    out, counts = frame_path(frames, "decompress", 10, codec="rice")
    assert out == [(decompress_frame(sent, codec="rice"), False)]
    assert counts == {"passed": 0, "changed": 1, "dropped": 2, "flagged": 0}
    restored = len(out[0][0])
    assert frame_path([sent], "decompress", 10, max_frame=restored - 1,
                      codec="rice")[1]["dropped"] == 1
    for call in (lambda: compress_frame(gradient, codec="zfp"),
                 lambda: frame_path([], "compress", codec="zfp")):
        with pytest.raises(ValueError, match="Codec must be one of inceptionn, rice"):
            call()


def test_ip_options_are_kept():
    values = np.arange(16, dtype=np.float32) / 64
    original = bytes(Ether() / IP(tos=GRADIENT_TOS, options=b"\x94\x04\x00\x00")
                     / UDP() / Raw(values.tobytes()))
    parsed = Ether(compress_frame(original))
    assert parsed[IP].ihl == 6 and parsed[IP].options == Ether(original)[IP].options
    assert parsed[Raw].load == compress(values)


@pytest.mark.parametrize("case", ["tos0", "tcp", "arp", "vlan", "fragment", "offset",
                                  "not_whole_values", "udp_length", "cut", "tiny"])
def test_every_other_frame_passes_unchanged(case):
    payload = np.ones(8, dtype=np.float32).tobytes()
    frame = {
        "tos0": lambda: _frame(payload, tos=0),
        "tcp": lambda: bytes(Ether() / IP(tos=GRADIENT_TOS) / TCP() / Raw(payload)),
        "arp": lambda: bytes(Ether() / ARP()),
        "vlan": lambda: bytes(Ether() / Dot1Q(vlan=5) / IP(tos=GRADIENT_TOS) / UDP()
                              / Raw(payload)),
        "fragment": lambda: _frame(payload, flags="MF"),
        "offset": lambda: _frame(payload, frag=100),
        "not_whole_values": lambda: _frame(payload + b"\x01\x02"),
        "udp_length": lambda: bytes(Ether() / IP(tos=GRADIENT_TOS) / UDP(len=12)
                                    / Raw(payload)),
        "cut": lambda: _frame(payload)[:-5],
        "tiny": lambda: b"\x00" * 20,
    }[case]()
    assert gradient_payload(frame) is None and compress_frame(frame) == frame
    if case == "not_whole_values":      # marked as gradients, but the sender could not
        with pytest.raises(CorruptMessage):  # compress it: the receiver rejects it
            decompress_frame(frame)
    else:
        assert decompress_frame(frame) == frame


def test_corrupt_compressed_frame_raises():
    frame = _frame(b"\x10\x00\x00\x00\xff")               # a count of 16, then one byte
    with pytest.raises(CorruptMessage):
        decompress_frame(frame)


def test_codnn_pcap_round_trip(tmp_path, capsys):
    """A capture written by scapy: gradient frames compressed, everything else unchanged,
    then restored by the receiver's pass; timestamps kept."""
    import json

    from scapy.utils import rdpcap, wrpcap

    from codnn.cli import main
    rng = np.random.default_rng(SEED)
    values = [_values(rng, n) for n in (100, 1, 37)]
    packets = [Ether(_frame(v.tobytes())) for v in values]
    packets.insert(1, Ether() / IP() / UDP() / Raw(b"not a gradient"))
    packets.append(Ether() / ARP())
    for number, packet in enumerate(packets):
        packet.time = 1700000000 + number / 4
    capture, sent, received = (tmp_path / name for name in ("in.pcap", "sent.pcap",
                                                             "back.pcap"))
    wrpcap(str(capture), packets)

    assert main(["pcap", str(capture), "-o", str(sent), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["frames"] == 5 and report["gradient_frames"] == 3
    assert report["values"] == 138 and report["ratio"] > 1
    out = rdpcap(str(sent))
    assert [float(p.time) for p in out] == [float(p.time) for p in packets]
    assert bytes(out[1]) == bytes(packets[1]) and bytes(out[4]) == bytes(packets[4])
    for index, v in zip((0, 2, 3), values):
        assert out[index][Raw].load.startswith(compress(v))

    assert main(["pcap", str(sent), "-o", str(received), "--decompress"]) == 0
    back = rdpcap(str(received))
    for index, v in zip((0, 2, 3), values):
        got = np.frombuffer(back[index][Raw].load[:4 * len(v)], dtype="<f4")
        np.testing.assert_array_equal(got.view(np.uint32),
                                      decompress(compress(v)).view(np.uint32))
    # The same capture with the Rice codec's messages, there and back.
    capsys.readouterr()
    assert main(["pcap", str(capture), "-o", str(sent), "--codec", "rice", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["codec"] == "rice" and report["gradient_frames"] == 3
    out = rdpcap(str(sent))
    assert bytes(out[1]) == bytes(packets[1]) and bytes(out[4]) == bytes(packets[4])
    for index, v in zip((0, 2, 3), values):
        assert out[index][Raw].load.startswith(rice.compress(v, 10))
    assert main(["pcap", str(sent), "-o", str(received), "--decompress", "--codec",
                 "rice"]) == 0
    back = rdpcap(str(received))
    for index, v in zip((0, 2, 3), values):
        got = np.frombuffer(back[index][Raw].load[:4 * len(v)], dtype="<f4")
        np.testing.assert_array_equal(got.view(np.uint32),
                                      rice.decompress(rice.compress(v, 10)).view(np.uint32))


@pytest.mark.parametrize("content, message", [
    (b"", "not a pcap file"),
    (b"\x0a\x0d\x0d\x0a" + b"\0" * 40, "pcapng is not supported"),
    (bytes.fromhex("d4c3b2a1020004000000000000000000ffff0000e4000000"), "link type 228"),
    (bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000") + b"\0" * 10,
     "cut inside the record header"),
])
def test_bad_captures_exit_2(tmp_path, capsys, content, message):
    from codnn.cli import main
    path = tmp_path / "bad.pcap"
    path.write_bytes(content)
    assert main(["pcap", str(path), "-o", str(tmp_path / "out.pcap")]) == 2
    assert message in capsys.readouterr().err


def test_bad_bound_and_corrupt_frames_exit_2(tmp_path, capsys):
    from scapy.utils import wrpcap

    from codnn.cli import main
    path = tmp_path / "in.pcap"
    wrpcap(str(path), [Ether(_frame(b"\x10\x00\x00\x00\xff"))])
    assert main(["pcap", str(path), "-o", str(tmp_path / "o.pcap"), "--bound-bits", "6"]) == 2
    assert "Error bound bits must be an integer in 7..15, not 6" in capsys.readouterr().err
    assert main(["pcap", str(path), "-o", str(tmp_path / "o.pcap"), "--decompress"]) == 2
    assert "record 0: Message cut" in capsys.readouterr().err


def test_big_endian_nanosecond_capture(tmp_path):
    """Captures written on the other byte order, with nanosecond timestamps, keep both."""
    import struct

    from codnn.sim.pcapfile import rewrite_pcap
    values = np.linspace(-0.5, 0.5, 24, dtype=np.float32)
    frame = _frame(values.tobytes())
    path, out = tmp_path / "be.pcap", tmp_path / "out.pcap"
    path.write_bytes(struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
                     + struct.pack(">IIII", 1700000000, 123456789, len(frame), len(frame))
                     + frame)
    report = rewrite_pcap(path, out)
    data = out.read_bytes()
    assert report["gradient_frames"] == 1 and data[:4] == bytes.fromhex("a1b23c4d")
    seconds, fraction, captured, original = struct.unpack(">IIII", data[24:40])
    assert (seconds, fraction) == (1700000000, 123456789) and captured == original
    assert data[40:40 + captured] == compress_frame(frame)


def _grown(count):
    """A gradient frame of ``count`` values that do not compress: each grows by its tag."""
    return _frame(np.full(count, 3.0, dtype=np.float32).tobytes())


def test_frame_path_compress_cases():
    """Each of frame_path's cases, sending: empty and over-long frames dropped, a flagged
    frame passed with its flag and never rewritten, a frame whose compressed form would be
    over the largest passed unchanged."""
    gradient = _frame(np.full(40, 0.01, dtype=np.float32).tobytes())
    near = _grown(120)                 # 522 bytes; compressed 4 + 480 + 30 more than that
    frames = [b"", gradient, (gradient, True), bytes(600), near, _frame(b"abc", tos=0)]
    out, counts = frame_path(frames, "compress", 10, max_frame=540)
    assert len(near) <= 540 < len(compress_frame(near))
    assert out == [(compress_frame(gradient), False), (gradient, True), (near, False),
                   (_frame(b"abc", tos=0), False)]
    assert counts == {"passed": 2, "changed": 1, "dropped": 2, "flagged": 1}
    assert frame_path([near], "compress", 10, max_frame=1000)[1]["changed"] == 1


def test_frame_path_decompress_cases():
    """Receiving: a restored frame changed; a corrupt message, a payload under 4 bytes, and
    a frame that would be restored past the largest dropped; another ToS passed."""
    values = np.full(100, 0.01, dtype=np.float32)
    sent = compress_frame(_frame(values.tobytes()))
    corrupt = _frame(b"\x10\x00\x00\x00\xff")
    short = _frame(b"\x01\x00")
    frames = [sent, corrupt, short, _frame(b"xyz", tos=4), (corrupt, True)]
    out, counts = frame_path(frames, "decompress", 10)
    assert out == [(decompress_frame(sent), False), (_frame(b"xyz", tos=4), False),
                   (corrupt, True)]
    assert counts == {"passed": 1, "changed": 1, "dropped": 2, "flagged": 1}
    restored = len(decompress_frame(sent))
    assert frame_path([sent], "decompress", 10, max_frame=restored)[1]["changed"] == 1
    assert frame_path([sent], "decompress", 10, max_frame=restored - 1)[1]["dropped"] == 1
    with pytest.raises(ValueError, match="Direction must be one of compress, decompress"):
        frame_path([], "sideways")
