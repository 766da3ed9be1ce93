"""How the CLI talks: tables on a terminal, plain lines in a log, a copy in --log-file.

Why: a platform team reads `rackcert` on a terminal and in CI logs. Rich renders tables
for an 80-column non-terminal by wrapping every cell over many lines, which makes a CI log
of a plan hundreds of lines long; off a terminal, each row prints as one plain line instead.
`--log-file` keeps a plain copy (no colour codes) of everything the command printed, and
`-q` / `-v` set how much that is, for every command at once.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table
from rich.text import Text

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class OutputSettings:
    """What the global flags asked for; commands read `verbosity` (configure passes it on)."""

    verbosity: int = 0
    quiet: bool = False
    log_file: Path | None = None


SETTINGS = OutputSettings()


class _Tee:
    """A console file that also appends a plain copy of what it writes to the log."""

    def __init__(self, stream: IO[str], log: IO[str]) -> None:
        self._stream = stream
        self._log = log

    def write(self, text: str) -> int:
        self._log.write(_ANSI_RE.sub("", text))
        self._log.flush()
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8")


def apply(consoles: dict[str, Console], *, verbosity: int, quiet: bool, log: Path | None) -> None:
    """Set the global output flags on the CLI's consoles (`{"out": ..., "err": ...}`)."""
    SETTINGS.verbosity, SETTINGS.quiet, SETTINGS.log_file = verbosity, quiet, log
    out, err = consoles["out"], consoles["err"]
    # Quiet silences the chatter on stdout (the log still gets it); errors always print.
    stdout: IO[str] = open(os.devnull, "w") if quiet else sys.stdout  # noqa: SIM115 - for the run
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = log.open("a", encoding="utf-8")
        out.file = _Tee(stdout, handle)  # type: ignore[assignment]
        err.file = _Tee(sys.stderr, handle)  # type: ignore[assignment]
    elif quiet:
        out.file = stdout


def _cell_text(cell: Any) -> str:
    try:
        text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
    except MarkupError:  # an unescaped untrusted cell: shown as it is, never a crash
        text = str(cell)
    return " ".join(text.split())


def table_lines(table: Table) -> list[str]:
    """The table as plain lines: its title, a header line, then one line per row."""
    columns = table.columns
    rows = [[_cell_text(c) for c in col._cells] for col in columns]  # noqa: SLF001 - rich API
    lines = [_cell_text(table.title)] if table.title else []
    if table.show_header:
        lines.append(" | ".join(_cell_text(col.header) for col in columns))
    for i in range(table.row_count):
        lines.append(" | ".join(col_rows[i] if i < len(col_rows) else "" for col_rows in rows))
    return lines


def show_table(console: Console, table: Table) -> None:
    """A rich table on a terminal; plain unwrapped lines anywhere else (CI logs, pipes)."""
    if console.is_terminal:
        console.print(table)
        return
    for line in table_lines(table):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
