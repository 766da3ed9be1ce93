"""Installing the NVIDIA vGPU manager VIB from the spec's depot, as NVIDIA's vGPU guide does it.

Maintenance mode, `esxcli software vib install -d <bundle>`, reboot: the planner plans it
where host_software.vgpu_manager.depot names the bundle, the twin refuses as ESXi does (not
in maintenance mode, a bundle it cannot read), and after provision the host runs the manager
and the VMs their vGPUs.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.vgpu_manager_install import DEPOT, H2, HGX, MANAGER
from tests.support.vsphere_helpers import cli, plan_json

MANAGER_ID = f"NVD_bootbank_{MANAGER['name']}_{MANAGER['version']}"


def _host(si: Any, name: str) -> Any:
    from pyVmomi import vim

    from tests.support.twin_judges import find

    return find(si, vim.HostSystem, name)


def test_the_twin_refuses_the_install_as_esxi_does_then_loads_it_at_boot(rack_twin):
    from provision.apply import wait_task
    from provision.esxcli import EsxcliError, host_facts, vib_install
    from provision.hostboot import reboot_host

    lab = rack_twin(
        str(HGX), host_desc={H2: {"no_vgpu_manager": True}}, desc={"depots": [_depot()]}
    )
    with lab.connect() as si:
        host = _host(si, H2)
        assert host.config.sharedPassthruGpuTypes == []
        with pytest.raises(EsxcliError) as missing:
            vib_install(host, "/vmfs/volumes/datastore1/nothing.zip")
        assert str(missing.value).startswith(
            "[MetadataDownloadError] Could not download from depot at"
            " zip:/vmfs/volumes/datastore1/nothing.zip?index.xml, skipping"
        )
        with pytest.raises(EsxcliError) as outside:
            vib_install(host, DEPOT)
        assert str(outside.value) == (
            "[MaintenanceModeError] MaintenanceMode is required to remove: [];"
            f" install: [{MANAGER_ID}]. Please refer to the log file for more details."
        )
        wait_task(host.EnterMaintenanceMode_Task(timeout=60), "enter maintenance")
        done = vib_install(host, DEPOT)
        assert done.reboot_required and done.installed == [MANAGER_ID]
        facts, _ = host_facts(si, host._moId)
        assert facts.vgpu_manager() is not None  # listed at once ...
        assert host.config.sharedPassthruGpuTypes == []  # ... loaded at the next boot
        assert host.summary.rebootRequired
        again = vib_install(host, DEPOT)
        assert not again.reboot_required and again.skipped == [MANAGER_ID]
        reboot_host(host, H2, lambda t, what: wait_task(t, what), expect_active=[], timeout=120)
        assert "grid_h200x-141c" in host.config.sharedPassthruGpuTypes


def _depot() -> dict[str, Any]:
    return {"path": DEPOT, "vibs": [MANAGER | {"install_date": ""}]}


def test_provision_installs_the_manager_and_the_vms_run_their_vgpus(rack_twin, capsys, tmp_path):
    from pyVmomi import vim

    from provision.esxcli import host_facts
    from tests.support.twin_judges import find

    lab = rack_twin(
        str(HGX),
        host_desc={H2: {"no_vgpu_manager": True}},
        desc={"depots": [_depot()]},
        guests=True,
        edit=lambda d: d.setdefault("host_software", {"vgpu_manager": {"depot": DEPOT}}),
    )
    install = [a for a in plan_json(lab, capsys)["actions"] if a["kind"] == "host.vgpu_manager"]
    assert [(a["target"], a["blocked"]) for a in install] == [(H2, None)]
    code, out, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err + out
    assert plan_json(lab, capsys)["actions"] == []
    with lab.connect() as si:
        host = _host(si, H2)
        facts, _ = host_facts(si, host._moId)
        vib = facts.vgpu_manager()
        assert vib is not None and vib.version == MANAGER["version"]
        assert not host.runtime.inMaintenanceMode
        for vm in host.vm:
            if vm.config.managedBy or vm.config.template:
                continue
            assert vm.runtime.powerState == "poweredOn", vm.name
            assert find(si, vim.VirtualMachine, vm.name).config.deviceGroups.deviceGroup
