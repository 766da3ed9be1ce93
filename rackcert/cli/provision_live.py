"""provision's progress: a live per-host and per-VM table on a terminal, plain lines off it.

Why: with hosts and VMs in parallel, one progress bar says nothing about which host is
rebooting and which VM is still cloning. On a terminal, a rich Live table has one row per
host and per VM: its current step, the task's progress, elapsed time and an estimate of
the time left (from the progress so far). Off a terminal (a CI log, a pipe) each step that
starts, ends or is skipped is one plain line. Node and vCenter strings are untrusted:
they go into the table as plain text, markup off, cut to a length.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

_PERCENT = re.compile(r"(\d{1,3})%\s*$")
CELL = 60  # characters of a node/vCenter string shown in a cell


@dataclass
class Row:
    """One host or VM: its current step, its progress and when it began."""

    name: str
    kind: str  # "host" or "vm"
    step: str = "waiting"
    state: str = "pending"
    percent: int | None = None
    began: float = field(default_factory=time.monotonic)
    step_began: float = field(default_factory=time.monotonic)
    ended: float | None = None

    def eta(self, now: float) -> str:
        if self.ended is not None or not self.percent:
            return ""
        spent = now - self.step_began
        return f"{spent * (100 - self.percent) / self.percent:.0f} s"


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= CELL else text[: CELL - 1] + "…"


class ProvisionProgress:
    """Receives apply's events (kind, action, detail) and shows them; a context manager."""

    def __init__(self, console: Console, *, quiet: bool) -> None:
        self.console = console
        self.quiet = quiet
        self.live_mode = console.is_terminal and not quiet
        self.rows: dict[tuple[str, str], Row] = {}
        self.live: Live | None = None

    def expect(self, total: int) -> None:
        """The plan is known (kept for the caller's interface; rows appear as steps start)."""
        return None

    def __enter__(self) -> ProvisionProgress:
        if self.live_mode:
            self.live = Live(
                self.table(), console=self.console, refresh_per_second=4, transient=True
            )
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.console.print(self.table(), emoji=False, markup=False, highlight=False)

    def row(self, action: Any) -> Row:
        kind = "vm" if action.kind.startswith("vm.") else "host"
        name = action.target if kind == "vm" else action.host or action.target
        key = (kind, name)
        if key not in self.rows:
            self.rows[key] = Row(name=name, kind=kind)
        return self.rows[key]

    def event(self, kind: str, action: Any, detail: str) -> None:
        if action is None:
            return
        row = self.row(action)
        now = time.monotonic()
        if kind == "start":
            row.step, row.state, row.percent, row.step_began = action.kind, "running", 0, now
            row.ended = None
        elif kind == "progress":
            found = _PERCENT.search(detail or "")
            if found:
                row.percent = min(100, int(found.group(1)))
        elif kind == "done":
            row.state, row.percent, row.ended = "done", 100, now
        elif kind == "skipped":
            row.state, row.ended = "skipped", now
        if kind in ("start", "done", "skipped"):
            self.line(kind, action, detail)
        if self.live is not None:
            self.live.update(self.table())

    def line(self, kind: str, action: Any, detail: str) -> None:
        """Off a terminal: one plain line per step that starts, ends or is skipped."""
        if self.quiet or self.live_mode:
            return
        if kind == "start":
            text = f"start {action.target}: {action.kind}"
        elif kind == "done":
            text = f"done {action.target}: {action.change}"
        else:
            text = f"skipped ({detail}) {action.target}: {action.change}"
        self.console.print(Text(" ".join(text.split())), emoji=False, highlight=False)

    def table(self) -> Table:
        now = time.monotonic()
        table = Table(title="provision", expand=False)
        for column in ("host / VM", "step", "state", "progress", "elapsed", "left"):
            table.add_column(column)
        for row in self.rows.values():
            end = row.ended if row.ended is not None else now
            table.add_row(
                Text(_cut(("  " if row.kind == "vm" else "") + row.name)),
                Text(row.step),
                Text(row.state),
                Text(f"{row.percent}%" if row.percent is not None else ""),
                Text(f"{end - row.began:.0f} s"),
                Text(row.eta(now)),
            )
        return table
