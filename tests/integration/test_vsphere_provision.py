"""provision against the twin of the Dell R750xa rack: real vcsim, real pyVmomi."""

from __future__ import annotations

from tests.support.vsphere_helpers import (
    cli,
    error_line,
    last_record,
    plan_json,
    read_hosts,
    read_vms,
)

R750 = "inventories/r750xa-4node.yaml"
GPU = (0x10DE, 0x20B5)
NIC = (0x15B3, 0x101D)


def test_plan_lists_host_and_vm_actions(rack_twin, capsys):
    lab = rack_twin(R750)
    data = plan_json(lab, capsys)
    kinds = [(a["kind"], a["target"]) for a in data["actions"]]
    hosts = [f"esx0{i}.example.internal" for i in range(1, 5)]
    for host in hosts:
        assert ("host.ats", host) in kinds
        assert ("host.passthrough", host) in kinds
        assert ("host.reboot", host) in kinds
    # hosts come first, one host's actions together, then the VMs in spec order
    assert [k for k, _ in kinds[:12]] == ["host.ats", "host.passthrough", "host.reboot"] * 4
    vms = [t for k, t in kinds if k == "vm.clone"]
    assert vms == [v.name for v in lab.spec.vms]
    assert [t for k, t in kinds if k == "vm.customize"] == vms
    # every VM is powered on and waited for: placement gives each its own GPUs and NIC
    # function, so no two share a device (vSphere runs one holder of a device at a time)
    running = [v.name for v in lab.spec.vms]
    assert [t for k, t in kinds if k == "vm.power_on"] == running
    assert [t for k, t in kinds if k == "vm.wait"] == running
    assert [k for k, _ in kinds[12:]] == ["vm.clone", "vm.customize"] * 9 + ["vm.power_on"] * 9 + [
        "vm.wait"
    ] * 9
    by_vm = {a["target"]: a for a in data["actions"] if a["kind"] == "vm.customize"}
    extra = by_vm["s1-pair"]["params"]["desired"]["extra_config"]
    assert extra["pciPassthru.64bitMMIOSizeGB"] == "512"
    assert extra["pciPassthru.allowP2P"] == "true"
    assert extra["numa.nodeAffinity"] == "1"  # placement: the free bridged pair b1/ca
    single = by_vm["mn-node1"]["params"]["desired"]["extra_config"]
    assert single["pciPassthru.64bitMMIOSizeGB"] == "256"
    # 1 GPU + ConnectX-6 in passthrough: GPUDirect RDMA is P2P, so both keys
    assert single["pciPassthru.allowP2P"] == single["pciPassthru.RelaxACSforP2P"] == "true"
    local = by_vm["s2-single-a"]["params"]["desired"]["extra_config"]
    assert "pciPassthru.allowP2P" not in local  # 1 GPU, vmxnet3: nothing to talk to
    assert all(a["reason"] for a in data["actions"])
    assert last_record(lab, "plan")["data"]["observed"]["hosts"][0]["model"] == "PowerEdge R750xa"


