"""Frames on a NIC engine's streams (``codnn.hw.nic.layouts``): value messages (a descriptor beat
with the value count, then the float32 values, as the bytes of one AXI4-Stream frame), and
what each engine takes and gives for a message of values."""

import numpy as np

from codnn.golden import inceptionn, rice, terngrad
from codnn.golden.inceptionn import BLOCK, DEFAULT_BOUND_BITS, compress, decompress

__all__ = ["CODECS", "value_frame", "special_values", "NicCodec"]

#: The golden models the NIC engines are held against.
CODECS = ("inceptionn", "terngrad", "maxabs", "rice")
#: What an engine takes and gives: value messages, the codec's messages, a scaler.
_ROLES = (("values", "codec"), ("codec", "values"), ("values", "values"),
          ("values", "scaler"))


def value_frame(values, lanes):
    """The frame of float32 ``values`` on a ``lanes``-wide stream: the count (u32 LE), zeros
    to the end of the first beat, then the values' bytes."""
    values = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    return len(values).to_bytes(4, "little") + bytes(4 * lanes - 4) + values.tobytes()


def special_values(bound_bits):
    """Float32 values at every class edge of the INCEPTIONN codec for ``bound_bits``, both
    signs: zeros, denormals, the smallest and largest significand of the exponents around
    each edge, the largest finite value, infinities and NaNs with payloads."""
    edges = [0, 1, 127 - bound_bits - 1, 127 - bound_bits, 133 - bound_bits,
             134 - bound_bits, 126, 127, 128, 254]
    exponents = np.array(sorted(set(edges)), dtype=np.uint32)
    mantissas = np.array([0, 1, 0x400000, 0x7FFFFF], dtype=np.uint32)
    bits = (exponents[:, None] << 23 | mantissas[None, :]).reshape(-1)
    bits = np.concatenate([bits, np.array([0x7F800000, 0x7FC00000, 0x7FC00001, 0x7F800001,
                                           0x7FFFFFFF], np.uint32)])
    bits = np.concatenate([bits, bits | np.uint32(1 << 31)])
    return bits.view(np.float32)


class NicCodec:
    """The golden model an engine is held against: ``codec`` (``"inceptionn"`` with bound
    ``2**-bound_bits``; ``"terngrad"`` with ``seed`` and a fixed ``scaler``, default 2.5 x
    the standard deviation of the finite values of all ``messages``, NaN/Inf coded as 0;
    ``"maxabs"``: the largest finite magnitude, as float32 bytes; ``"rice"`` with bound
    ``2**-bound_bits``, ``rounding`` and ``seed``), for an engine that
    ``takes`` values or the codec's messages and ``gives`` values, the codec's messages or
    the scaler (``codnn.hw.nic.NicDescriptor``). ``encode(x) -> bytes``,
    ``decode(bytes) -> float32``, ``frames(lanes, x)``,
    ``received(message, lanes, max_values)``."""

    def __init__(self, codec, *, takes="values", gives="codec", bound_bits=DEFAULT_BOUND_BITS,
                 seed=0, scaler=None, messages=(), rounding="nearest"):
        if codec not in CODECS:
            raise ValueError(f"Codec must be one of {', '.join(CODECS)}, not {codec!r}")
        if (takes, gives) not in _ROLES:
            raise ValueError(f"An engine takes and gives one of {_ROLES}, not {(takes, gives)}")
        self.codec, self.takes, self.gives = codec, takes, gives
        self.inceptionn = codec == "inceptionn"
        self.b, self.rounding = bound_bits, rounding
        self.seed = seed & 0xFFFF_FFFF
        finite = np.concatenate([x[np.isfinite(x)] for x in messages] + [np.zeros(1)])
        self.scaler = np.float32(2.5 * np.std(finite) if scaler is None else scaler)

    def encode(self, x):
        if self.codec == "maxabs":
            finite = np.abs(x[np.isfinite(x)])
            return np.float32(finite.max() if finite.size else 0).tobytes()
        if self.inceptionn:
            return compress(x, self.b)
        if self.codec == "rice":
            return rice.compress(x, self.b, self.rounding, self.seed)
        return terngrad.compress(np.where(np.isfinite(x), x, 0).astype(np.float32),
                                 self.seed, scaler=self.scaler)

    def decode(self, message):
        if self.codec == "rice":
            return rice.decompress(message)
        return decompress(message, self.b) if self.inceptionn else terngrad.decompress(message)

    def frames(self, lanes, x):
        """``(input frame, expected output frame, values the engine takes)`` of a message
        of float32 values ``x`` on a ``lanes``-wide engine (a decoder takes the encoded
        message)."""
        if self.takes == "codec":
            message = self.encode(x)
            return message, value_frame(self.decode(message), lanes), x[:0]
        if self.gives == "values":
            return value_frame(x, lanes), value_frame(self.decode(self.encode(x)), lanes), x
        return value_frame(x, lanes), self.encode(x), x

    def received(self, message, lanes, max_values):
        """``(expected output frame or None, bad)`` of a decoder ``lanes`` wide that takes
        any byte string ``message`` as one message (``received_values`` of the codec)."""
        if self.inceptionn:
            values, bad = inceptionn.received_values(
                message, self.b, max_values=max_values, group_values=max(BLOCK, lanes))
        elif self.codec == "rice":
            values, bad = rice.received_values(message, max_values=max_values)
        else:
            values, bad = terngrad.received_values(message, max_values=max_values)
        return (None if values is None else value_frame(values, lanes)), bad
