"""TernGrad: stochastic ternary gradients with a per-tensor scaler (docs/semantics.md section 5).

Element ``i`` of a tensor ``g`` with scaler ``s`` becomes ``t_i = sign(g_i)`` if
``|g_i| * 2**24 > u_i * s`` (exact), else 0, where ``u_i = fmix32((seed + i) mod 2**32) >> 8``
is a 24-bit counter-based random number; so ``E[t_i * s] = g_i`` for ``|g_i| <= s`` and
values beyond the scaler always survive. Both sides of the comparison are exact in float64
(a float32 times 2**24; a 24-bit integer times a float32).

Codes are 2-bit two's complement (0 -> 00, +1 -> 01, -1 -> 11), four per byte, element ``i``
in bits ``2(i%4)+1..2(i%4)`` of byte ``i//4``. A message is the scaler as float32 (LE), the
count ``n`` as u32 (LE), then the ``ceil(n/4)`` code bytes; it decodes to ``t_i * s``.
"""

import numpy as np

from codnn.golden.fmix32 import counter_uniforms
from codnn.golden.inceptionn import CorruptMessage

__all__ = ["CLIP_SIGMAS", "tensor_scaler", "ternarize", "compress", "decompress",
           "received_values", "message_size"]

#: The clipping factor the TernGrad paper found to work everywhere: ``s = 2.5 * std(g)``.
CLIP_SIGMAS = 2.5

_HEADER = 8
#: Code bits of -1, 0, +1 (index t + 1).
_CODES = np.array([3, 0, 1], dtype=np.uint8)
#: Ternary value of each code (10 is rejected before use).
_VALUES = np.array([0, 1, 0, -1], dtype=np.float32)


def _gradients(g):
    array = np.asarray(g)
    if array.dtype != np.float32:
        raise TypeError(f"Gradients must be float32, not {array.dtype}")
    flat = array.reshape(-1)
    bad = ~np.isfinite(flat)
    if bad.any():
        first = int(np.argmax(bad))
        raise ValueError(f"TernGrad input has {int(bad.sum())} NaN/Inf values"
                         f" (first at index {first}: {flat[first]})")
    if flat.size >= 1 << 32:
        raise ValueError(f"A message holds fewer than 2**32 values, not {flat.size}")
    return flat


def tensor_scaler(g, clip=None):
    """The scaler of a tensor: ``max|g|``, or with ``clip`` the clipped ``clip * std(g)``.

    The population std is computed in float64; the result is rounded to float32. An empty
    tensor's scaler is 0.
    """
    flat = _gradients(g)
    if clip is not None and (not np.isfinite(clip) or clip <= 0):
        raise ValueError(f"Clipping factor must be a positive number, not {clip!r}")
    if not flat.size:
        return np.float32(0.0)
    if clip is None:
        return np.float32(np.abs(flat).max())
    return np.float32(clip * np.std(flat.astype(np.float64)))


def _usable(s):
    """A scaler is a finite float32 with its sign bit clear: +0.0 is one, -0.0 is not."""
    return bool(np.isfinite(s) and not np.signbit(s))


def _check_scaler(s):
    s = np.float32(s)
    if not _usable(s):
        raise ValueError(f"Scaler must be a finite float32 with its sign bit clear, not {s!r}")
    return s


def ternarize(g, seed, s):
    """The ternary codes ``t`` (int8, -1/0/+1) of float32 gradients ``g`` for scaler ``s``."""
    flat = _gradients(g)
    s = _check_scaler(s)
    u = counter_uniforms(seed, flat.size)
    keep = np.abs(flat.astype(np.float64)) * 2.0 ** 24 > u.astype(np.float64) * np.float64(s)
    return (np.sign(flat) * keep).astype(np.int8)


