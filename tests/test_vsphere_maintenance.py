"""vCLS agent VMs and maintenance mode as vCenter 7.0.3 runs them."""

from __future__ import annotations

import time

import pytest

from provision.apply import ApplyError, Timeouts, apply
from provision.discovery import discover
from provision.planner import plan
from tests.vsphere_helpers import cli, error_line, last_record, plan_json, read_hosts

LAB = "inventories/lab.yaml"


def _agents(lab) -> dict[str, tuple[str, str]]:
    """vCLS VM name -> (host, power state), read with pyVmomi."""
    from pyVmomi import vim

    with lab.connect() as si:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.VirtualMachine], True
        )
        out = {
            vm.name: (vm.runtime.host.name, str(vm.runtime.powerState))
            for vm in view.view
            if vm.config.managedBy and vm.config.managedBy.extensionKey == "com.vmware.vim.eam"
        }
        view.DestroyView()
    return out


def test_vcls_agents_are_not_workload_and_are_left_alone(rack_twin, capsys):
    lab = rack_twin(LAB)
    agents = _agents(lab)
    assert len(agents) == 2 and all(n.startswith("vCLS-") for n in agents)
    assert {p for _, p in agents.values()} == {"poweredOn"}
    data = plan_json(lab, capsys)
    assert sorted(a["name"] for a in data["left_alone"]) == sorted(agents)
    assert not any(a["needs_power_cycle"] for a in data["actions"])
    hosts = [a for a in data["actions"] if a["kind"].startswith("host.")]
    assert hosts and all(a["params"]["powered_on_vms"] == [] for a in hosts)
    code, out, _ = cli(lab, capsys, "plan", str(lab.spec_path))
    assert code == 0 and "left alone: 2 VM(s) vCenter extensions manage (com.vmware.vim.eam)" in out

    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes", "--power-cycle")
    assert code == 0, err
    record = last_record(lab, "provision")
    assert record["status"] == "ok" and not record["data"]["skipped"]
    # maintenance mode took them off; vCenter's agent manager runs them again after
    assert {p for _, p in _agents(lab).values()} == {"poweredOn"}
    assert plan_json(lab, capsys)["actions"] == []


def test_an_operators_maintenance_mode_stays(rack_twin, capsys):
    host = "lab-esx01.lab.internal"
    lab = rack_twin(LAB, host_desc={host: {"maintenance": True}})
    # --no-power-on: a host in maintenance mode runs no new VM (checked at the end)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes", "--no-power-on")
    assert code == 0, err
    hosts = read_hosts(lab)
    assert hosts[host]["maintenance"] is True
    assert not any(h["maintenance"] for name, h in hosts.items() if name != host)
    done = last_record(lab, "provision")["data"]["done"]
    notes = [a["result"] for a in done if a["target"] == host]
    assert notes and all("left in maintenance mode" in n and "operator" in n for n in notes)
    assert not any("maintenance" in a["result"] for a in done if a["target"] != host)
    # ESXi powers no VM on in maintenance mode: provision stops with its message
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1
    assert f"{host} is in maintenance mode (powering on lab-node1)" in error_line(err)
    assert read_hosts(lab)[host]["maintenance"] is True


def test_maintenance_mode_is_bounded_when_a_vm_cannot_move(rack_twin):
    # A VM powered on after the plan was made: vCenter waits for it until the timeout.
    vm = {"name": "late", "host": "lab-esx01.lab.internal", "cpus": 2, "memory_mb": 2048}
    lab = rack_twin(LAB, vms=[vm])
    with lab.connect() as si:
        actions = plan(lab.spec, discover(si))
        from pyVmomi import vim

        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.VirtualMachine], True
        )
        late = next(v for v in view.view if v.name == "late")
        late.PowerOnVM_Task()
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(ApplyError) as exc:
            apply(si, actions, timeouts=Timeouts(maintenance=1))
        assert time.monotonic() - started < 30
    assert "enter maintenance mode failed: Operation timed out" in str(exc.value)
    assert "late" in str(exc.value)
    assert read_hosts(lab)["lab-esx01.lab.internal"]["maintenance"] is False
