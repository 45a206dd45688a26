"""Value messages on a NIC engine's stream (``hw.nic.layouts``): a descriptor beat with the
value count, then the float32 values, as the bytes of one AXI4-Stream frame."""

import numpy as np

__all__ = ["value_frame", "special_values"]


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
