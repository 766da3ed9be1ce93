"""The facts snapshot the report keeps (facts.json), from the same SSH session as the checks.

Facts are not judged here: they are what the nodes were (OS, kernel, packages
and versions, kernel modules, sysctl, mounts, NICs, GPUs) when validate ran, so
that `rackcert report diff` can say what changed after an upgrade.

Why no pyinfra connection: validate used to reach every node twice, once for the
check probes (testinfra) and once more for these facts (pyinfra's own SSH, with a
second known_hosts file). Now each fact's command is one more probe in the node's
probe script (validation.probes, `fact_probes()`), and `build_facts` turns the
answers into facts.json with pyinfra's own fact classes: their `command`, their
`requires_command` (a missing tool gives the fact's default, as in pyinfra) and
their pure `process(output)`. One authenticated SSH session per node, one trust.

Three facts are rackcert's own, in pyinfra's shape (a command, a pure
`process`, `requires_command`): `NvidiaGpus`, `NetInterfaces`, `LoadedModules`.

    >>> script = build_script([*probes, *fact_probes()], expect)
    >>> build_facts({"node1": split_output(host.run(script).stdout)}, {}, seconds=1.2)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyinfra.api import FactBase

GPU_FIELDS = "index,pci.bus_id,name,uuid,serial,vbios_version,driver_version,memory.total"


class NvidiaGpus(FactBase):
    """GPU inventory from nvidia-smi: one dict per GPU (index, bus id, name, serial, vbios...)."""

    def requires_command(self, *args: Any, **kwargs: Any) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return f"nvidia-smi --query-gpu={GPU_FIELDS} --format=csv,nounits"

    @staticmethod
    def default() -> list[dict[str, str | None]]:
        return []

    def process(self, output: list[str]) -> list[dict[str, str | None]]:
        from validation.parsers import ParseError, gpu_query_csv

        try:
            return gpu_query_csv("\n".join(output))
        except ParseError:  # the driver does not answer: gpu.* checks say why
            return []


class NetInterfaces(FactBase):
    """NICs from /sys/class/net: name -> mtu, MAC, state, speed (Mb/s), driver, PCI address."""

    def command(self) -> str:
        return (
            'for d in /sys/class/net/*; do n=${d##*/}; printf "%s|%s|%s|%s|%s|%s\\n" "$n"'
            ' "$(cat $d/mtu 2>/dev/null)" "$(cat $d/address 2>/dev/null)"'
            ' "$(cat $d/operstate 2>/dev/null)" "$(cat $d/speed 2>/dev/null)"'
            ' "$(basename "$(readlink $d/device/driver 2>/dev/null)" 2>/dev/null)'
            ' $(basename "$(readlink $d/device 2>/dev/null)" 2>/dev/null)"; done'
        )

    @staticmethod
    def default() -> dict[str, dict[str, str]]:
        return {}

    def process(self, output: list[str]) -> dict[str, dict[str, str]]:
        out = {}
        for line in output:
            parts = line.split("|")
            if len(parts) == 6:
                name, mtu, mac, state, speed, dev = parts
                driver, _, pci = dev.partition(" ")
                out[name] = {
                    "mtu": mtu,
                    "mac": mac,
                    "state": state,
                    "speed_mbps": speed,
                    "driver": driver,
                    "pci": pci,
                }
        return out


class LoadedModules(FactBase):
    """Kernel modules from /proc/modules: name -> size, use count, state.

    pyinfra's own server.KernelModules parses the use count as an int and fails on the
    H200 machine's kernel, which prints '-' there (module unloading not built in).
    """

    def command(self) -> str:
        return "cat /proc/modules 2>/dev/null || true"

    @staticmethod
    def default() -> dict[str, dict[str, str]]:
        return {}

    def process(self, output: list[str]) -> dict[str, dict[str, str]]:
        out = {}
        for line in output:
            parts = line.split()
            if len(parts) >= 5:
                out[parts[0]] = {"size": parts[1], "used": parts[2], "state": parts[4]}
        return out


def _linux_mounts() -> type[FactBase]:
    from pyinfra.facts import server

    class LinuxMounts(server.Mounts):
        """pyinfra's Mounts on Linux. Its `command` asks pyinfra's host context for the
        kernel first (FreeBSD and OpenBSD read mounts otherwise); the nodes are Linux, so
        the command is Linux's and `process` parses /proc/self/mountinfo."""

        def command(self) -> str:
            self._kernel = "Linux"
            return "cat /proc/self/mountinfo"

        def process(self, output: list[str]) -> Any:
            self._kernel = "Linux"
            return super().process(output)

    return LinuxMounts


def _fact_classes() -> dict[str, type[FactBase]]:
    from pyinfra.facts import deb, rpm, server

    from validation.nic_firmware import NicFirmware

    return {
        "hostname": server.Hostname,
        "os": server.LinuxDistribution,
        "kernel": server.KernelVersion,
        "arch": server.Arch,
        "kernel_modules": LoadedModules,
        "sysctl": server.Sysctl,
        "mounts": _linux_mounts(),
        "deb_packages": deb.DebPackages,
        "rpm_packages": rpm.RpmPackages,
        "nics": NetInterfaces,
        "gpus": NvidiaGpus,
        "nic_firmware": NicFirmware,
    }


PREFIX = "fact."


def fact_probes() -> list[Any]:
    """One probe per fact (named `fact.<key>`): the fact's command, stdout only (pyinfra
    processes stdout), guarded by its `requires_command`."""
    from validation.probes import Probe

    probes = []
    for key, cls in _fact_classes().items():
        fact = cls()
        raw = fact.command()
        command = raw if isinstance(raw, str) else raw.get_raw_value()
        text = f"( {command}\n) 2>/dev/null"
        probes.append(Probe(PREFIX + key, _fixed_command(text), fact.requires_command()))
    return probes


def _fixed_command(text: str) -> Callable[[Any], str]:
    """A probe command that ignores the expectation: a fact's command is the same for every node."""
    return lambda _expect: text


def _value(cls: type[FactBase], out: Any) -> Any:
    """As pyinfra's get_facts: a missing tool, a failed command or no output is the fact's
    default; otherwise `process` over the output lines."""
    fact = cls()
    fact.command()  # some facts keep state from their command for `process` (Mounts)
    if out is None or not out.ok or not out.text:
        return fact.default()
    return fact.process(out.text.splitlines())


def build_facts(
    outputs: dict[str, dict[str, Any]], errors: dict[str, str], *, seconds: float
) -> dict[str, Any]:
    """facts.json: every reached node's facts from its probe outputs; an unreached node has
    an `error` (why it could not be reached); a fact that cannot be parsed is kept out
    under `fact_errors` and the others stay."""
    nodes: dict[str, Any] = {node: {"error": why} for node, why in errors.items()}
    classes = _fact_classes()
    for node, got in outputs.items():
        facts: dict[str, Any] = {}
        for key, cls in classes.items():
            try:
                facts[key] = _jsonable(_value(cls, got.get(PREFIX + key)))
            except Exception as exc:  # noqa: BLE001 - one bad fact must not lose the others
                facts.setdefault("fact_errors", {})[key] = f"{type(exc).__name__}: {exc}"
        nodes[node] = facts
    return {"collector": "validate probe script, pyinfra facts", "seconds": seconds, "nodes": nodes}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
