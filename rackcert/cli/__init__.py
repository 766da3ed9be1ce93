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
from typer import _click as click
from typer.core import TyperArgument, TyperOption

from rackcert.cli.common import app, err_console
from rackcert.cli.deferred import DeferredCommand
from rackcert.cli.plainhelp import pipe_width, use_plain_help
from rackcert.core.errors import RackcertError

__all__ = ["app", "main"]

# Command modules register on `app` when imported, in the order --help lists them.
COMMAND_MODULES = (
    "spec_cmds",
    "discover_cmds",
    "lab_cmds",
    "lab_link_cmds",
    "provision_cmds",
    "rehearse_cmds",
    "configure_cmds",
    "validate_cmds",
    "bench_cmds",
    "burnin_cmds",
    "slurm_cmds",
    "upgrade_cmds",
    "report_cmds",
    "bootstrap_cmds",
    "runs_cmds",
)
for _name in COMMAND_MODULES:
    importlib.import_module(f"rackcert.cli.{_name}")


_CLICK_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN"}


def _classic_metavar(param: TyperOption | TyperArgument, ctx: click.Context) -> str:
    label = param.display_type(ctx).strip("<>")
    if label.startswith("list["):
        return "LIST"
    if "|" in label:  # a choice: show the choices, as click does
        return f"[{label}]"
    return _CLICK_NAMES.get(label, label.upper())


def _param_metavars(params: list[click.Parameter], ctx: click.Context) -> None:
    for param in params:
        if isinstance(param, TyperOption) and param.metavar is None:
            flag = param.is_flag or param.count
            param.metavar = "" if flag else _classic_metavar(param, ctx)
        elif isinstance(param, TyperArgument):
            metavar = _classic_metavar(param, ctx)
            param.display_type_rich = lambda ctx=None, m=metavar: m  # type: ignore[method-assign,misc]
            usage = (param.name or "arg").upper() + ("..." if param.nargs != 1 else "")
            usage = usage if param.required else f"[{usage}]"
            param._usage_display_name = lambda u=usage: u  # type: ignore[method-assign,misc]


def _click_metavars(command: click.Command, ctx: click.Context) -> click.Command:
    """Name option values the way click and every Unix tool do (TEXT, INTEGER, PATH, LIST).

    Why: typer 0.29 shows Python annotations (`<bool>`, `<list[str]>`) as metavars, and a
    flag gets one although it takes no value. Set once on the built command tree; on a
    deferred command (rackcert.cli.deferred), once its parameters are built.
    """
    if isinstance(command, DeferredCommand):
        command.after_build(lambda built: _param_metavars(built.params, ctx))
    else:
        _param_metavars(command.params, ctx)
    make_help = command.get_help_option

    def help_option(help_ctx: click.Context, make=make_help):  # built per call, so wrap it
        option = make(help_ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option  # type: ignore[method-assign,assignment]
    for sub in getattr(command, "commands", {}).values():
        _click_metavars(sub, ctx)
    return command


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting.
        command = typer.main.get_command(app)
        _click_metavars(command, click.Context(command))
        if not sys.stdout.isatty():  # a pipe, a file, CI: plain help at full width
            use_plain_help(command, pipe_width())
        code = command.main(args=argv, prog_name="rackcert", standalone_mode=False)
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
