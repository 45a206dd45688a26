"""One rank's part of the gradient exchanges of ``codnn.golden.exchange`` over
``torch.distributed`` point-to-point messages (gloo): the ring (2(N-1) hops, each carrying
one chunk's message) and the worker-aggregator baseline (rank 0 aggregates). Each rank's
result equals golden's for the same gradients, bit for bit, and so equals every other
rank's.

A message crosses as its length (int64) then its bytes. ``Traffic`` adds up what a rank
sent and where its time went: in the codec (compress, decompress) or waiting on the wire.
"""

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from codnn.golden.exchange import Codec, chunk_slices, message_seed

from . import fast_codec, fast_rice

__all__ = ["FastCodec", "Traffic", "ring", "aggregator"]


class FastCodec(Codec):
    """``codnn.golden.exchange.Codec`` with the INCEPTIONN-style and Rice codecs compiled
    (``fast_codec``, ``fast_rice``): the same bytes and values."""

    def compress(self, values, seed=0):
        if self.name == "inceptionn":
            return fast_codec.compress(values, self.bound_bits)
        if self.name == "rice":
            return fast_rice.compress(values, self.bound_bits, self.rounding, seed)
        return super().compress(values, seed)

    def decompress(self, data):
        if self.name == "inceptionn":
            return fast_codec.decompress(data, self.bound_bits)
        if self.name == "rice":
            return fast_rice.decompress(data)
        return super().decompress(data)


@dataclass
class Traffic:
    """What one rank sent (``sent_bytes`` in ``messages``) and its time in the codec and on
    the wire (sending and waiting to receive), in seconds."""

    sent_bytes: int = 0
    messages: int = 0
    codec_seconds: float = 0.0
    wire_seconds: float = 0.0

    def compress(self, codec, values, seed):
        start = time.perf_counter()
        message = codec.compress(values, seed)
        self.codec_seconds += time.perf_counter() - start
        return message

    def decompress(self, codec, message):
        start = time.perf_counter()
        values = codec.decompress(message)
        self.codec_seconds += time.perf_counter() - start
        return values

    def swap(self, message, to, source):
        """Send ``message`` to rank ``to`` (or nobody when None) while receiving one from
        rank ``source`` (or nobody); return the received bytes."""
        start = time.perf_counter()
        works = []
        if to is not None:
            payload = torch.frombuffer(bytearray(message), dtype=torch.uint8) \
                if message else torch.zeros(0, dtype=torch.uint8)
            works.append(dist.isend(torch.tensor([len(message)]), to))
            if message:
                works.append(dist.isend(payload, to))
            self.sent_bytes += len(message)
            self.messages += 1
        received = b""
        if source is not None:
            size = torch.zeros(1, dtype=torch.int64)
            dist.recv(size, source)
            if int(size):
                data = torch.empty(int(size), dtype=torch.uint8)
                dist.recv(data, source)
                received = data.numpy().tobytes()
        for work in works:
            work.wait()
        self.wire_seconds += time.perf_counter() - start
        return received


def ring(flat, codec, traffic, seed=0, step=0, bucket=0):
    """This rank's averaged gradient after the ring exchange (flat float32)."""
    rank, nodes = dist.get_rank(), dist.get_world_size()
    part = chunk_slices(flat.size, nodes)
    after, before = (rank + 1) % nodes, (rank - 1) % nodes
    acc = flat.astype(np.float32, copy=True)
    for s in range(nodes - 1):
        message = traffic.compress(codec, acc[part[(rank - s) % nodes]],
                                   message_seed(seed, step, bucket, s * nodes + rank))
        received = traffic.swap(message, after, before)
        chunk = part[(rank - 1 - s) % nodes]
        acc[chunk] = traffic.decompress(codec, received) + acc[chunk]
    own = (rank + 1) % nodes
    message = traffic.compress(codec, acc[part[own]] / np.float32(nodes),
                               message_seed(seed, step, bucket, (nodes - 1) * nodes + rank))
    averaged = np.empty(flat.size, np.float32)
    averaged[part[own]] = traffic.decompress(codec, message)
    for s in range(nodes - 1):
        message = traffic.swap(message, after, before)
        averaged[part[(rank - s) % nodes]] = traffic.decompress(codec, message)
    return averaged


def aggregator(flat, codec, traffic, seed=0, step=0, bucket=0):
    """This rank's averaged gradient through the aggregator, rank 0 (flat float32)."""
    rank, nodes = dist.get_rank(), dist.get_world_size()
    if rank:
        message = traffic.compress(codec, flat, message_seed(seed, step, bucket, rank))
        traffic.swap(message, 0, None)
        return traffic.decompress(codec, traffic.swap(b"", None, 0))
    total = flat.astype(np.float32, copy=True)
    for source in range(1, nodes):
        total = total + traffic.decompress(codec, traffic.swap(b"", None, source))
    mean = traffic.compress(codec, total / np.float32(nodes),
                            message_seed(seed, step, bucket, nodes))
    for to in range(1, nodes):
        traffic.swap(mean, to, None)
    return traffic.decompress(codec, mean)