def test_provision_applies_and_second_plan_is_empty(rack_twin, capsys):
    lab = rack_twin(R750, guests=True)
    before = read_hosts(lab)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    record = last_record(lab, "provision")
    assert record["status"] == "ok"
    assert len(record["data"]["done"]) == len(record["data"]["actions"]) == 12 + 18 + 18
    assert record["data"]["observed_after"]["hosts"][0]["ats_enabled"] is True
    states = record["data"]["vms"]
    assert states["mn-node1"]["answered"] == "tools" and states["mn-node1"]["power_state"] == (
        "poweredOn"
    )
    # each VM has its own NIC function (s1-pair 0000:4b:00.1, mn-node1 .0): none is left off
    assert not any(state.get("left_off") for state in states.values())
    assert states["s1-pair"]["power_state"] == "poweredOn"

    hosts = read_hosts(lab)
    for name, host in hosts.items():
        assert host["ats"] is True
        assert host["boot"] > before[name]["boot"], f"{name} was not rebooted"
        assert not host["maintenance"]
    vms = read_vms(lab)
    assert set(vms) == {v.name for v in lab.spec.vms}
    expect = {
        "mn-node1": ["0000:17:00.0", "0000:4b:00.0"],
        "s1-pair": ["0000:b1:00.0", "0000:ca:00.0", "0000:4b:00.1"],  # the NIC's 2nd function
        "s3-pair-a": ["0000:b1:00.0", "0000:ca:00.0", "0000:4b:00.1"],
        "s2-single-a": ["0000:b1:00.0"],  # single-node setup: vmxnet3, no NIC function left
    }
    for name, vm in vms.items():
        assert vm["firmware"] == "efi", name
        assert vm["locked"] is True, name
        assert vm["disks_gb"] == [200], name  # the template's 16 GB disk, grown
        assert vm["nics"] == [("VirtualVmxnet3", "mgmt-vlan10")], name
        assert vm["extra"]["guestinfo.metadata.encoding"] == "gzip+base64"
        assert vm["power"] == "poweredOn", name  # ESXi accepted its devices
        assert vm["guest_ip"] in (next(v.address for v in lab.spec.vms if v.name == name), None, "")
        assert vm["extra"]["pciPassthru.use64bitMMIO"] == "TRUE"
        ids = [d[0] for d in vm["passthrough"]]
        gpus = [d for d in vm["passthrough"] if (d[1], d[2]) == GPU]
        nics = [d for d in vm["passthrough"] if (d[1], d[2]) == NIC]
        assert len(nics) == (0 if name.startswith("s2-") else 1), name
        # the passthrough systemId is ESXi's system UUID, not the BIOS UUID
        assert all(d[3] and d[3] != hosts[vm["host"]]["uuid"] for d in vm["passthrough"])
        assert set(ids) <= set(hosts[vm["host"]]["active"])
        if len(gpus) == 2:
            assert vm["extra"]["pciPassthru.64bitMMIOSizeGB"] == "512"
            assert vm["extra"]["pciPassthru.allowP2P"] == "true"
            assert vm["extra"]["pciPassthru.RelaxACSforP2P"] == "true"
        else:
            assert len(gpus) == 1, name
            assert vm["extra"]["pciPassthru.64bitMMIOSizeGB"] == "256"
            if nics:
                assert vm["extra"]["pciPassthru.allowP2P"] == "true", name
                assert vm["extra"]["pciPassthru.RelaxACSforP2P"] == "true", name
            else:
                assert "pciPassthru.allowP2P" not in vm["extra"], name
        assert vm["extra"]["numa.nodeAffinity"] in ("0", "1")
        if name in expect:
            assert ids == expect[name], name
    # each GPU and each NIC function of a host goes to one VM only
    for host in hosts:
        used = [d[0] for vm in vms.values() if vm["host"] == host for d in vm["passthrough"]]
        assert len(used) == len(set(used)), host

    assert plan_json(lab, capsys)["actions"] == []
    code, out, _ = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0 and "nothing to do" in out


def test_powered_on_vm_and_its_host_are_left_alone_without_power_cycle(rack_twin, capsys):
    running = {
        "name": "mn-node1",
        "host": "esx01.example.internal",
        "power_on": True,
        "cpus": 4,
        "memory_mb": 8192,
        "firmware": "efi",
        "disk_gb": 40,
    }
    lab = rack_twin(R750, vms=[running], guests=True)
    before = read_hosts(lab)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1
    line = error_line(err)
    assert "provisioned partially" in line and "--power-cycle" in line
    hosts = read_hosts(lab)
    assert hosts["esx01.example.internal"]["boot"] == before["esx01.example.internal"]["boot"]
    assert hosts["esx01.example.internal"]["ats"] is False
    assert hosts["esx02.example.internal"]["ats"] is True
    vm = read_vms(lab)["mn-node1"]
    assert (vm["cpus"], vm["passthrough"], vm["power"]) == (4, [], "poweredOn")
    assert last_record(lab, "provision")["status"] == "partial"

    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes", "--power-cycle")
    assert code == 0, err
    vm = read_vms(lab)["mn-node1"]
    assert vm["cpus"] == 32 and vm["locked"] and vm["power"] == "poweredOn"
    assert [d[0] for d in vm["passthrough"]] == ["0000:17:00.0", "0000:4b:00.0"]
    assert read_hosts(lab)["esx01.example.internal"]["ats"] is True
    assert plan_json(lab, capsys)["actions"] == []


