"""The column-combined systolic array (SPEC.md section 2)."""

from .array import ColumnCombinedArray

__all__ = ["ColumnCombinedArray"]
