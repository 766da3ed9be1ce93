"""What a unit test may not do: start a process, open a network namespace, or use a socket.

Why: tests/unit/ is the tier a newcomer runs first and CI runs on every push; it is quick
and needs no root only as long as nothing in it starts anything. A test that starts a
process (the twin, ansible-playbook, a Gloo rank, `ip netns add`) belongs in
tests/integration/, and this guard says so at the first such call instead of letting the
tier slow down one test at a time.

`guarded()` replaces, for as long as it is entered, every door the standard library has to a
new process or a socket:

- processes: `subprocess.Popen` (so `run`, `check_output`, asyncio's subprocesses and
  `os.popen`), `os.fork`, `os.forkpty`, `os.posix_spawn(p)`, `os.system`, and
  `_posixsubprocess.fork_exec` (multiprocessing's spawn and forkserver start through it;
  its fork start goes through `os.fork`);
- network namespaces: `ip netns add` and `unshare`/`nsenter` are processes (above);
  `os.unshare` and `os.setns`, where this Python has them, are guarded too;
- sockets: `connect`, `connect_ex`, `bind` and `sendto` of every `socket.socket`. A
  `socket.socketpair()` is not guarded: it is an anonymous AF_UNIX pair inside this process
  (no address, nothing another process can reach), and asyncio's event loop opens one for
  its self-pipe whenever a loop is made, so guarding it would forbid any asyncio code.

Two libraries look something up through a process once, as part of their own set-up, and
that is let through (ALLOWED, checked by the caller's module, not by the test): matplotlib
asks `fc-list` for the machine's fonts when it builds its font cache (once per machine), and
`ctypes.util.find_library` asks `ldconfig -p` for the linker's cache (torch's import does).
Neither is the test starting something, and neither can be avoided short of not importing them.

A guarded call raises `UnitGuardError` naming what was started, and records it: code under
test that catches the error (an `except Exception` around a subprocess) still fails the test,
because the caller checks `Guard.violations` after the test.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HINT = "a unit test starts nothing: move it to tests/integration/"

# (the module that makes the call, the program it starts): a library's own look-up, see above.
ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {("matplotlib.font_manager", "fc-list"), ("ctypes.util", "ldconfig")}
)


class UnitGuardError(RuntimeError):
    """A unit test started a process, opened a namespace or used a socket."""


@dataclass
class Guard:
    """What the guarded code tried, in order, one line each."""

    violations: list[str] = field(default_factory=list)

    def refuse(self, what: str) -> UnitGuardError:
        self.violations.append(what)
        return UnitGuardError(f"{what}: {HINT}")


def _argv(args: Any) -> str:
    if isinstance(args, (str, bytes)):
        return os.fsdecode(args)
    try:
        return " ".join(os.fsdecode(a) for a in args)
    except TypeError:
        return repr(args)


def _allowed(args: Any) -> bool:
    """Whether a library on ALLOWED, somewhere up the stack, starts the program it may."""
    argv = os.fsdecode(args).split() if isinstance(args, (str, bytes)) else list(args)
    if not argv:
        return False
    program = Path(os.fsdecode(argv[0])).name
    frame = sys._getframe(1)
    while frame is not None:
        if (frame.f_globals.get("__name__", ""), program) in ALLOWED:
            return True
        frame = frame.f_back
    return False


def _address(args: tuple[Any, ...]) -> str:
    return repr(args[0]) if args else "?"


def _detail(label: str, args: tuple[Any, ...]) -> str:
    """The program, where the call names one: posix_spawn's path, system's command line."""
    if label.startswith("os.posix_spawn") and args:
        return _argv(args[1]) if len(args) > 1 else os.fsdecode(args[0])
    if label == "os.system" and args:
        return str(args[0])
    return ""


@contextlib.contextmanager
def guarded() -> Iterator[Guard]:
    """Every door to a process or a socket refuses while entered (see the module's doc)."""
    guard = Guard()
    saved: list[tuple[Any, str, Any]] = []

    def replace(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        saved.append((owner, name, original))
        setattr(owner, name, make(original))

    def popen(original: Any) -> Any:
        def _execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any) -> None:
            if _allowed(args):
                return original(self, args, *rest)  # type: ignore[no-any-return]
            what = "namespace" if "netns" in _argv(args) else "process"
            raise guard.refuse(f"started a {what}: subprocess.Popen({_argv(args)!r})")

        return _execute_child

    def process_call(label: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise guard.refuse(f"started a process: {label}({_detail(label, args)})")

            return refuse

        return make

    def namespace_call(label: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise guard.refuse(f"opened a namespace: {label}{args!r}")

            return refuse

        return make

    def socket_call(label: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def refuse(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
                family = getattr(self.family, "name", self.family)
                raise guard.refuse(f"opened a socket: {family} {label}({_address(args)})")

            return refuse

        return make

    replace(subprocess.Popen, "_execute_child", popen)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        replace(os, name, process_call(f"os.{name}"))
    replace(_posixsubprocess, "fork_exec", process_call("_posixsubprocess.fork_exec"))
    for name in ("unshare", "setns"):
        replace(os, name, namespace_call(f"os.{name}"))
    for name in ("connect", "connect_ex", "bind", "sendto"):
        replace(socket.socket, name, socket_call(name))
    try:
        yield guard
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)
