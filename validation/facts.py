"""The facts snapshot the report keeps (facts.json), gathered by pyinfra in one parallel pass.

Facts are not judged here: they are what the nodes were (OS, kernel, packages
and versions, kernel modules, sysctl, mounts, NICs, GPUs) when validate ran, so
that `rackcert report diff` can say what changed after an upgrade. pyinfra
connects to every node at once (gevent) and asks each fact of all nodes in
parallel. Run as a separate process by the runner (pyinfra brings gevent, kept
out of the CLI's process):

    python -m validation.facts JOB.json OUT.json

Three facts are rackcert's own, in pyinfra's shape (a command, a pure
`process`, `requires_command`): `NvidiaGpus`, `NetInterfaces`, `LoadedModules`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
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
        "mounts": server.Mounts,
        "deb_packages": deb.DebPackages,
        "rpm_packages": rpm.RpmPackages,
        "nics": NetInterfaces,
        "gpus": NvidiaGpus,
        "nic_firmware": NicFirmware,
    }


def _host_data(
    target: dict[str, Any], known_hosts: str, strict: str = "yes"
) -> tuple[str, dict[str, Any]]:
    spec = target["hostspec"]
    if spec.startswith("local://"):
        return "@local", {}
    rest = spec.split("://", 1)[1]
    user, _, hostport = rest.rpartition("@")
    host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "22")
    data: dict[str, Any] = {
        "ssh_hostname": host,
        "ssh_port": int(port or 22),
        "ssh_user": user or "root",
        "ssh_known_hosts_file": known_hosts,
        "ssh_strict_host_key_checking": strict,
        "ssh_look_for_keys": False,
        "ssh_allow_agent": False,
    }
    if target.get("identity_file"):
        data["ssh_key"] = target["identity_file"]
    return target["expect"]["node"], data


def collect(targets: list[dict[str, Any]], known_hosts: str, strict: str = "yes") -> dict[str, Any]:
    """Facts of every target, by node name; a node that fails has an `error` instead."""
    from pyinfra.api import Config, Inventory, State
    from pyinfra.api.connect import connect_all
    from pyinfra.api.facts import get_facts

    start = time.monotonic()
    hosts = [_host_data(t, known_hosts, strict) for t in targets]
    names = {name: t["expect"]["node"] for (name, _), t in zip(hosts, targets, strict=True)}
    inventory = Inventory(([(n, d) for n, d in hosts], {}))
    state = State(inventory, Config(CONNECT_TIMEOUT=5, FAIL_PERCENT=100))
    connect_all(state)
    nodes: dict[str, Any] = {
        names[h.name]: {"error": "could not connect (pyinfra)"}
        for h in inventory
        if not h.connected
    }
    for key, cls in _fact_classes().items():
        try:
            # A fact whose command fails on one node (no /proc/modules, a broken driver)
            # must not take that node out of the remaining facts: keep its default.
            values = get_facts(state, cls, apply_failed_hosts=False)
        except Exception as exc:  # noqa: BLE001 - one bad fact must not lose the others
            for h in inventory:
                if h.connected:
                    nodes.setdefault(names[h.name], {}).setdefault("fact_errors", {})[key] = str(
                        exc
                    )
            continue
        for h, value in values.items():
            nodes.setdefault(names[h.name], {})[key] = _jsonable(value)
    return {"collector": "pyinfra", "seconds": round(time.monotonic() - start, 3), "nodes": nodes}


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


def main(argv: list[str]) -> int:
    job_path, out_path = Path(argv[0]), Path(argv[1])
    job = json.loads(job_path.read_text())
    known_hosts = job.get("known_hosts") or str(out_path.parent / "facts_known_hosts")
    strict = "yes" if job.get("known_hosts") else "accept-new"
    try:
        data = collect(job["targets"], known_hosts, strict)
    except Exception as exc:  # noqa: BLE001 - facts are evidence, not a verdict: record why not
        data = {"collector": "pyinfra", "error": f"{type(exc).__name__}: {exc}", "nodes": {}}
    from rackcert.runs import atomic_write_json

    atomic_write_json(out_path, data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
