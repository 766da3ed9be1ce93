"""Power-on as ESXi checks it: passthrough backings, one VM per device, full reservation."""

from __future__ import annotations

import pytest

from tests.support.vsphere_helpers import cli, last_record, read_vms
from tests.support.vsphere_poweron import HOST
from tests.support.vsphere_poweron import find as _find
from tests.support.vsphere_poweron import make_intruder as _intruder

LAB = "inventories/lab.yaml"


def test_provision_powers_created_vms_on_and_no_power_on_opts_out(rack_twin, capsys):
    lab = rack_twin(LAB)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes", "--no-power-on")
    assert code == 0, err
    assert {v["power"] for v in read_vms(lab).values()} == {"poweredOff"}

    lab = rack_twin(LAB, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    assert {v["power"] for v in read_vms(lab).values()} == {"poweredOn"}


def test_twin_refuses_power_on_like_esxi(rack_twin, capsys):
    from pyVmomi import vim

    from provision.vsphere_ops import ApplyError, power_on_vm, wait_task

    lab = rack_twin(LAB, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    with lab.connect() as si:
        host = _find(si, vim.HostSystem, HOST)
        env = host.parent.environmentBrowser.QueryConfigTarget(host=host)
        system_id = next(p.systemId for p in env.pciPassthrough if p.pciDevice.id == "0000:17:00.0")
        assert system_id != host.hardware.systemInfo.uuid
        cases = [
            (dict(system_id=system_id), "already in use by virtual machine lab-node1"),
            (dict(system_id=host.hardware.systemInfo.uuid), "is not host"),
            (dict(system_id=system_id, locked=False), "memory reservation (sched.mem.min)"),
        ]
        for i, (kwargs, words) in enumerate(cases):
            if i == 2:  # the GPU is free again: only the reservation is wrong
                wait_task(_find(si, vim.VirtualMachine, "lab-node1").PowerOffVM_Task(), "off")
            vm = _intruder(si, **kwargs)
            with pytest.raises(ApplyError) as exc:
                power_on_vm(vm, "intruder")
            assert words in str(exc.value)
            wait_task(vm.Destroy_Task(), "destroy intruder")


def test_a_vm_whose_device_another_vm_holds_is_left_off_and_says_why(rack_twin, capsys):
    """ESXi would refuse the power-on (test_twin_refuses_power_on_like_esxi): provision sees
    the running holder first and leaves the VM off instead of asking."""
    from pyVmomi import vim

    from provision.apply import wait_task

    lab = rack_twin(LAB, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes", "--no-power-on")
    assert code == 0, err
    with lab.connect() as si:
        host = _find(si, vim.HostSystem, HOST)
        env = host.parent.environmentBrowser.QueryConfigTarget(host=host)
        system_id = next(p.systemId for p in env.pciPassthrough if p.pciDevice.id == "0000:17:00.0")
        intruder = _intruder(si, system_id)
        wait_task(intruder.PowerOnVM_Task(), "power on intruder")  # lab-node1 is off: allowed
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    record = last_record(lab, "provision")
    powered = [a["target"] for a in record["data"]["actions"] if a["kind"] == "vm.power_on"]
    assert powered == ["lab-node2"]  # never asked ESXi to power on a second holder
    vms = read_vms(lab)
    assert (vms["lab-node1"]["power"], vms["lab-node2"]["power"]) == ("poweredOff", "poweredOn")
