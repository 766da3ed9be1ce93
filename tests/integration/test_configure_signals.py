"""configure keeps a lab owner's answer to SIGTERM (rackcert.configure.runner.runner_signals).

ansible-runner, given no cancel callback, installs its own SIGTERM/SIGINT handlers and never
puts the old ones back: `rackcert demo` signalled during configure exited 1 (a canceled
playbook) instead of 143, and ignored SIGTERM after configure. Real ansible-runner runs here,
against localhost (connection local), no mocks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import ansible_runner

from rackcert.configure.runner import runner_signals
from rackcert.core.paths import REPO_ROOT

PLAY = """\
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.command: {command}
"""


def _run_play(tmp_path: Path, command: str) -> str:
    (tmp_path / "project").mkdir(exist_ok=True)
    (tmp_path / "project" / "play.yml").write_text(PLAY.format(command=command))
    with runner_signals() as cancel_callback:
        runner = ansible_runner.interface.init_runner(
            private_data_dir=str(tmp_path),
            playbook="play.yml",
            quiet=True,
            cancel_callback=cancel_callback,
            # ansible-playbook beside this interpreter (.venv/bin), as configure finds it.
            envvars={"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"},
        )
        runner.run()
    return str(runner.status)


def test_a_handler_of_our_own_stays_in_charge(tmp_path):
    def ours(signum, frame):  # pragma: no cover - never called here
        raise AssertionError

    before = signal.signal(signal.SIGTERM, ours)
    try:
        assert _run_play(tmp_path, "/bin/true") == "successful"
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, before)


def test_without_one_ansible_runners_handler_is_removed_afterwards(tmp_path):
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sigint = signal.getsignal(signal.SIGINT)
    try:
        assert _run_play(tmp_path, "/bin/true") == "successful"
        # ansible-runner's handler (it would have swallowed every later SIGTERM) is gone.
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is sigint
    finally:
        signal.signal(signal.SIGTERM, before)


OWNED_PLAY = textwrap.dedent(
    """\
    import sys
    from pathlib import Path
    from rackcert.lab import lifetime
    sys.path.insert(0, sys.argv[2])
    from tests.integration.test_configure_signals import _run_play

    def main():
        print("status", _run_play(Path(sys.argv[1]), "sleep 120"), flush=True)
        return 0

    sys.exit(lifetime.run_main("configure-signal-test", main))
    """
)


def _tagged(owner: int) -> list[int]:
    from rackcert.lab.lifetime import tagged_processes

    return [pid for pid, tag in tagged_processes().items() if tag == str(owner)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # ended meanwhile
        return b""


def test_sigterm_during_a_playbook_ends_the_owner_with_143_and_stops_ansible(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RACKCERT_LAB_OWNER"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    log = tmp_path / "out.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", OWNED_PLAY, str(tmp_path), str(REPO_ROOT)],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        # The playbook's `sleep 120` runs: the signal arrives in the middle of the play.
        while not any(_cmdline(p).startswith(b"sleep\x00120") for p in _tagged(proc.pid)):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the play never started: {log.read_text()}"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 128 + signal.SIGTERM, text
    assert "stopped by SIGTERM" in text
    assert "status" not in text  # the play was not reported as having ended on its own
    time.sleep(0.5)
    assert _tagged(proc.pid) == [], "ansible-playbook or its task outlived the signal"
