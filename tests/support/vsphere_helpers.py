"""Helpers for the vSphere tests: run the CLI in-process, read a twin with pyVmomi."""

from __future__ import annotations

import json
from typing import Any

from rackcert.cli import main


def cli(lab: Any, capsys: Any, *args: str) -> tuple[int, str, str]:
    """Run `rackcert ARGS --runs-dir <the lab's>`; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main([*args, "--runs-dir", str(lab.runs_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one error line the CLI printed (progress lines may precede it); no traceback."""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert err.strip().splitlines()[-1] == errors[0], err
    return errors[0]


def plan_json(lab: Any, capsys: Any) -> dict[str, Any]:
    code, out, err = cli(lab, capsys, "plan", str(lab.spec_path), "--json")
    assert code == 0, err
    return json.loads(out)


def last_record(lab: Any, stage: str) -> dict[str, Any]:
    paths = sorted(lab.runs_dir.glob(f"*/*/{stage}.json"))
    assert paths, f"no {stage}.json under {lab.runs_dir}"
    return json.loads(paths[-1].read_text())


def read_vms(lab: Any) -> dict[str, Any]:
    """Workload VM name -> (config, runtime.powerState), read with a separate pyVmomi session.

    vCLS agent VMs (config.managedBy, the twin deploys them like vCenter 7.0.3) are left out.
    """
    from pyVmomi import vim

    out = {}
    with lab.connect() as si:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.VirtualMachine], True
        )
        for vm in view.view:
            if vm.config.managedBy:
                continue
            if vm.config.template:
                continue  # a clone source, not a VM of the rack
            devices = vm.config.hardware.device
            out[vm.name] = {
                "disks_gb": [
                    d.capacityInKB // 1024**2
                    for d in devices
                    if isinstance(d, vim.vm.device.VirtualDisk)
                ],
                "nics": [
                    (type(d).__name__.rsplit(".", 1)[-1], d.backing.deviceName)
                    for d in devices
                    if isinstance(d, vim.vm.device.VirtualEthernetCard)
                ],
                "guest_ip": vm.guest.ipAddress,
                "firmware": vm.config.firmware,
                "locked": vm.config.memoryReservationLockedToMax,
                "extra": {o.key: str(o.value) for o in vm.config.extraConfig},
                "power": vm.runtime.powerState,
                "host": vm.runtime.host.name,
                "cpus": vm.config.hardware.numCPU,
                "passthrough": [
                    (
                        d.backing.id,
                        d.backing.vendorId & 0xFFFF,
                        int(d.backing.deviceId, 16),
                        d.backing.systemId,
                    )
                    for d in vm.config.hardware.device
                    if isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo)
                ],
            }
        view.DestroyView()
    return out


def read_hosts(lab: Any) -> dict[str, Any]:
    from pyVmomi import vim

    out = {}
    with lab.connect() as si:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        for host in view.view:
            try:
                ats = host.configManager.advancedOption.QueryOptions("VMkernel.Boot.atsSupport")
            except vim.fault.InvalidName:
                ats = [vim.option.OptionValue(value=None)]  # a build without the option
            out[host.name] = {
                "ats": ats[0].value,
                "active": sorted(
                    p.id
                    for p in host.configManager.pciPassthruSystem.pciPassthruInfo
                    if p.passthruActive
                ),
                "boot": host.runtime.bootTime,
                "maintenance": host.runtime.inMaintenanceMode,
                "uuid": host.hardware.systemInfo.uuid,
            }
        view.DestroyView()
    return out


def vm_named(si: Any, name: str) -> Any:
    """The twin's VirtualMachine called `name`, read through a container view as a client
    finds one (vSphere API: ViewManager.CreateContainerView)."""
    from pyVmomi import vim

    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    try:
        return next(v for v in view.view if v.name == name)
    finally:
        view.DestroyView()
