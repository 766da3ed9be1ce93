"""The console entry point: exit codes pass through, and nothing prints a traceback."""

from __future__ import annotations

import subprocess
import sys

import typer

from rackcert.cli import main


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


# What building the app must not import (issue 55: the suite starts the CLI a few hundred
# times): the benchmark units (through `bench` and `bootstrap`, rackcert.cli.deferred), the
# run records and the spec models. A command imports them when it runs.
HEAVY = ("validation.bench.units", "rackcert.core.stage_records", "rackcert.core.spec", "pydantic")
PROBE = """
import contextlib, io, sys
from rackcert.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(code, *[m for m in {heavy!r} if m in sys.modules])
"""


def _loaded_after(*args: str) -> list[str]:
    probe = PROBE.format(heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_top_level_help_imports_no_command_s_dependencies():
    assert _loaded_after("--help") == ["0"]


def test_a_deferred_command_builds_its_options_on_first_use():
    """bench --help names each benchmark's own option (validation.bench.units, read then)."""
    loaded = _loaded_after("bench", "--help")
    assert loaded[0] == "0" and "validation.bench.units" in loaded
    shown = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "bench", "--help"], capture_output=True, text=True
    )
    assert "--skip TEXT" in shown.stdout and "allreduce,resnet" in shown.stdout, shown.stdout
