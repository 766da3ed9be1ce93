"""Less common paths: vGPU VMs, a slow vCenter, provision without --yes."""

from __future__ import annotations

from pathlib import Path

import yaml

from rackcert.core.paths import REPO_ROOT
from tests.support.vsphere_helpers import cli, error_line, plan_json, read_hosts, read_vms


def _vgpu_spec(tmp_path: Path) -> Path:
    data = yaml.safe_load((REPO_ROOT / "inventories" / "lab.yaml").read_text())
    data["vm_templates"][0].update(gpu_mode="vgpu", vgpu_profile="grid_a100d-40c")
    path = tmp_path / "lab-vgpu.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_vgpu_vms_get_vmiop_backings_and_no_passthrough(rack_twin, tmp_path, capsys):
    lab = rack_twin(_vgpu_spec(tmp_path), guests=True)
    actions = plan_json(lab, capsys)["actions"]
    assert "host.passthrough" not in [a["kind"] for a in actions]
    graphics = [a for a in actions if a["kind"] == "host.graphics"]
    assert [a["change"] for a in graphics] == ["default graphics type shared -> sharedDirect"] * 2
    create = next(a for a in actions if (a["target"], a["kind"]) == ("lab-node1", "vm.customize"))
    extra = create["params"]["desired"]["extra_config"]
    assert "pciPassthru.64bitMMIOSizeGB" not in extra
    assert extra["pciPassthru0.cfg.enable_uvm"] == "0"
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err

    from pyVmomi import vim

    with lab.connect() as si:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.VirtualMachine], True
        )
        vm = next(v for v in view.view if v.name == "lab-node1")
        backings = [
            d.backing.vgpu
            for d in vm.config.hardware.device
            if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        ]
    assert backings == ["grid_a100d-40c", "grid_a100d-40c"]
    # ESXi powered them on: the hosts run Shared Direct since their reboot
    assert {v["power"] for v in read_vms(lab).values()} == {"poweredOn"}
    assert read_vms(lab)["lab-node1"]["extra"]["pciPassthru.allowP2P"] == "true"
    assert plan_json(lab, capsys)["actions"] == []


def test_slow_vcenter_still_completes(rack_twin, capsys):
    lab = rack_twin(
        "inventories/lab.yaml",
        faults={"slow": [{"method": "RebootHost_Task", "ms": 400}]},
        guests=True,
    )
    before = read_hosts(lab)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    after = read_hosts(lab)
    assert all(after[h]["boot"] > before[h]["boot"] for h in after)


def test_provision_without_yes_and_without_a_terminal_changes_nothing(rack_twin, capsys):
    lab = rack_twin("inventories/lab.yaml")
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path))
    assert code == 2
    assert "pass --yes" in error_line(err)
    assert all(h["ats"] is False for h in read_hosts(lab).values())
    assert read_vms(lab) == {}


def test_spec_device_missing_on_host_is_one_line_and_recorded(rack_twin, capsys):
    lab = rack_twin("inventories/lab.yaml")
    text = lab.spec_path.read_text().replace("0000:31:00.0", "0000:32:00.0")
    moved = lab.spec_path.with_name("moved-gpu.yaml")
    moved.write_text(text)
    code, _, err = cli(lab, capsys, "plan", str(moved))
    assert code == 2
    line = error_line(err)
    assert "has no PCI device 0000:32:00.0" in line and "lab-esx01.lab.internal" in line
    record = next(lab.runs_dir.glob("lab/*/plan.json")).read_text()
    assert '"status": "failed"' in record and "0000:32:00.0" in record


def test_twin_refuses_like_esxi_under_powered_on_vms(rack_twin):
    """The twin itself enforces the rules apply relies on (not only rackcert's planner)."""
    from pyVmomi import vim

    from provision.apply import ApplyError, wait_task

    running = {
        "name": "busy",
        "host": "lab-esx01.lab.internal",
        "power_on": True,
        "cpus": 2,
        "memory_mb": 2048,
    }
    lab = rack_twin("inventories/lab.yaml", vms=[running])
    with lab.connect() as si:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        host = next(h for h in view.view if h.name == "lab-esx01.lab.internal")
        vm = next(v for v in host.vm if v.name == "busy")  # the host also holds a template
        for task, words in (
            # vCenter waits for a VM that cannot move until the timeout (0 would be forever)
            (host.EnterMaintenanceMode_Task(timeout=1), "Operation timed out"),
            (host.RebootHost_Task(force=True), "cannot be rebooted"),
        ):
            try:
                wait_task(task, "step")
            except ApplyError as exc:
                assert words in str(exc)
            else:
                raise AssertionError("the twin allowed it")
        spec = vim.vm.ConfigSpec(firmware="efi")
        try:
            wait_task(vm.ReconfigVM_Task(spec=spec), "reconfigure")
        except ApplyError as exc:
            assert "powered on" in str(exc)
        else:
            raise AssertionError("firmware changed on a running VM")
        other = next(h for h in view.view if h.name == "lab-esx02.lab.internal")
        try:
            wait_task(other.RebootHost_Task(force=False), "reboot")
        except ApplyError as exc:
            assert "not in maintenance mode" in str(exc)
        else:
            raise AssertionError("rebooted outside maintenance mode")
