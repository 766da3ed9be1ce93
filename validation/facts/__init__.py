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

from pyinfra.api import FactBase

from validation.facts.base import Fact, command_of, key_of

__all__ = ["Fact", "command_of", "key_of", "registry", "snapshot"]


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
