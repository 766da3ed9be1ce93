"""The `rackcert` command: the only place where stages are wired together.

Each stage's commands live in a module of this package and register
themselves on `app`; `main` turns every RackcertError into one line and an
exit code, and any other exception into one line too (RACKCERT_DEBUG=1 shows
the traceback).
"""

from __future__ import annotations

import importlib
import os
import sys

import typer
from rich.markup import escape

from rackcert.cli.common import app, err_console
from rackcert.errors import RackcertError

__all__ = ["app", "main"]

# Command modules register on `app` when imported, in the order --help lists them.
COMMAND_MODULES = (
    "spec_cmds",
    "discover_cmds",
    "lab_cmds",
    "provision_cmds",
    "configure_cmds",
    "validate_cmds",
    "bench_cmds",
    "report_cmds",
    "bootstrap_cmds",
    "runs_cmds",
)
for _name in COMMAND_MODULES:
    importlib.import_module(f"rackcert.cli.{_name}")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting.
        code = app(args=argv, standalone_mode=False)
    except RackcertError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err_console.print("aborted", highlight=False)
        return 130
    except KeyboardInterrupt:
        err_console.print("interrupted; records written so far are intact", highlight=False)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("RACKCERT_DEBUG"):
            raise
        # Usage errors (typer vendors its own click, so match by shape, not by class).
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return code
        name = type(exc).__name__
        err_console.print(
            f"[bold red]internal error:[/] {name}: {escape(' '.join(str(exc).split()))}"
            " (set RACKCERT_DEBUG=1 for the traceback)",
            soft_wrap=True,
            highlight=False,
        )
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