def test_task_fault_leaves_partial_record_and_rerun_completes(rack_twin, capsys):
    message = "injected: esx03 did not come back from reboot"
    faults = {
        "fail": [
            {
                "method": "RebootHost_Task",
                "target": "esx03.example.internal",
                "count": 1,
                "message": message,
            }
        ]
    }
    lab = rack_twin(R750, faults=faults, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1
    assert message in error_line(err)
    record = last_record(lab, "provision")
    assert record["status"] == "failed" and message in record["error"]
    done = [(a["kind"], a["target"]) for a in record["data"]["done"]]
    assert ("host.reboot", "esx02.example.internal") in done
    assert ("host.passthrough", "esx03.example.internal") in done
    assert ("host.reboot", "esx03.example.internal") not in done
    assert record["data"]["observed_after"]["hosts"][2]["reboot_required"] is True

    remaining = plan_json(lab, capsys)["actions"]
    assert [(a["kind"], a["target"]) for a in remaining][0] == (
        "host.reboot",
        "esx03.example.internal",
    )
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    assert plan_json(lab, capsys)["actions"] == []


def test_reconfigure_fault_on_a_named_vm_then_rerun(rack_twin, capsys):
    existing = {
        "name": "s1-pair",
        "host": "esx01.example.internal",
        "cpus": 32,
        "memory_mb": 32768,
        "firmware": "efi",
        "disk_gb": 40,
    }
    faults = {"fail": [{"method": "ReconfigVM_Task", "target": "s1-pair", "count": 1}]}
    lab = rack_twin(R750, vms=[existing], faults=faults, guests=True)
    plan = plan_json(lab, capsys)["actions"]
    assert ("vm.reconfigure", "s1-pair") in [(a["kind"], a["target"]) for a in plan]
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1 and "ReconfigVM_Task on s1-pair failed" in err
    assert read_vms(lab)["s1-pair"]["locked"] is not True
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    vm = read_vms(lab)["s1-pair"]
    assert vm["locked"] is True
    assert [d[0] for d in vm["passthrough"]] == ["0000:b1:00.0", "0000:ca:00.0", "0000:4b:00.1"]


def test_an_existing_bios_vm_is_never_switched_to_efi(rack_twin, capsys):
    existing = {
        "name": "s1-pair",
        "host": "esx01.example.internal",
        "cpus": 32,
        "memory_mb": 65536,
        "firmware": "bios",
        "disk_gb": 40,
    }
    lab = rack_twin(R750, vms=[existing], guests=True)
    plan = {(a["kind"], a["target"]): a for a in plan_json(lab, capsys)["actions"]}
    firmware = plan[("vm.firmware", "s1-pair")]
    assert "never switches an existing VM from BIOS to EFI" in firmware["blocked"]
    assert "firmware" not in plan[("vm.reconfigure", "s1-pair")]["change"]
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1 and "BIOS to EFI" in error_line(err)
    vm = read_vms(lab)["s1-pair"]
    assert vm["firmware"] == "bios" and vm["locked"] is True and len(vm["passthrough"]) == 3
    left = [(a["kind"], a["target"]) for a in plan_json(lab, capsys)["actions"]]
    assert left == [("vm.firmware", "s1-pair")]
