# amaranth: UnusedElaboratable=no
# (the array is built first, for its own parameter checks; a later check of the board
# top's parameters then drops it with a clear error, which the warning would only repeat)
"""The term-quantization array behind the UART host link."""

from codnn.golden.term_quant import ENCODINGS
from codnn.hw.tq import TermQuantArray

from .array_soc import ArraySoc
from .protocol import EngineKind

__all__ = ["TqSoc"]


class TqSoc(ArraySoc):
    """``ArraySoc`` around a ``TermQuantArray``: a weight row is ``cols`` term queues of
    ``alpha`` slots (``codnn.golden.tq_array.weight_row_word``), a data vector ``cols x g``
    sign-magnitude values (``codnn.golden.tq_array.data_vector_word``).

    Parameters
    ----------
    rows, cols, g, alpha, beta, mag_bits, encoding, acc_bits
        The array's (``TermQuantArray``); sizes at most 255.
    depth, divisor, timeout_bytes, link
        As ``ArraySoc``.

    Raises
    ------
    TypeError, ValueError
        As ``TermQuantArray`` and ``ArraySoc``.
    """

    def __init__(self, *, rows, cols, g=8, alpha=12, beta=3, mag_bits=7, encoding="naf",
                 acc_bits=32, depth=64, divisor=104, timeout_bytes=2000,
                 link=None):
        array = TermQuantArray(rows=rows, cols=cols, g=g, alpha=alpha, beta=beta,
                               mag_bits=mag_bits, encoding=encoding, acc_bits=acc_bits)
        super().__init__(array, engine=EngineKind.TQ, depth=depth, divisor=divisor,
                         timeout_bytes=timeout_bytes, link=link,
                         config={"g": g, "alpha": alpha, "beta": beta, "mag_bits": mag_bits,
                                 "encoding": ENCODINGS.index(encoding)})
