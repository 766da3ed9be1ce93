"""The base of rackcert's fact classes (validation.facts): pyinfra's FactBase plus a key."""

from __future__ import annotations

from typing import Any, ClassVar

from pyinfra.api import FactBase

from validation.expect import NodeExpect


class Fact(FactBase):
    """rackcert's additions to pyinfra's FactBase: a stable `key`, the command's arguments
    from a node's expectation, and an optional time limit of its own."""

    key: ClassVar[str] = ""
    tool: ClassVar[str | None] = None
    # stderr joins the output (a check shows the tool's own error); pyinfra's classes
    # process stdout only, as pyinfra runs them.
    stderr: ClassVar[bool] = True
    # True: the command only runs `uname`, `cat`, `ls` or `grep` on /proc and /etc, which no
    # driver, lock or daemon can hold up, so the probe script runs it in a subshell without
    # the time limit (`timeout` plus a second shell: two execs, about 4 ms of the node's CPU
    # a fact). Anything that reads /sys (a driver answers those) or runs a tool keeps it.
    quick: ClassVar[bool] = False

    def requires_command(self, *args: Any, **kwargs: Any) -> str | None:
        return self.tool

    @classmethod
    def args(cls, expect: NodeExpect) -> tuple[Any, ...]:
        """Arguments for `command`, from what the node must be (none for most facts)."""
        return ()

    @classmethod
    def timeout_s(cls, expect: NodeExpect) -> int | None:
        """This fact's own limit in seconds; None: the probe script's common one."""
        return None


def key_of(cls: type[FactBase]) -> str:
    """A fact class's key (pyinfra's own classes get theirs from the wrappers in `system`)."""
    key = getattr(cls, "key", "")
    if not key:
        raise ValueError(f"fact class {cls.__name__} has no key")
    return key


def command_of(cls: type[FactBase], expect: NodeExpect) -> str:
    """The shell command of a fact for one node."""
    fact = cls()
    args = cls.args(expect) if issubclass(cls, Fact) else ()
    raw = fact.command(*args)
    return raw if isinstance(raw, str) else raw.get_raw_value()
