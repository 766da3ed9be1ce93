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