def message_size(count):
    """Bytes of a message of ``count`` values."""
    return _HEADER + -(-count // 4)


def compress(g, seed, scaler=None, clip=None):
    """Ternarize float32 gradients and pack them into one message.

    Parameters
    ----------
    g : array_like of float32
        One tensor (any shape, flattened in C order).
    seed : int
        0..2**32-1; element ``i`` draws ``fmix32(seed + i) >> 8``.
    scaler : float, optional
        The scaler ``s``; by default ``tensor_scaler(g, clip)``.

    Raises
    ------
    TypeError
        If ``g`` is not float32.
    ValueError
        If ``g`` has NaN or Inf, the scaler has its sign bit set (negative or -0.0) or is
        not finite, or the seed is out of range.
    """
    flat = _gradients(g)
    s = _check_scaler(tensor_scaler(flat, clip) if scaler is None else scaler)
    codes = _CODES[ternarize(flat, seed, s) + 1]
    codes = np.concatenate([codes, np.zeros(-flat.size % 4, np.uint8)]).reshape(-1, 4)
    packed = (codes << np.array([0, 2, 4, 6], np.uint8)).sum(axis=1, dtype=np.uint8)
    header = np.float32(s).tobytes() + np.uint32(flat.size).tobytes()
    return header + packed.tobytes()


def decompress(data):
    """Decode one message into a flat float32 array ``t_i * s``.

    Raises
    ------
    CorruptMessage
        If the message's length does not match its count, a code is ``10``, a code past the
        count is nonzero, or the scaler has its sign bit set (negative or -0.0) or is not
        finite.
    """
    data = bytes(data)
    if len(data) < _HEADER:
        raise CorruptMessage(f"Message of {len(data)} bytes has no 8-byte header")
    s = np.frombuffer(data[:4], np.float32)[0]
    if not _usable(s):
        raise CorruptMessage(f"Message's scaler is {s}, not a finite float32 with its sign"
                             f" bit clear")
    count = int.from_bytes(data[4:8], "little")
    if len(data) != message_size(count):
        raise CorruptMessage(f"Message of {len(data)} bytes; a count of {count} needs"
                             f" {message_size(count)}")
    packed = np.frombuffer(data, np.uint8, offset=_HEADER)
    codes = ((packed[:, None] >> np.array([0, 2, 4, 6], np.uint8)) & 3).reshape(-1)
    if (codes == 2).any():
        raise CorruptMessage(f"Code 10 (not a ternary value) at element"
                             f" {int(np.argmax(codes == 2))}")
    if codes[count:].any():
        raise CorruptMessage("Nonzero code on an element past the message's count")
    return _VALUES[codes[:count]] * s


def received_values(data, *, max_values):
    """What a TernGrad decoder gives for any byte string ``data`` taken as one message
    (docs/nic.md, bad input): ``(values, bad)``, ``values`` None for no output.

    A message of fewer than 8 bytes, or whose count is above ``max_values``, gives no
    output. Otherwise the values of every whole code byte received, up to the count, then
    zeros; code ``10`` gives +0.0, and a scaler with its sign bit set or not finite gives
    +0.0 everywhere. ``bad``: the message is not exactly what ``decompress`` takes (its
    length does not match its count, a code 10, a nonzero code past the count, an
    unusable scaler).
    """
    data = bytes(data)
    if len(data) < _HEADER:
        return None, True
    count = int.from_bytes(data[4:8], "little")
    if count > max_values:
        return None, True
    s = np.frombuffer(data[:4], np.float32)[0]
    usable = _usable(s)
    packed = np.frombuffer(data[_HEADER:message_size(count)], np.uint8)
    codes = ((packed[:, None] >> np.array([0, 2, 4, 6], np.uint8)) & 3).reshape(-1)
    values = np.zeros(count, np.float32)
    kept = min(count, codes.size)
    if usable:
        values[:kept] = _VALUES[codes[:kept]] * s
    bad = (len(data) != message_size(count) or not usable or bool((codes[:count] == 2).any())
           or bool(codes[count:].any()))
    return values, bad
