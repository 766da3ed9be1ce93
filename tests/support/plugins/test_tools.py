"""The test session waits for what set-up installs in the background: Horovod, test-only tools.

Why: `.ci/setup` installs what the demo needs first and the tools only the tests use (pyproject's
test-tools extra: ruff, mypy, hypothesis, ansible-lint, selenium; the judges' virtual
environments: clients nobody here wrote) after it, in the background, so a newcomer's demo never
waits for them; likewise Horovod (its source build, its install into .venv and into the lab
nodes' image), which the Horovod tests need. The README's test command is plain pytest, so the
wait happens here, once, at the session's start: it says what it waits for and for how long,
and stops the session with one line if that install failed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rackcert.lab.pids import pid_alive as _alive

LOG_DIR = Path(__file__).resolve().parents[3] / ".venv" / "log"
WAIT_LIMIT_S = 900.0


def background_state(log_dir: Path = LOG_DIR) -> tuple[str, int | None]:
    """('none' | 'running' | 'done' | 'failed', pid): set-up's background install."""
    pid_file, rc_file = log_dir / "test-tools.pid", log_dir / "test-tools.rc"
    if rc_file.is_file():
        rc = rc_file.read_text().strip()
        return ("done" if rc == "0" else "failed"), None
    if not pid_file.is_file():
        return "none", None
    try:
        pid = int(pid_file.read_text().strip())
    except ValueError:
        return "none", None
    return ("running" if _alive(pid) else "failed"), pid


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # xdist workers: the controller waited
        return
    state, pid = background_state()
    started = time.monotonic()
    if state == "running":
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        say = reporter.write_line if reporter else print
        say(
            "waiting for set-up's background steps: Horovod, test-only tools"
            f" (pid {pid}; {LOG_DIR / 'test-tools.log'})"
        )
        while state == "running" and time.monotonic() - started < WAIT_LIMIT_S:
            time.sleep(1.0)
            state, pid = background_state()
        say(f"set-up's background steps: {state} after {time.monotonic() - started:.0f} s")
    if state in ("failed", "running"):
        pytest.exit(
            f"set-up's background steps (Horovod, test-only tools) did not finish ({state}): see"
            f" {LOG_DIR / 'test-tools.log'}, then run .ci/setup again",
            returncode=1,
        )
