"""The test session owns its labs (rackcert.lab.lifetime), as a benchmark or the demo does.

Each pytest process (the controller and every xdist worker) runs inside `lifetime.owned`:

- at start, what runs whose owner is gone (a session killed outright, a crashed benchmark)
  is cleared, with one line on stderr naming the dead pid;
- SIGTERM, SIGINT and SIGHUP raise Terminated, a KeyboardInterrupt: pytest then tears down
  every fixture (the SSH hosts, the twins, the Slurm controllers) before it exits;
- at the end, whatever still carries this process's tag or pid is stopped too, so an
  interrupt that landed inside a teardown leaves nothing behind.
"""

from __future__ import annotations

import contextlib

import pytest

from rackcert.lab import lifetime

_STACK = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config: pytest.Config) -> None:
    stack = contextlib.ExitStack()
    stack.enter_context(lifetime.owned("pytest"))
    config.stash[_STACK] = stack


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(_STACK, None)
    if stack is not None:
        stack.close()
