"""vCLS agent VMs and maintenance mode as vCenter 7.0.3 runs them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from provision.apply import ApplyError, Timeouts, apply
from provision.discovery import discover
from provision.planner import plan
from tests.support.vsphere_helpers import cli, error_line, last_record, plan_json, read_hosts

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
    lab = rack_twin(LAB, guests=True)
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
    # vCenter deploys no VM onto a host in maintenance mode: provision does the host work,
    # leaves the operator's maintenance mode as it found it, and stops at the first clone
    # onto that host with vCenter's message.
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1
    assert f"{host} is in maintenance mode (deploying lab-node1)" in error_line(err)
    hosts = read_hosts(lab)
    assert hosts[host]["maintenance"] is True
    assert not any(h["maintenance"] for name, h in hosts.items() if name != host)
    record = last_record(lab, "provision")
    done = record["data"]["done"]
    notes = [a["result"] for a in done if a["target"] == host]
    assert notes and all("left in maintenance mode" in n and "operator" in n for n in notes)
    assert not any("maintenance" in a["result"] for a in done if a["target"] != host)
    assert not any(a["target"] == "lab-node1" for a in done)


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


def test_no_vm_is_deployed_or_moved_onto_a_host_in_maintenance_mode(rack_twin):
    """vCenter refuses CloneVM_Task, CreateVM_Task and RelocateVM_Task onto a host in
    maintenance mode with InvalidHostState naming the host ("The operation is not allowed in
    the current state of the host"); the same calls onto a host out of it go ahead."""
    from pyVmomi import vim

    from tests.support.twin_judges import find, task_fault

    down, up = "lab-esx01.lab.internal", "lab-esx02.lab.internal"
    parked = {"name": "parked", "host": down, "cpus": 2, "memory_mb": 2048}
    lab = rack_twin(LAB, vms=[parked], host_desc={down: {"maintenance": True}})
    with lab.connect() as si:
        template = next(v for v in _all(si, vim.VirtualMachine) if v.config and v.config.template)
        folder = template.parent
        hosts = {h: find(si, vim.HostSystem, h) for h in (down, up)}
        datastore = next(d for d in hosts[down].datastore if d.name == "lab-ds")

        def clone(name: str, host: Any) -> Any:
            spec = vim.vm.CloneSpec(
                location=vim.vm.RelocateSpec(
                    host=host, pool=host.parent.resourcePool, datastore=datastore
                ),
                powerOn=False,
                template=False,
            )
            return task_fault(template.CloneVM_Task(folder=folder, name=name, spec=spec))

        def create(name: str, host: Any) -> Any:
            config = vim.vm.ConfigSpec(
                name=name,
                guestId="ubuntu64Guest",
                numCPUs=1,
                memoryMB=1024,
                files=vim.vm.FileInfo(vmPathName="[lab-ds]"),
            )
            return task_fault(
                folder.CreateVM_Task(config=config, pool=host.parent.resourcePool, host=host)
            )

        for fault in (clone("deployed", hosts[down]), create("created", hosts[down])):
            assert isinstance(fault, vim.fault.InvalidHostState), fault
            assert fault.host._moId == hosts[down]._moId
            assert "not allowed in the current state of the host" in fault.msg
        names = {v.name for v in _all(si, vim.VirtualMachine)}
        assert not names & {"deployed", "created"}  # nothing half made

        assert clone("deployed", hosts[up]) is None
        assert create("created", hosts[up]) is None
        vm = find(si, vim.VirtualMachine, "created")
        relocate = vim.vm.RelocateSpec(host=hosts[down], pool=hosts[down].parent.resourcePool)
        fault = task_fault(vm.RelocateVM_Task(spec=relocate))
        assert isinstance(fault, vim.fault.InvalidHostState), fault
        assert vm.runtime.host.name == up

        # Nor does a VM already there power on, by either path (govc vm.power -on [-M]).
        vm = find(si, vim.VirtualMachine, "parked")
        fault = task_fault(vm.PowerOnVM_Task())
        assert isinstance(fault, vim.fault.InvalidHostState), fault
        task = folder.parent.PowerOnMultiVM_Task(vm=[vm])
        assert task_fault(task) is None
        (info,) = task.info.result.notAttempted
        assert isinstance(info.fault, vim.fault.InvalidHostState), info.fault
        assert vm.runtime.powerState == "poweredOff"


def _all(si: Any, kind: Any) -> list[Any]:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    try:
        return list(view.view)
    finally:
        view.DestroyView()
