"""The unit tier's guard fails a test that starts a process, opens a namespace or a socket.

The cases run as one small test file through pytest in this process (pytester's in-process
run, which itself starts nothing), with the unit conftest's hooks; each case's outcome and
message are read from that run. One run for all: an inner session costs seconds to start.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.unit_guard import guarded

CONFTEST = """
from tests.unit.conftest import (
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)
"""

CASES = """
import asyncio, json, multiprocessing, os, socket, subprocess
import pytest

def test_process():
    subprocess.run(["true"])

def test_namespace():
    subprocess.run(["ip", "netns", "add", "x"])

def test_caught():
    try:
        subprocess.check_output(["uname"])
    except Exception:
        pass

def test_fork():
    os.fork()

def test_spawn():
    multiprocessing.get_context("spawn").Process(target=print).start()

def test_bind():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))

def test_connect():
    socket.create_connection(("127.0.0.1", 9), timeout=1)

@pytest.fixture(scope="session")
def server():
    return subprocess.Popen(["sleep", "60"])

def test_fixture(server):
    pass

def test_clean_with_asyncio():
    assert asyncio.run(asyncio.sleep(0, result=json.dumps([1]))) == "[1]"
"""

# case -> (the phase that fails, what its failure must name)
REFUSED = {
    "test_process": ("call", "started a process: subprocess.Popen('true')"),
    "test_namespace": ("call", "started a namespace: subprocess.Popen('ip netns add x')"),
    "test_caught": ("call", "started a process: subprocess.Popen('uname')"),
    "test_fork": ("call", "started a process: os.fork()"),
    "test_spawn": ("call", "started a process: _posixsubprocess.fork_exec()"),
    "test_bind": ("call", "opened a socket: AF_INET bind(('127.0.0.1', 0))"),
    "test_connect": ("call", "opened a socket: AF_INET connect(('127.0.0.1', 9))"),
    "test_fixture": ("setup", "started a process: subprocess.Popen('sleep 60')"),
}


def test_each_way_of_starting_something_fails_and_is_named(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=CASES)
    recorder = pytester.inline_run("-p", "no:cacheprovider")
    failed = {
        r.nodeid.split("::")[-1]: (r.when, r.longreprtext)
        for r in recorder.getreports("pytest_runtest_logreport")
        if r.failed
    }
    assert sorted(failed) == sorted(REFUSED)  # test_clean_with_asyncio passed
    for case, (when, named) in REFUSED.items():
        assert failed[case][0] == when, case
        assert f"unit test {when}: {named}" in failed[case][1], failed[case][1]
        assert "move it to tests/integration/" in failed[case][1]


def test_the_guard_is_gone_after_the_block() -> None:
    original = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    with guarded() as guard:
        assert subprocess.Popen._execute_child is not original  # type: ignore[attr-defined]
    assert subprocess.Popen._execute_child is original  # type: ignore[attr-defined]
    assert guard.violations == []
