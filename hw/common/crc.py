"""CRCs in gateware: CRC-16/CCITT-FALSE (the host link's, ``codnn.hw.soc.protocol.crc16``) a
byte per cycle, and Ethernet's CRC-32 (the FCS, ``zlib.crc32``) a byte or a word."""

from functools import reduce
from operator import xor

from amaranth.hdl import Cat, Const, Value

__all__ = ["crc16_update", "crc32_update", "crc32_update_word", "CRC32_RESIDUE"]

#: Ethernet's CRC-32 register (before the final inversion) after a frame and its FCS.
CRC32_RESIDUE = 0xDEBB20E3


def _equations(bits, poly, reflected, data_bits=8):
    """For each bit of the CRC register after ``data_bits`` of data (a byte, or for a
    reflected CRC whole bytes, the lowest first), the bits of ``Cat(crc, data)`` XORed
    into it.

    A CRC is linear over GF(2): its eight shift-and-XOR steps are run here on sets of
    input bits, so the gateware is one layer of XOR gates per register bit. ``reflected``
    CRCs take the byte's bits from the lowest and shift the register right (Ethernet);
    the others from the highest, shifting left (CCITT).
    """
    state = [{i} for i in range(bits)]
    for step in range(data_bits):
        data = {bits + (step if reflected else 7 - step)}
        if reflected:
            feedback = state[0] ^ data
            state = [set(state[i + 1]) if i + 1 < bits else set() for i in range(bits)]
        else:
            feedback = state[bits - 1] ^ data
            state = [set(state[i - 1]) if i else set() for i in range(bits)]
        state = [state[i] ^ (feedback if poly >> i & 1 else set()) for i in range(bits)]
    return [sorted(inputs) for inputs in state]


_CRC16 = _equations(16, 0x1021, reflected=False)
_CRC32 = _equations(32, 0xEDB88320, reflected=True)
_CRC32_WORD = _equations(32, 0xEDB88320, reflected=True, data_bits=32)


def _update(equations, crc, data):
    inputs = Cat(Value.cast(crc), Const(data, 8) if isinstance(data, int) else data)
    return Cat(*(reduce(xor, (inputs[i] for i in bits), Const(0, 1)) for bits in equations))


def crc16_update(crc, byte):
    """Return the expression of ``crc`` (16 bits) after ``byte`` (8 bits)."""
    return _update(_CRC16, crc, byte)


def crc32_update(crc, byte):
    """Return the expression of Ethernet's CRC-32 register ``crc`` (32 bits, starting at
    all ones) after ``byte`` (8 bits); the FCS is the register inverted, low byte first."""
    return _update(_CRC32, crc, byte)


def crc32_update_word(crc, word):
    """Return the expression of the CRC-32 register ``crc`` after the four bytes of
    ``word`` (32 bits, its lowest byte first): one layer of XOR gates per register bit."""
    return _update(_CRC32_WORD, crc, word)
