"""Rendering reports: rich tables for people, JSON for programs."""

import json
import sys

from rich.console import Console
from rich.table import Table

__all__ = ["console", "err_console", "print_json", "print_record", "print_rows"]

# Rich wraps to 80 columns when not writing to a terminal; logs and pipes get 120.
console = Console(width=None if sys.stdout.isatty() else 120)
#: Progress and errors go to stderr so that ``--json`` output stays clean.
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)


def print_json(value):
    print(json.dumps(value, indent=2, default=str))


def _cell(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return "-" if value is None else str(value)


def print_record(title, record):
    """Print one report as a two-column table (field, value)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in record.items():
        table.add_row(key, _cell(value))
    console.print(table)


def print_rows(title, rows, columns):
    """Print rows (dicts) as a table with the given columns (key, heading) pairs."""
    table = Table(title=title, title_justify="left")
    for _, heading in columns:
        table.add_column(heading)
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key, _ in columns))
    console.print(table)
