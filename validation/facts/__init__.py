"""What a node is asked, one class per observation, in pyinfra's FactBase shape.

A fact class holds everything about one observation of a node: its shell
`command` (taking arguments where the node's expectation shapes it: `args`),
the tool it needs (`requires_command`: when the tool is not on the node's PATH
the probe script says so instead of running it), and a pure `process(lines)`
that turns the output into a typed value (the parsing itself lives in
`validation.parsers`, tested on captured H200 output). Its `key` names it
everywhere: in the probe script's markers, in `NodeView.fact`, and in
facts.json, which records exactly the facts a validate run gathered.

Checks declare the fact classes they read (`@check("gpu.driver",
facts=(GpuQuery,))`); the suite gathers the union of those (plus the
report's snapshot, `SNAPSHOT`, unless `--no-facts`) in ONE script over ONE SSH
session per node (validation.probes), and each output is parsed once.

Adding an observation means one class here (a `key`, a `command`, a pure
`process`, `requires_command` if it needs a tool) and one parser with a test
on captured output.

    >>> GpuQuery().process(captured_csv.splitlines())[0]["name"]
    'NVIDIA H200'
"""

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


def registry() -> dict[str, type[FactBase]]:
    """Every fact class rackcert knows, by key."""
    from validation.facts import container, gpu, net, peers, system

    out: dict[str, type[FactBase]] = {}
    for module in (system, gpu, net, container, peers):
        for cls in module.FACTS:
            key = key_of(cls)
            if key in out:
                raise ValueError(f"two fact classes share the key {key}")
            out[key] = cls
    return out


def snapshot() -> tuple[type[FactBase], ...]:
    """The facts the report keeps beyond what the checks read (versions, packages, firmware:
    what `rackcert report diff` compares after an upgrade). `validate --no-facts` leaves
    them out."""
    from validation.facts import gpu, net, system

    return (
        system.Hostname,
        system.KernelVersion,
        system.Arch,
        system.LinuxDistribution,
        system.LoadedModules,
        system.Sysctl,
        system.Mounts,
        system.DebPackages,
        system.RpmPackages,
        net.NetInterfaces,
        net.NicFirmware,
        gpu.GpuQuery,
    )
