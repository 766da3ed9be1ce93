"""What a platform team expects of a CLI it runs every week, run as the installed `rackcert`.

Each test runs the real console script with stdout on a pipe (as in CI), so the
non-terminal behaviour is what is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.spec_helpers import LAB, R750

RACKCERT = [sys.executable, "-m", "rackcert.cli"]


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"COLUMNS": "80", "TERM": "dumb"}
    env.pop("RACKCERT_DEBUG", None)
    return subprocess.run(
        [*RACKCERT, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def test_version_names_the_components():
    proc = _run("--version")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names[:2] == ["python", "rackcert"]
    for component in ("pyvmomi", "ansible-core", "mitogen", "torch"):
        assert component in names


@pytest.mark.parametrize("command", [[], ["bench"], ["validate"], ["report"], ["configure"]])
def test_help_metavars_read_like_unix_tools(command):
    proc = _run(*command, "--help")
    assert proc.returncode == 0, proc.stderr
    for python_type in ("<bool>", "<str>", "<int>", "<path>", "<list[", "{spec_path}"):
        assert python_type not in proc.stdout, f"{python_type} in {command} --help"


def test_show_completion_for_bash():
    # typer guesses the shell from the parent process, which under pytest-xdist or a background
    # job is no shell at all; typer's own switch names the shell explicitly instead.
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    proc = subprocess.run(
        [*RACKCERT, "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "complete" in proc.stdout and "rackcert" in proc.stdout


def test_tables_are_plain_lines_off_a_terminal():
    proc = _run("spec", "check", str(R750))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert not any(ch in proc.stdout for ch in "│┃━─┏┡"), "box drawing off a terminal"
    # One line per host, whole: the VM list of a host is not wrapped onto a second line.
    hosts = [line for line in lines if line.startswith("esx0")]
    assert len(hosts) == 4
    assert all(line.count(" | ") == 5 for line in hosts)


def test_quiet_and_log_file(tmp_path):
    log = tmp_path / "logs" / "rackcert.log"
    proc = _run("-q", "--log-file", str(log), "spec", "check", str(LAB))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    text = log.read_text()
    assert "OK " in text and "lab-node1" in text
    assert "\x1b[" not in text
    # Errors still reach stderr under -q, and the log keeps them too.
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: rackcert/v1\nkind: Rack\nmetadata: {name: x}\n")
    proc = _run("-q", "--log-file", str(log), "spec", "check", str(bad))
    assert proc.returncode == 2
    assert "error:" in proc.stderr
    assert "error:" in log.read_text()


def test_validate_json_prints_the_record(tmp_path):
    proc = _run(
        "validate",
        str(LAB),
        "--local",
        "--check",
        "os.",
        "--no-facts",
        "--no-compare",
        "--json",
        "--runs-dir",
        str(tmp_path),
    )
    data = json.loads(proc.stdout)
    assert Path(data["run"]).is_dir()
    assert [r["id"] for r in data["data"]["results"]] == ["os.release"]
    record = json.loads((Path(data["run"]) / "validate.json").read_text())
    assert data["data"] == record["data"]
    assert data["data"]["compared_with"] is None  # --no-compare


def test_validate_list_needs_no_spec():
    proc = _run("validate", "--list")
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("gpu.count | error |") for line in proc.stdout.splitlines())
    proc = _run("validate")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: validate: give the rack spec")
