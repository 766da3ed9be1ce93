"""Help for pipes: plain text at full width when stdout is not a terminal.

Why: typer draws its help with rich, in boxes sized to the terminal; off a terminal rich
assumes 80 columns, so the boxes squeeze long option names to `--metrics-textfi…` and
`rackcert bench --help | grep metrics-textfile` finds nothing. git, kubectl, ansible and
pytest print plain help to a pipe; so does rackcert: click's own formatter (every option's
whole name at the start of its entry, no box characters), with each paragraph on one line
unless COLUMNS asks for a width. On a terminal nothing changes.
"""

from __future__ import annotations

import os
from typing import Any

# click wraps a paragraph at min(terminal width, max_content_width); a pipe has no width, so
# a paragraph stays on one line (grep finds an option with its whole help) unless the user
# sets COLUMNS, the variable every Unix tool reads for it.
UNWRAPPED = 10_000


def pipe_width(environ: dict[str, str] | None = None) -> int:
    """The width help is laid out at off a terminal: COLUMNS if it is a number, else unwrapped."""
    columns = (environ if environ is not None else os.environ).get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 40 else UNWRAPPED


def use_plain_help(command: Any, width: int) -> None:
    """Turn rich help off on `command` and every subcommand, and lay it out at `width`.

    typer picks rich or click formatting per command (`rich_markup_mode`; None is click's
    formatter), so every command of the tree gets it; the width is a context setting, which
    click passes from a group's context to its subcommands'.
    """
    settings = dict(getattr(command, "context_settings", None) or {})
    settings.update(terminal_width=width, max_content_width=width)
    command.context_settings = settings
    _plain(command)


def _plain(command: Any) -> None:
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None
    for sub in (getattr(command, "commands", None) or {}).values():
        _plain(sub)
