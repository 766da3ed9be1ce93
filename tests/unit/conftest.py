"""The unit tier starts nothing: a test here that starts a process, opens a network namespace
or uses a socket fails, naming what it started (tests/support/unit_guard.py says what counts).

Why hooks and not an autouse fixture: the guard must already stand when the test's fixtures
are set up, and pytest sets up session and module fixtures (a twin, an SSH host) before any
function-scoped autouse fixture. Wrapping the setup, call and teardown of every test in this
folder covers them all, and applies to every test here without opting in. The failure is
raised after the phase too, so code that catches the guard's error (an `except Exception`
around a subprocess) still fails the test.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.support.unit_guard import HINT, guarded


def _guarded(item: pytest.Item, phase: str) -> Generator[None, object, object]:
    with guarded() as guard:
        try:
            result = yield
        except BaseException as exc:
            if guard.violations and not isinstance(exc, pytest.fail.Exception):
                raise pytest.fail.Exception(_message(phase, guard.violations)) from exc
            raise
    if guard.violations:
        pytest.fail(_message(phase, guard.violations), pytrace=False)
    return result


def _message(phase: str, violations: list[str]) -> str:
    return f"unit test {phase}: " + "; ".join(violations) + f" ({HINT})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """The session's last teardown also stops what integration tests started earlier in this
    process (their session fixtures: twins, SSH hosts), so that one runs unguarded."""
    if nextitem is None:
        return (yield)
    return (yield from _guarded(item, "teardown"))
