"""Payload layouts shared by the term-quantization units."""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import ceil_log2

__all__ = ["check_mag_bits", "exponent_bits", "sign_magnitude", "signed_digits", "term"]


def check_mag_bits(mag_bits):
    """Raise ``TypeError``/``ValueError`` unless ``mag_bits`` is an integer in 1..15."""
    if not isinstance(mag_bits, int) or isinstance(mag_bits, bool):
        raise TypeError(f"Magnitude width must be an integer, not {mag_bits!r}")
    if not 1 <= mag_bits <= 15:
        raise ValueError(f"Magnitude width must lie in 1..15, not {mag_bits}")


def exponent_bits(mag_bits):
    """Width of a term exponent: digits run 0..mag_bits (one past the top magnitude bit)."""
    return max(1, ceil_log2(mag_bits + 1))


def sign_magnitude(mag_bits):
    """A quantized value: ``mag`` (``mag_bits``) and ``neg``."""
    return data.StructLayout({"mag": unsigned(mag_bits), "neg": 1})


def signed_digits(mag_bits):
    """A value in signed-digit form: bit ``e`` of ``pos`` (``neg``) is a +1 (-1) digit of
    ``2**e``, the value's sign applied; ``mag_bits + 1`` digits."""
    return data.StructLayout({"pos": unsigned(mag_bits + 1), "neg": unsigned(mag_bits + 1)})


def term(mag_bits):
    """One term ``(-1)**neg * 2**exp``; ``valid`` low for an empty slot."""
    return data.StructLayout({"exp": unsigned(exponent_bits(mag_bits)), "neg": 1, "valid": 1})
