"""Installing the NVIDIA vGPU manager VIB from the spec's depot, as NVIDIA's vGPU guide does it.

Maintenance mode, `esxcli software vib install -d <bundle>`, reboot: the planner plans it
where host_software.vgpu_manager.depot names the bundle, the twin refuses as ESXi does (not
in maintenance mode, a bundle it cannot read), and after provision the host runs the manager
and the VMs their vGPUs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from provision.planner import plan
from rackcert.core.errors import SpecError
from rackcert.core.observed import EsxcliHost, EsxcliVib
from rackcert.core.paths import inventories_dir
from rackcert.core.spec_loader import load_spec
from tests.discover_helpers import inventory_of, spec_of
from tests.spec_helpers import example_data, write_spec
from tests.vsphere_helpers import cli, plan_json

HGX = inventories_dir() / "hgx-h200-4node.yaml"
H2 = "hgx02.example.internal"
DEPOT = (
    "/vmfs/volumes/datastore1/NVD-AIE-800_ESXi_8.0.0_Driver_550.127.06-1OEM.800.1.0.20613240.zip"
)
# What NVIDIA's vGPU 17.4 bundle for ESXi 8.0 holds (hostsoftware.go cites the release notes).
MANAGER = {
    "name": "NVD-AIE-800_ESXi_8.0.0_Driver",
    "version": "550.127.06-1OEM.800.1.0.20613240",
    "vendor": "NVD",
    "acceptance_level": "VMwareAccepted",
}
MANAGER_ID = f"NVD_bootbank_{MANAGER['name']}_{MANAGER['version']}"


def _data(depot: str | None = DEPOT) -> dict[str, Any]:
    data = example_data(HGX)
    for tmpl in data["vm_templates"]:
        tmpl["source"] = None  # the pure planner tests: no template to find
    if depot:
        data["host_software"] = {"vgpu_manager": {"depot": depot}}
    return data


def _plan_without_manager(esxcli: EsxcliHost | None = None, *, reboot_pending: bool = False):
    spec = spec_of(_data())
    inventory = inventory_of(spec)
    host = inventory.hosts[1]
    # Provisioned but for the manager: ATS on, devices in passthrough, Shared Direct.
    host.ats_enabled = host.ats_runtime = True
    host.graphics_type = "sharedDirect"
    for dev in host.pci_devices:
        dev.passthru_enabled = dev.passthru_active = dev.passthru_capable
    host.vgpu_types, host.esxcli, host.reboot_required = [], esxcli, reboot_pending
    return [a for a in plan(spec, inventory) if a.host == H2 and a.kind.startswith("host.")]


@pytest.mark.unit
def test_a_named_depot_plans_the_install_then_a_reboot():
    actions = _plan_without_manager()
    assert [a.kind for a in actions] == ["host.vgpu_manager", "host.reboot"]
    install = actions[0]
    assert install.blocked is None and install.params["depot"] == DEPOT
    assert install.change.endswith(f"install the NVIDIA vGPU manager from {DEPOT}")
    assert actions[1].reason == "the NVIDIA vGPU manager VIB: in effect only after a reboot"


@pytest.mark.unit
def test_an_installed_manager_waiting_for_its_boot_plans_only_the_reboot():
    vib = EsxcliVib(name=MANAGER["name"], version=MANAGER["version"], vendor="NVD")
    answered = EsxcliHost(answered=True, vibs=[vib])
    actions = _plan_without_manager(answered, reboot_pending=True)
    assert [a.kind for a in actions] == ["host.reboot"]
    # Running it, and still no profile: nothing to install, a finding to look into.
    actions = _plan_without_manager(answered, reboot_pending=False)
    assert actions[0].kind == "host.vgpu_manager"
    assert actions[0].blocked is not None
    assert actions[0].blocked.startswith(f"the host runs {MANAGER['name']} {MANAGER['version']}")


@pytest.mark.unit
@pytest.mark.parametrize("depot", ["NVD-AIE.zip", "/vmfs/volumes/ds/driver.vib", "ftp://x/y.zip"])
def test_a_depot_esxcli_cannot_read_is_one_line_with_where(tmp_path, depot):
    path = write_spec(tmp_path, _data(depot))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert "\n" not in message
    assert re.match(rf"^{re.escape(str(path))}:\d+: host_software\.vgpu_manager\.depot: ", message)
    assert "absolute .zip path on the host (/vmfs/volumes/...) or a depot URL" in message


def _host(si: Any, name: str) -> Any:
    from pyVmomi import vim

    from tests.twin_judges import find

    return find(si, vim.HostSystem, name)


@pytest.mark.integration
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


@pytest.mark.integration
def test_provision_installs_the_manager_and_the_vms_run_their_vgpus(rack_twin, capsys, tmp_path):
    from pyVmomi import vim

    from provision.esxcli import host_facts
    from tests.twin_judges import find

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
