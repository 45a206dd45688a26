# amaranth: UnusedElaboratable=no
# (the array is built first, for its own parameter checks; a later check of the board
# top's parameters then drops it with a clear error, which the warning would only repeat)
"""The column-combined systolic array behind the UART host link."""

from codnn.hw.systolic import ColumnCombinedArray

from .array_soc import ArraySoc
from .protocol import EngineKind

__all__ = ["SystolicSoc"]


class SystolicSoc(ArraySoc):
    """``ArraySoc`` around a ``ColumnCombinedArray``: a weight row is ``cols`` cells of
    (``w``: weight_bits, ``sel``), a data vector ``cols x alpha`` values of data_bits.

    Parameters
    ----------
    rows, cols, alpha, weight_bits, data_bits, data_signed, acc_bits, mac
        The array's (``ColumnCombinedArray``); sizes and widths at most 255.
    depth, divisor, timeout_bytes, link
        As ``ArraySoc``.

    Raises
    ------
    TypeError, ValueError
        As ``ColumnCombinedArray`` and ``ArraySoc``.
    """

    def __init__(self, *, rows, cols, alpha=1, weight_bits=8, data_bits=8, data_signed=False,
                 acc_bits=32, mac="parallel", depth=64, divisor=104, timeout_bytes=2000,
                 link=None):
        array = ColumnCombinedArray(rows=rows, cols=cols, alpha=alpha, weight_bits=weight_bits,
                                    data_bits=data_bits, data_signed=data_signed,
                                    acc_bits=acc_bits, mac=mac)
        super().__init__(array, engine=EngineKind.SYSTOLIC, depth=depth, divisor=divisor,
                         timeout_bytes=timeout_bytes, link=link,
                         config={"alpha": alpha, "weight_bits": weight_bits,
                                 "data_bits": data_bits, "data_signed": data_signed,
                                 "bitserial": mac == "bitserial"})
