"""PyTorch DDP communication hooks that send the NIC codecs' messages
(``DistributedDataParallel.register_comm_hook``; gloo or any backend with all-gather).

Each rank compresses its gradient bucket into codec messages, exactly the bytes the NIC
engines produce and consume (``codnn.golden.inceptionn`` through the compiled
``fast_codec``, or ``codnn.golden.terngrad`` one message per parameter: TernGrad's
layer-wise scalers); the ranks all-gather the messages (their sizes first, since they
differ), every rank decodes all of them and averages them in rank order, so every rank
ends with the same averaged gradient, bit for bit. Optional error feedback (off by
default) adds what compression dropped from a rank's gradient to its next one.

TernGrad's random numbers: message ``k`` of bucket ``b`` on rank ``r`` at step ``t`` draws
from seed ``seed + 1_000_003 t + 7919 r + 101 b + k`` (mod 2**32), so ranks and steps
never share a stream. Its scaler is ``max|g|`` (``"max"``) or ``2.5 std(g)`` (``"clip"``,
the TernGrad paper's). NaN or infinite gradients: TernGrad raises, as golden does; the
INCEPTIONN-style codec sends them raw (semantics section 4), and ``CodecState.nonfinite``
counts them.
"""

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from codnn.golden import terngrad
from codnn.golden.inceptionn import check_bound_bits

from . import fast_codec

__all__ = ["CodecState", "inceptionn_hook", "terngrad_hook", "SCALERS"]

SCALERS = ("max", "clip")


@dataclass
class CodecState:
    """A hook's settings and what it has sent: ``raw_bytes`` (float32 gradients),
    ``sent_bytes`` (this rank's messages), ``steps`` (buckets exchanged), ``nonfinite``
    (NaN or infinite values sent raw)."""

    codec: str
    bound_bits: int = 10
    seed: int = 0
    scaler: str = "max"
    error_feedback: bool = False
    raw_bytes: int = 0
    sent_bytes: int = 0
    steps: int = 0
    nonfinite: int = 0
    residuals: dict = field(default_factory=dict)

    @property
    def ratio(self):
        return self.raw_bytes / self.sent_bytes if self.sent_bytes else 0.0


def _encode(state, bucket, flat):
    """This rank's messages for a bucket (a list of bytes) and what they decode to."""
    if state.codec == "inceptionn":
        state.nonfinite += int((~np.isfinite(flat)).sum())
        message = fast_codec.compress(flat, state.bound_bits)
        return [message], fast_codec.decompress(message, state.bound_bits)
    rank = dist.get_rank()
    clip = terngrad.CLIP_SIGMAS if state.scaler == "clip" else None
    messages, start = [], 0
    for k, grad in enumerate(bucket.gradients()):
        part = flat[start:start + grad.numel()]
        seed = (state.seed + 1_000_003 * state.steps + 7919 * rank + 101 * bucket.index()
                + k) % (1 << 32)
        messages.append(terngrad.compress(part, seed, clip=clip))
        start += grad.numel()
    return messages, _decode(state, messages)


def _decode(state, messages):
    if state.codec == "inceptionn":
        return np.concatenate([fast_codec.decompress(m, state.bound_bits) for m in messages])
    return np.concatenate([terngrad.decompress(m) for m in messages]).astype(np.float32)


def _all_gather_bytes(payload):
    """Every rank's ``payload`` (bytes of any length), in rank order."""
    world = dist.get_world_size()
    size = torch.tensor([len(payload)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(sizes, size)
    top = max(int(s) for s in sizes)
    padded = torch.zeros(top, dtype=torch.uint8)
    padded[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    gathered = [torch.zeros(top, dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(gathered, padded)
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


def _hook(state, bucket):
    tensor = bucket.buffer()
    flat = tensor.detach().cpu().numpy().astype(np.float32, copy=False).reshape(-1)
    if state.error_feedback:
        flat = flat + state.residuals.get(bucket.index(), 0)
    messages, own = _encode(state, bucket, flat)
    if state.error_feedback:
        state.residuals[bucket.index()] = flat - own
    state.raw_bytes += flat.nbytes
    state.sent_bytes += sum(len(m) for m in messages)
    total = np.zeros(flat.size, np.float32)
    for payload in _all_gather_bytes(_frame(messages)):      # rank order: the same sum
        total += _decode(state, _unframe(payload))
    state.steps += 1
    future = torch.futures.Future()
    future.set_result(torch.from_numpy(total / np.float32(dist.get_world_size()))
                      .reshape(tensor.shape).to(tensor.dtype))
    return future


def inceptionn_hook(bound_bits=10, *, error_feedback=False):
    """``(state, hook)`` for ``model.register_comm_hook(state, hook)``: the INCEPTIONN-style
    codec with error bound ``2**-bound_bits``."""
    check_bound_bits(bound_bits)
    return CodecState("inceptionn", bound_bits=bound_bits,
                      error_feedback=error_feedback), _hook


def terngrad_hook(seed=0, scaler="max", *, error_feedback=False):
    """``(state, hook)``: TernGrad, one message (one scaler) per parameter."""
    if scaler not in SCALERS:
        raise ValueError(f"TernGrad scaler must be one of {', '.join(SCALERS)}, not {scaler!r}")
    if not isinstance(seed, int) or not 0 <= seed < 1 << 32:
        raise ValueError(f"Seed must be an integer in 0..2**32-1, not {seed!r}")
    return CodecState("terngrad", seed=seed, scaler=scaler,
                      error_feedback=error_feedback), _hook
