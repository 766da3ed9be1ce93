"""`--help` through a pipe: plain text, whole option names, no boxes; on a terminal, unchanged.

Every command and subcommand is found by walking the click command tree that `rackcert`
builds, so a new command is covered without editing this file. Each one runs as the real
console script would, in its own process with stdout on a pipe (what `| grep`, CI logs and
scripts see), and with COLUMNS unset: a pipe has no width.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

RACKCERT = [sys.executable, "-m", "rackcert.cli"]
BOX_CHARACTERS = set("╭╮╰╯│─┌┐└┘├┤━┃…")


def _command_tree() -> list[tuple[list[str], Any]]:
    import typer

    from rackcert.cli import app

    def walk(command: Any, path: list[str]):
        yield path, command
        for name, sub in (getattr(command, "commands", None) or {}).items():
            if not getattr(sub, "hidden", False):
                yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), []))


def _option_names(command: Any) -> list[str]:
    names = []
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option" or getattr(param, "hidden", False):
            continue
        names += [*param.opts, *param.secondary_opts]
    return names


def _piped_help(path: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "RACKCERT_DEBUG")}
    return subprocess.run(
        [*RACKCERT, *path, "--help"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_every_help_through_a_pipe_names_every_option_whole():
    tree = _command_tree()
    assert len(tree) > 20, "the command tree was not walked"
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(_piped_help, [path for path, _ in tree]))
    for (path, command), proc in zip(tree, runs, strict=True):
        where = " ".join(["rackcert", *path, "--help"])
        assert proc.returncode == 0, f"{where}: {proc.stderr}"
        out = proc.stdout
        assert out.startswith(f"Usage: {' '.join(['rackcert', *path])}"), f"{where}:\n{out}"
        boxes = BOX_CHARACTERS & set(out)
        assert not boxes, f"{where} draws {''.join(sorted(boxes))} off a terminal:\n{out}"
        for name in _option_names(command):
            # The whole name as a word of its own: `--compile-optim…` or `--metrics-textfi`
            # would not match `--compile-optimizer` or `--metrics-textfile`.
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", out), (
                f"{where}: {name} is not there whole:\n{out}"
            )
        for sub, subcommand in (getattr(command, "commands", None) or {}).items():
            if getattr(subcommand, "hidden", False):
                continue
            assert re.search(rf"^  {re.escape(sub)}\b", out, re.M), f"{where}: no {sub}"


def test_piped_help_keeps_each_option_on_a_greppable_line():
    """`rackcert bench --help | grep metrics-textfile` finds the option with its help."""
    proc = _piped_help(["bench"])
    lines = [line for line in proc.stdout.splitlines() if "--metrics-textfile" in line]
    assert len(lines) == 1, proc.stdout
    assert "Prometheus" in lines[0] and "node_exporter" in lines[0], lines[0]


def test_columns_sets_the_width_of_piped_help():
    env = {k: v for k, v in os.environ.items() if k != "RACKCERT_DEBUG"} | {"COLUMNS": "72"}
    proc = subprocess.run(
        [*RACKCERT, "bench", "--help"], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 72, proc.stdout
    assert "--metrics-textfile" in proc.stdout and not BOX_CHARACTERS & set(proc.stdout)


def _help_on_a_terminal(path: list[str], columns: int = 100) -> str:
    main_fd, sub_fd = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "RACKCERT_DEBUG"}
    env |= {"COLUMNS": str(columns), "TERM": "xterm"}
    try:
        proc = subprocess.Popen(
            [*RACKCERT, *path, "--help"],
            stdin=subprocess.DEVNULL,
            stdout=sub_fd,
            stderr=sub_fd,
            env=env,
        )
        os.close(sub_fd)
        chunks = []
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 0
    finally:
        os.close(main_fd)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("path", [["bench"], []])
def test_on_a_terminal_help_stays_rich(path):
    out = _help_on_a_terminal(path)
    assert "╭" in out and "Usage:" in out, out
