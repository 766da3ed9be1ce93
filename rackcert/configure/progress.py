"""Rich display of a configure run: a live host x task board, then a per-host summary.

Why here and not in the runner: the runner only produces events and results;
what a person sees is a separate concern, fed by the same `on_event` hook any
other consumer would use. Nothing here parses Ansible's stdout.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rackcert.configure.events import EventCollector
from rackcert.core.stage_records import ConfigureHost

_STYLE = {"ok": "green", "changed": "yellow", "failed": "bold red", "unreachable": "bold red"}


def _bar(done: int, total: int, width: int = 20) -> Text:
    total = max(total, done, 1)
    filled = int(width * done / total)
    return Text("█" * filled, style="cyan") + Text("░" * (width - filled), style="grey50")


def board(collector: EventCollector, expected: list[str]) -> Group:
    """The live view: one row per host with its counts, a bar and the task it is on."""
    head = Text.assemble(
        ("configure ", "bold"),
        (f"task {collector.tasks_started}", "cyan"),
        ("  ", ""),
        (collector.current_task or "starting ansible-playbook ...", "italic"),
    )
    table = Table(box=None, pad_edge=False, show_edge=False)
    for col, justify in (
        ("host", "left"),
        ("state", "left"),
        ("ok", "right"),
        ("changed", "right"),
        ("failed", "right"),
        ("tasks", "left"),
        ("current task", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    names = list(dict.fromkeys([*expected, *collector.hosts]))
    most = max((h.tasks_done for h in collector.hosts.values()), default=0)
    for name in names:
        h = collector.hosts.get(name) or ConfigureHost(name=name)
        state = h.status if (h.tasks_done or h.unreachable) else "waiting"
        table.add_row(
            name,
            Text(state, style=_STYLE.get(state, "grey50")),
            str(h.ok),
            str(h.changed),
            str(h.failed),
            _bar(h.tasks_done, most),
            Text(collector.current.get(name, "")[:60], style="grey70"),
        )
    return Group(head, table)


class LiveProgress:
    """Context manager: `with LiveProgress(console, hosts) as p: configure(..., on_event=p)`."""

    def __init__(self, console: Console, expected_hosts: list[str]) -> None:
        self._console = console
        self._expected = expected_hosts
        self._collector = EventCollector()
        self._live = Live(
            board(self._collector, expected_hosts),
            console=console,
            refresh_per_second=4,
            transient=True,
        )

    def __enter__(self) -> LiveProgress:
        if self._console.is_terminal:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._console.is_terminal:
            self._live.__exit__(*exc)

    def __call__(self, event: dict[str, Any], collector: EventCollector) -> None:
        self._collector = collector
        if self._console.is_terminal:
            self._live.update(board(collector, self._expected))
        elif event.get("event") == "playbook_on_task_start":
            # Plain logs (CI): one line per task, no cursor tricks.
            self._console.print(f"  task {collector.tasks_started}: {collector.current_task}")


def summary_table(hosts: list[ConfigureHost], *, check: bool) -> Table:
    """Per-host result: counts, status and the first failure (or, in check mode, the changes)."""
    title = "configure --check: what would change" if check else "configure: per-host result"
    table = Table(title=title, title_justify="left")
    for col in ("host", "status", "ok", "changed", "failed", "unreachable"):
        table.add_column(col, no_wrap=True)
    table.add_column("detail", overflow="fold", ratio=1)
    for h in hosts:
        if h.failures:
            f = h.failures[0]
            detail = f"{(f.role + ' : ') if f.role else ''}{f.task}: {f.message}"
            detail = detail if len(detail) <= 240 else detail[:237] + "..."
        elif check and h.changed_tasks:
            detail = "would change: " + "; ".join(h.changed_tasks)
        else:
            detail = ""
        table.add_row(
            h.name,
            Text(h.status, style=_STYLE.get(h.status, "")),
            str(h.ok),
            str(h.changed),
            str(h.failed),
            "yes" if h.unreachable else "no",
            detail,
        )
    return table
