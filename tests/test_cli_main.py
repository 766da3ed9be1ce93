"""The console entry point: exit codes pass through, and nothing prints a traceback."""

from __future__ import annotations

import subprocess
import sys

import typer

from rackcert.cli import main
from rackcert.cli.common import app
from rackcert.core.errors import RackcertError


@app.command("zz-test-exit", hidden=True)
def _exit_with(code: int) -> None:
    raise typer.Exit(code)


@app.command("zz-test-crash", hidden=True)
def _crash() -> None:
    raise KeyError("boom")


@app.command("zz-test-error", hidden=True)
def _error() -> None:
    raise RackcertError("host esx01: thing went wrong\n  on two lines", exit_code=4)


def test_typer_exit_code_is_returned():
    assert main(["zz-test-exit", "3"]) == 3
    assert main(["zz-test-exit", "0"]) == 0


def test_rackcert_error_is_one_line_with_its_code(capsys):
    assert main(["zz-test-error"]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: host esx01: thing went wrong on two lines"]


def test_unexpected_exception_is_one_line(capsys):
    assert main(["zz-test-crash"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error: KeyError" in err


def test_usage_error_exits_2(capsys):
    assert main(["runs", "list", "--no-such-flag"]) == 2


def test_every_command_has_help():
    """Each command listed in --help answers --help itself (nothing listed is a stub)."""
    out = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    from rackcert.cli.common import app as real_app

    group = typer.main.get_group(real_app)
    names = [n for n, c in group.commands.items() if not getattr(c, "hidden", False)]
    assert {"plan", "provision", "configure", "validate", "bench", "report", "bootstrap"} <= set(
        names
    )
    for name in names:
        sub = group.commands[name]
        leaves = [[name, s] for s in sub.commands] if hasattr(sub, "commands") else [[name]]
        for leaf in leaves:
            assert main([*leaf, "--help"]) == 0, leaf


@app.command("zz-test-markup", hidden=True)
def _markup() -> None:
    raise RackcertError("thumbprint AB:AB:CD:cd [bold]x[/bold] differs")


def test_error_text_prints_verbatim(capsys):
    assert main(["zz-test-markup"]) == 1
    assert "thumbprint AB:AB:CD:cd [bold]x[/bold] differs" in capsys.readouterr().err
