"""The column-combined systolic array (docs/semantics.md section 2)."""

from .array import ColumnCombinedArray

__all__ = ["ColumnCombinedArray"]
