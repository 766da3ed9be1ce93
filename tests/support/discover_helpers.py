"""Helpers for the `spec discover` tests: racks of N hosts, their twin, their Inventory.

The Inventory built here uses the twin's own device model (rackcert.lab.twin's
`host_description`), so the pure tests and the twin tests see the same PCI functions.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.observed import Inventory, ObservedHost, PciDevice
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import parse_spec
from rackcert.lab import twin
from tests.support.spec_helpers import LAB, R750, example_data

REPO = Path(__file__).resolve().parents[2]


def rack_data(hosts: int, base: Path = R750) -> dict[str, Any]:
    """The example's first profile on `hosts` hosts, no VMs (a freshly racked rack)."""
    data = example_data(base)
    data["hardware_profiles"] = data["hardware_profiles"][:1]
    profile = data["hardware_profiles"][0]["name"]
    data["hosts"] = [
        {
            "name": f"esx{i:02d}",
            "address": f"esx{i:02d}.example.internal",
            "profile": profile,
            "esxi_version": "7.0.3",
        }
        for i in range(1, hosts + 1)
    ]
    data["vm_templates"], data["vms"] = [], []
    return data


class _NoAliases(yaml.SafeDumper):
    """Shared objects written out each time: a spec may hold no anchors or aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def spec_of(data: dict[str, Any]) -> Spec:
    text = yaml.dump(data, Dumper=_NoAliases, sort_keys=False)
    return parse_spec(text, "<test spec>").spec


def observed_host(name: str, spec: Spec, host_index: int = 0) -> ObservedHost:
    host = spec.hosts[host_index]
    desc = twin.host_description(name, spec.profile(host.profile), host.esxi_version)
    devices = []
    for d in desc["pci"]:
        d = {k: v for k, v in d.items() if k != "numa"} | {"numa_node": d["numa"]}
        devices.append(PciDevice(**{**d, "parent_bridge": d["parent_bridge"] or None}))
    return ObservedHost(
        name=name,
        moid=f"host-{host_index}",
        address=name,
        vendor=desc["vendor"],
        model=desc["model"],
        esxi_version=desc["esxi_version"],
        numa_nodes=desc["numa_nodes"],
        pci_devices=devices,
        vgpu_types=desc["vgpu_types"],
    )


def inventory_of(spec: Spec) -> Inventory:
    """What discovery would report for the spec's hosts (named by their addresses)."""
    return Inventory(hosts=[observed_host(h.address, spec, i) for i, h in enumerate(spec.hosts)])


def edited(data: dict[str, Any], edit) -> dict[str, Any]:
    clone = copy.deepcopy(data)
    edit(clone)
    return clone


# -- the twin ---------------------------------------------------------------------------------
@contextmanager
def running_twin(
    spec: Spec, workdir: Path, vms: list[dict[str, Any]] | None = None
) -> Iterator[tuple[twin.Twin, twin.TwinFiles]]:
    """A twin of the spec's rack on a free loopback port, stopped afterwards."""
    files = twin.TwinFiles.in_dir(workdir)
    desc = twin.description_from_spec(spec, files, port=0, vms=vms)
    desc["tls"] = True
    started = twin.start(desc, files)
    try:
        yield started, files
    finally:
        started.stop()


def twin_args(started: twin.Twin, files: twin.TwinFiles, user: str) -> list[str]:
    """`spec discover` options that reach the twin (TLS verified against its certificate)."""
    return [
        "--vcenter",
        "127.0.0.1",
        "--port",
        str(started.port),
        "--user",
        user,
        "--password-file",
        str(files.password_file),
        "--ca-file",
        str(files.cert_file),
    ]


def rackcert(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, in a subprocess (exit codes and stderr as a user sees them)."""
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {}), "COLUMNS": "200"},
        timeout=120,
        check=False,
    )


def add_passthrough(started: twin.Twin, files: twin.TwinFiles, user: str, vm_gpus) -> None:
    """Give twin VMs fixed GPU passthrough devices, in the given order (as provision would)."""
    import ssl

    from pyVim.connect import Disconnect, SmartConnect
    from pyVmomi import vim

    ctx = ssl.create_default_context(cafile=str(files.cert_file))
    password = files.password_file.read_text().strip()
    si = SmartConnect(host="127.0.0.1", port=started.port, user=user, pwd=password, sslContext=ctx)
    try:
        view = si.content.viewManager.CreateContainerView(
            si.content.rootFolder, [vim.VirtualMachine], True
        )
        by_name = {vm.name: vm for vm in view.view}
        for name, gpus in vm_gpus.items():
            changes = []
            for index, pci in enumerate(gpus):
                backing = vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo(
                    id=pci, deviceId="20b5", systemId="twin", vendorId=0x10DE, deviceName="A100"
                )
                device = vim.vm.device.VirtualPCIPassthrough(key=-100 - index, backing=backing)
                changes.append(vim.vm.device.VirtualDeviceSpec(operation="add", device=device))
            task = by_name[name].ReconfigVM_Task(vim.vm.ConfigSpec(deviceChange=changes))
            deadline = time.monotonic() + 30
            while task.info.state not in ("success", "error") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert task.info.state == "success", task.info.error
    finally:
        Disconnect(si)


__all__ = ["LAB", "R750"]
