"""Gradient exchanges between N nodes, each hop's payload a codec message (docs/semantics.md
section 6): the gradient-centric ring (reduce-scatter, then all-gather) and the
worker-aggregator baseline. Every node ends with the same averaged gradient, bit for bit.

Ring, N nodes, gradients of n float32 values split into chunks ``c`` = values
``[c n // N, (c + 1) n // N)``:

* reduce-scatter, steps ``s = 0 .. N-2``: node ``r`` compresses its running sum of chunk
  ``(r - s) mod N`` and sends it to node ``r + 1``, which sets its chunk to
  ``decompress(message) + own`` (float32);
* node ``r`` then holds the full sum of chunk ``(r + 1) mod N``: it divides it by ``N``
  (float32), compresses it once and uses what that message decodes to;
* all-gather, steps ``s = 0 .. N-2``: node ``r`` sends the message of the chunk owned by
  node ``(r - s) mod N`` (its own at ``s = 0``, then the one it received) unchanged; every
  node decodes each message it receives.

Aggregator (node 0 is the aggregator and a worker): nodes ``1 .. N-1`` send their compressed
gradient; node 0 adds ``own + decompress(m_1) + ... + decompress(m_{N-1})`` in that order,
divides by ``N``, compresses the mean once and sends that message to every node; every node
(node 0 included) uses what it decodes to.

Message seeds (TernGrad's counter stream): the message in slot ``k`` of a step draws from
``message_seed(seed, step, bucket, k)``; ring slots are ``s N + r`` in the reduce-scatter and
``(N - 1) N + r`` for node ``r``'s all-gather message; aggregator slots are ``r`` for node
``r``'s gradient and ``N`` for the mean.
"""

from dataclasses import dataclass

import numpy as np

from codnn.golden import inceptionn, rice, terngrad
from codnn.golden.inceptionn import CorruptMessage

__all__ = ["CODECS", "Codec", "message_seed", "chunk_bounds", "chunk_slices", "ring_allreduce",
           "aggregator_allreduce", "EXCHANGES"]

#: Codec names: raw float32 (the uncompressed baseline), INCEPTIONN-style, TernGrad, the
#: Rice-coded error-bounded codec.
CODECS = ("none", "inceptionn", "terngrad", "rice")
#: Exchange names (``allgather`` is the DDP hook's: every node sends its message to all).
EXCHANGES = ("ring", "aggregator", "allgather")


def message_seed(seed, step, bucket, slot, part=0):
    """TernGrad seed of one message: ``seed + 1_000_003 step + 101 bucket + 7919 slot +
    part`` (mod 2**32)."""
    return (seed + 1_000_003 * step + 101 * bucket + 7919 * slot + part) % (1 << 32)


@dataclass(frozen=True)
class Codec:
    """A payload codec: ``none`` (float32, little-endian), ``inceptionn`` (error bound
    ``2**-bound_bits``), ``terngrad`` (scaler ``max|g|``, or ``clip`` standard deviations
    when ``clip`` is set) or ``rice`` (error bound ``2**-bound_bits``, ``rounding``
    ``nearest`` or ``stochastic``)."""

    name: str = "none"
    bound_bits: int = inceptionn.DEFAULT_BOUND_BITS
    clip: float | None = None
    rounding: str = "nearest"

    def __post_init__(self):
        if self.name not in CODECS:
            raise ValueError(f"Unknown codec {self.name!r}; choose one of {', '.join(CODECS)}")
        inceptionn.check_bound_bits(self.bound_bits)
        rice.check_rounding(self.rounding)

    def compress(self, values, seed=0):
        """One message for a flat float32 array (``seed``: TernGrad's, and stochastic
        rounding's)."""
        if self.name == "inceptionn":
            return inceptionn.compress(values, self.bound_bits)
        if self.name == "rice":
            return rice.compress(values, self.bound_bits, self.rounding, seed)
        if self.name == "terngrad":
            return terngrad.compress(values, seed, clip=self.clip)
        return np.asarray(values, "<f4").tobytes()

    def decompress(self, data):
        """The float32 values of one message; ``CorruptMessage`` if it is malformed."""
        if self.name == "inceptionn":
            return inceptionn.decompress(data, self.bound_bits)
        if self.name == "terngrad":
            return terngrad.decompress(data)
        if self.name == "rice":
            return rice.decompress(data)
        if len(data) % 4:
            raise CorruptMessage(f"A raw float32 message of {len(data)} bytes is not whole")
        return np.frombuffer(data, "<f4").astype(np.float32)


def chunk_bounds(count, nodes):
    """Start of each of the ``nodes`` ring chunks of ``count`` values, then ``count``."""
    return [c * count // nodes for c in range(nodes + 1)]


def chunk_slices(count, nodes):
    """The ``nodes`` ring chunks of ``count`` values, as slices."""
    bounds = chunk_bounds(count, nodes)
    return [slice(bounds[c], bounds[c + 1]) for c in range(nodes)]


def _gradients(grads):
    grads = [np.asarray(g) for g in grads]
    if not grads:
        raise ValueError("An exchange needs at least one node")
    for g in grads:
        if g.dtype != np.float32 or g.ndim != 1 or g.size != grads[0].size:
            raise ValueError("Each node's gradient must be a flat float32 array of one size")
    return grads


def ring_allreduce(grads, codec, seed=0, step=0, bucket=0):
    """Every node's averaged gradient after the ring, and the bytes each node sent."""
    grads = _gradients(grads)
    nodes = len(grads)
    part = chunk_slices(grads[0].size, nodes)
    acc = [g.copy() for g in grads]
    sent = [0] * nodes
    for s in range(nodes - 1):
        messages = [codec.compress(acc[r][part[(r - s) % nodes]],
                                   message_seed(seed, step, bucket, s * nodes + r))
                    for r in range(nodes)]
        for r, message in enumerate(messages):
            sent[r] += len(message)
            chunk = part[(r - s) % nodes]
            receiver = acc[(r + 1) % nodes]
            receiver[chunk] = codec.decompress(message) + receiver[chunk]
    owned = [codec.compress(acc[r][part[(r + 1) % nodes]] / np.float32(nodes),
                            message_seed(seed, step, bucket, (nodes - 1) * nodes + r))
             for r in range(nodes)]
    averaged = np.empty(grads[0].size, np.float32)
    for r, message in enumerate(owned):
        averaged[part[(r + 1) % nodes]] = codec.decompress(message)
    for r in range(nodes):
        sent[r] += sum(len(owned[(r - s) % nodes]) for s in range(nodes - 1))
    return [averaged.copy() for _ in range(nodes)], sent


def aggregator_allreduce(grads, codec, seed=0, step=0, bucket=0):
    """Every node's averaged gradient through aggregator node 0, and the bytes each sent."""
    grads = _gradients(grads)
    nodes = len(grads)
    messages = [codec.compress(grads[r], message_seed(seed, step, bucket, r))
                for r in range(1, nodes)]
    total = grads[0].copy()
    for message in messages:
        total = total + codec.decompress(message)
    mean = codec.compress(total / np.float32(nodes), message_seed(seed, step, bucket, nodes))
    averaged = codec.decompress(mean)
    sent = [(nodes - 1) * len(mean)] + [len(m) for m in messages]
    return [averaged.copy() for _ in range(nodes)], sent
