"""PyTorch DDP communication hooks that send the NIC codecs' messages
(``DistributedDataParallel.register_comm_hook``; gloo or any backend with point-to-point
and all-gather).

Each rank's gradient bucket crosses as codec messages, exactly the bytes the NIC engines
produce and consume (``codnn.golden.inceptionn`` through the compiled ``fast_codec``,
``codnn.golden.terngrad``, ``codnn.golden.rice`` through ``fast_rice``, or raw float32
for the uncompressed baseline), by one of three
exchanges; every rank ends with the same averaged gradient, bit for bit:

* ``ring`` (default): INCEPTIONN's gradient-centric ring, ``codnn.distributed.exchange``;
* ``aggregator``: the worker-aggregator baseline, rank 0 aggregating;
* ``allgather``: every rank sends its messages to all (sizes first, since they differ),
  decodes all of them and averages them in rank order. TernGrad sends one message per
  parameter here (layer-wise scalers); in the other two one per chunk.

Message seeds are ``codnn.golden.exchange.message_seed(seed, step, bucket, slot, part)``: slots
as golden's exchanges say, and for ``allgather`` slot ``r`` (the rank) and part ``k`` (the
parameter in the bucket). TernGrad's scaler is ``max|g|`` (``"max"``) or ``2.5 std(g)``
(``"clip"``, the TernGrad paper's). Optional error feedback (off by default; ``allgather``
only, where a rank's own messages carry exactly its gradient) adds what compression dropped
from a rank's gradient (its gradient minus what its messages decode to) to its next one.
NaN or infinite
gradients: TernGrad raises, as golden does; the INCEPTIONN-style codec sends them raw
(semantics section 4), and ``CodecState.nonfinite`` counts them.
"""

import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from codnn.golden import terngrad
from codnn.golden.exchange import EXCHANGES, message_seed

from . import exchange
from .exchange import FastCodec, Traffic

__all__ = ["CodecState", "comm_hook", "inceptionn_hook", "terngrad_hook", "SCALERS"]

SCALERS = ("max", "clip")


@dataclass
class CodecState:
    """A hook's settings and what it has done: ``raw_bytes`` (float32 gradients),
    ``traffic`` (bytes this rank sent, time in the codec and on the wire), ``seconds``
    (time in the hook), ``steps`` (buckets exchanged), ``nonfinite`` (NaN or infinite
    values sent raw)."""

    codec: FastCodec
    exchange: str = "ring"
    seed: int = 0
    error_feedback: bool = False
    raw_bytes: int = 0
    traffic: Traffic = field(default_factory=Traffic)
    seconds: float = 0.0
    steps: int = 0
    nonfinite: int = 0
    residuals: dict = field(default_factory=dict)

    @property
    def sent_bytes(self):
        return self.traffic.sent_bytes


def _all_gather_bytes(payload, traffic):
    """Every rank's ``payload`` (bytes of any length), in rank order."""
    start = time.perf_counter()
    world = dist.get_world_size()
    size = torch.tensor([len(payload)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(sizes, size)
    top = max(int(s) for s in sizes)
    padded = torch.zeros(top, dtype=torch.uint8)
    padded[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    gathered = [torch.zeros(top, dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(gathered, padded)
    traffic.wire_seconds += time.perf_counter() - start
    return [bytes(g[:int(s)].numpy()) for g, s in zip(gathered, sizes)]


def _frame(messages):
    """Messages of one rank as one payload: each prefixed by its length (u32 LE)."""
    return b"".join(len(m).to_bytes(4, "little") + m for m in messages)


def _unframe(payload):
    messages, at = [], 0
    while at < len(payload):
        length = int.from_bytes(payload[at:at + 4], "little")
        messages.append(payload[at + 4:at + 4 + length])
        at += 4 + length
    return messages


def _all_gather(state, bucket, flat):
    """The rank-order mean of every rank's decoded messages, and what this rank's decode to."""
    codec, traffic, rank = state.codec, state.traffic, dist.get_rank()
    sizes = [g.numel() for g in bucket.gradients()] if codec.name == "terngrad" else [flat.size]
    bounds = np.cumsum([0] + sizes)
    messages = [traffic.compress(codec, flat[bounds[k]:bounds[k + 1]],
                                 message_seed(state.seed, state.steps, bucket.index(), rank, k))
                for k in range(len(sizes))]
    traffic.sent_bytes += sum(len(m) for m in messages)
    traffic.messages += len(messages)
    total = np.zeros(flat.size, np.float32)
    own = None
    for r, payload in enumerate(_all_gather_bytes(_frame(messages), traffic)):
        values = np.concatenate([traffic.decompress(state.codec, m) for m in _unframe(payload)])
        own = values if r == rank else own
        total += values
    return total / np.float32(dist.get_world_size()), own


def _hook(state, bucket):
    start = time.perf_counter()
    tensor = bucket.buffer()
    flat = tensor.detach().cpu().numpy().astype(np.float32, copy=False).reshape(-1)
    if state.error_feedback:
        flat = flat + state.residuals.get(bucket.index(), 0)
    if state.codec.name == "inceptionn":
        state.nonfinite += int((~np.isfinite(flat)).sum())
    if state.exchange == "allgather":
        averaged, own = _all_gather(state, bucket, flat)
        if state.error_feedback:
            state.residuals[bucket.index()] = flat - own
    else:
        averaged = getattr(exchange, state.exchange)(flat, state.codec, state.traffic,
                                                     state.seed, state.steps, bucket.index())
    state.raw_bytes += flat.nbytes
    state.steps += 1
    future = torch.futures.Future()
    future.set_result(torch.from_numpy(averaged).reshape(tensor.shape).to(tensor.dtype))
    state.seconds += time.perf_counter() - start
    return future


def comm_hook(codec="none", *, exchange="ring", bound_bits=10, seed=0, scaler="max",
              error_feedback=False):
    """``(state, hook)`` for ``model.register_comm_hook(state, hook)``."""
    if exchange not in EXCHANGES:
        raise ValueError(f"Unknown exchange {exchange!r}; choose one of {', '.join(EXCHANGES)}")
    if scaler not in SCALERS:
        raise ValueError(f"TernGrad scaler must be one of {', '.join(SCALERS)}, not {scaler!r}")
    if not isinstance(seed, int) or not 0 <= seed < 1 << 32:
        raise ValueError(f"Seed must be an integer in 0..2**32-1, not {seed!r}")
    if error_feedback and exchange != "allgather":
        raise ValueError("Error feedback needs the allgather exchange, where a rank's own"
                         " messages carry its gradient")
    clip = terngrad.CLIP_SIGMAS if scaler == "clip" else None
    return CodecState(FastCodec(codec, bound_bits, clip), exchange, seed, error_feedback), _hook


def inceptionn_hook(bound_bits=10, *, exchange="ring", error_feedback=False):
    """``(state, hook)``: the INCEPTIONN-style codec with error bound ``2**-bound_bits``."""
    return comm_hook("inceptionn", exchange=exchange, bound_bits=bound_bits,
                     error_feedback=error_feedback)


def terngrad_hook(seed=0, scaler="max", *, exchange="ring", error_feedback=False):
    """``(state, hook)``: TernGrad (per parameter in ``allgather``, per chunk otherwise)."""
    return comm_hook("terngrad", exchange=exchange, seed=seed, scaler=scaler,
                     error_feedback=error_feedback)
