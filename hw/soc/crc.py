"""CRC-16/CCITT-FALSE in gateware: one byte per cycle (``hw.soc.protocol.crc16``)."""

from functools import reduce
from operator import xor

from amaranth.hdl import Cat, Const, Value

__all__ = ["crc16_update"]


def _equations():
    """For each bit of the next CRC, the bits of ``Cat(crc, byte)`` XORed into it.

    The CRC is linear over GF(2): the eight shift-and-XOR-with-0x1021 steps are run here
    on sets of input bits, so the gateware is one layer of XOR gates per output bit.
    """
    state = [{i} ^ ({16 + i - 8} if i >= 8 else set()) for i in range(16)]
    for _ in range(8):
        top = state[15]
        state = [(set() if i == 0 else set(state[i - 1])) ^ (top if 0x1021 >> i & 1 else set())
                 for i in range(16)]
    return [sorted(bits) for bits in state]


_EQUATIONS = _equations()


def crc16_update(crc, byte):
    """Return the expression of ``crc`` (16 bits) after ``byte`` (8 bits)."""
    inputs = Cat(Value.cast(crc), byte)
    return Cat(*(reduce(xor, (inputs[i] for i in bits), Const(0, 1)) for bits in _EQUATIONS))
