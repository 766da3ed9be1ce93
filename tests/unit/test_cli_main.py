"""The console entry point: exit codes pass through, and nothing prints a traceback."""

from __future__ import annotations

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


@app.command("zz-test-markup", hidden=True)
def _markup() -> None:
    raise RackcertError("thumbprint AB:AB:CD:cd [bold]x[/bold] differs")


def test_error_text_prints_verbatim(capsys):
    assert main(["zz-test-markup"]) == 1
    assert "thumbprint AB:AB:CD:cd [bold]x[/bold] differs" in capsys.readouterr().err
