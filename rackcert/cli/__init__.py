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
        app(args=argv, standalone_mode=False)
    except RackcertError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", soft_wrap=True, highlight=False)
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
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        name = type(exc).__name__
        err_console.print(
            f"[bold red]internal error:[/] {name}: {' '.join(str(exc).split())}"
            " (set RACKCERT_DEBUG=1 for the traceback)",
            soft_wrap=True,
            highlight=False,
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
