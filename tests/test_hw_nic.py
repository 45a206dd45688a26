# amaranth: UnusedElaboratable=no
"""The NIC engines' parameters and ports, the byte packer and the decompressor's latency on
Amaranth's simulator."""

import random

import numpy as np
import pytest

from codnn.golden import inceptionn
from codnn.hw.nic import (
    AxiStreamTop,
    BytePacker,
    CodecLoopback,
    InceptionnCompressor,
    InceptionnDecompressor,
)
from codnn.sim.pysim import run_stream_test


@pytest.mark.parametrize("build,error,message", [
    (lambda: InceptionnCompressor(lanes=3), ValueError, "Lane count must be one of 1, 2, 4, 8"),
    (lambda: InceptionnDecompressor(lanes=0), ValueError, "not 0"),
    (lambda: CodecLoopback(lanes=True), ValueError, "not True"),
    (lambda: BytePacker(chunk_bytes=0, beat_bytes=4), TypeError,
     "Chunk size must be a positive integer"),
    (lambda: BytePacker(chunk_bytes=4, beat_bytes=2.0), TypeError,
     "Beat size must be a positive integer"),
])
def test_invalid_parameters(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_axi_top_port_names():
    top = AxiStreamTop(InceptionnDecompressor(lanes=16))
    names = set(top.signature.members)
    for prefix in ("s_axis", "m_axis"):
        assert {f"{prefix}_t{n}" for n in ("data", "keep", "last", "valid", "ready")} <= names
    assert len(top.s_axis_tdata) == 512 and len(top.m_axis_tkeep) == 64
    assert {"bound_bits", "bypass", "error", "error_count"} <= names


@pytest.mark.parametrize("chunk_bytes,beat_bytes", [(5, 2), (3, 8), (8, 4), (34, 32), (68, 64)])
def test_packer_concatenates_chunks_into_beats(chunk_bytes, beat_bytes):
    rng = random.Random(chunk_bytes)
    messages = [[bytes(rng.randrange(256) for _ in range(rng.randrange(chunk_bytes + 1)))
                 for _ in range(rng.randrange(1, 12))] for _ in range(6)]
    messages.append([b""])                       # an empty message still ends
    beats, expected = [], []
    for chunks in messages:
        for k, chunk in enumerate(chunks):
            beats.append({"data": int.from_bytes(chunk, "little"), "length": len(chunk),
                          "last": k == len(chunks) - 1})
        data = b"".join(chunks)
        expected.append(data)
    count = sum(max(1, -(-len(d) // beat_bytes)) for d in expected)
    dut = BytePacker(chunk_bytes=chunk_bytes, beat_bytes=beat_bytes)
    out, _ = run_stream_test(dut, beats, expected_count=count, rng=rng, idle=0.3,
                             backpressure=0.3)
    frames, current = [], b""
    for beat in out:
        kept = bin(int(beat.keep)).count("1")
        assert int(beat.keep) == (1 << kept) - 1, "kept bytes must be the lowest ones"
        assert int(beat.data) >> (8 * kept) == 0, "bytes not kept must be zero"
        current += int(beat.data).to_bytes(beat_bytes, "little")[:kept]
        if beat.last:
            frames.append(current)
            current = b""
    assert frames == expected


@pytest.mark.parametrize("chunk_bytes,beat_bytes", [(5, 2), (8, 4), (34, 32), (68, 64)])
def test_packer_takes_a_chunk_per_cycle(chunk_bytes, beat_bytes):
    """Chunks of at most a beat, no pauses: one chunk per cycle; the end of the message
    leaves at most ``latency`` cycles plus the window's last two beats later."""
    rng = random.Random(beat_bytes)
    chunks = [bytes(rng.randrange(256) for _ in range(beat_bytes if k % 3 == 0
                                                      else rng.randrange(beat_bytes + 1)))
              for k in range(300)]
    beats = [{"data": int.from_bytes(chunk, "little"), "length": len(chunk),
              "last": k == len(chunks) - 1} for k, chunk in enumerate(chunks)]
    dut = BytePacker(chunk_bytes=chunk_bytes, beat_bytes=beat_bytes)
    count = -(-sum(map(len, chunks)) // beat_bytes)
    out, cycles = run_stream_test(dut, beats, expected_count=count, rng=rng)
    assert b"".join(int(beat.data).to_bytes(beat_bytes, "little") for beat in out)[
        :sum(map(len, chunks))] == b"".join(chunks)
    assert len(chunks) + dut.latency <= cycles <= len(chunks) + dut.latency + 2, cycles


@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16])
def test_decompressor_latency(lanes):
    """A message of one group, no stalls: its last input beat is taken at the edge of its
    count, its first value beat is taken ``latency`` edges later, the rest one per edge
    (the descriptor beat leaves before them)."""
    values = max(8, lanes)
    message = inceptionn.compress(np.zeros(values, np.float32), bound_bits=10)
    width = 4 * lanes
    beats = [{"data": int.from_bytes(message[k:k + width], "little"),
              "keep": (1 << len(message[k:k + width])) - 1, "last": k + width >= len(message)}
             for k in range(0, len(message), width)]
    dut = InceptionnDecompressor(lanes=lanes)
    value_beats = values // lanes
    out, cycles = run_stream_test(dut, beats, expected_count=1 + value_beats,
                                  rng=random.Random(lanes))
    assert [int(beat.data) for beat in out] == [values] + [0] * value_beats
    assert cycles == len(beats) + dut.latency + value_beats - 1, cycles
