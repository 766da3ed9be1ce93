"""`--help` through a pipe: plain text, whole option names, no boxes; on a terminal, unchanged.

Every command and subcommand is found by walking the click command tree that `rackcert`
builds, so a new command is covered without editing this file. Each one runs as the real
console script would (`rackcert.cli.main`, which decides plain or rich help per call), with
stdout on a pipe (what `| grep`, CI logs and scripts see) and COLUMNS unset: a pipe has no
width. All of them run in one interpreter, one after the other, each output framed by a
marker line: an interpreter per command cost a second of start-up each, for ~40 commands.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
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


MARK = "\x1e rackcert-help-sweep"

# One interpreter, every command's help in turn, each framed on stdout by MARK lines; the
# exit code goes in the closing frame.
SWEEP = f"""
import json, sys
from rackcert.cli import main
for path in json.loads(sys.argv[1]):
    print({MARK!r}, "begin", flush=True)
    code = main([*path, "--help"])
    sys.stdout.flush()
    print({MARK!r}, "end", code, flush=True)
"""


def _piped_helps(paths: list[list[str]]) -> list[tuple[int, str]]:
    """(exit code, stdout) of `rackcert PATH --help` for each path, from one process."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "RACKCERT_DEBUG")}
    proc = subprocess.run(
        [sys.executable, "-c", SWEEP, json.dumps(paths)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    frames = re.findall(rf"^{MARK} begin\n(.*?)^{MARK} end (-?\d+)\n", proc.stdout, re.M | re.S)
    assert len(frames) == len(paths), f"{len(frames)} of {len(paths)} helps:\n{proc.stderr}"
    return [(int(code), out) for out, code in frames]


@pytest.fixture(scope="module")
def piped() -> dict[tuple[str, ...], tuple[int, str]]:
    """Every command's piped help, by command path."""
    paths = [path for path, _ in _command_tree()]
    return {tuple(path): run for path, run in zip(paths, _piped_helps(paths), strict=True)}


def test_every_help_through_a_pipe_names_every_option_whole(piped):
    tree = _command_tree()
    assert len(tree) > 20, "the command tree was not walked"
    for path, command in tree:
        where = " ".join(["rackcert", *path, "--help"])
        code, out = piped[tuple(path)]
        assert code == 0, f"{where}: exit {code}:\n{out}"
        assert out.startswith(f"Usage: {' '.join(['rackcert', *path])}"), f"{where}:\n{out}"
        boxes = BOX_CHARACTERS & set(out)
        assert not boxes, f"{where} draws {''.join(sorted(boxes))} off a terminal:\n{out}"
        assert "<bool>" not in out, f"{where}: a flag shows click's <bool> metavar:\n{out}"
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


def test_piped_help_keeps_each_option_on_a_greppable_line(piped):
    """`rackcert bench --help | grep metrics-textfile` finds the option with its help."""
    _, out = piped[("bench",)]
    lines = [line for line in out.splitlines() if "--metrics-textfile" in line]
    assert len(lines) == 1, out
    assert "Prometheus" in lines[0] and "node_exporter" in lines[0], lines[0]


def test_the_sweep_frames_each_help_apart():
    """Two helps from one process come back as two, each its own command's."""
    (code1, bench), (code2, report) = _piped_helps([["bench"], ["report"]])
    assert (code1, code2) == (0, 0)
    assert bench.startswith("Usage: rackcert bench") and bench.count("Usage: rackcert") == 1
    assert report.startswith("Usage: rackcert report") and report.count("Usage: rackcert") == 1


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
