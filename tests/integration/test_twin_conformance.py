"""The rack twin as any vSphere client sees it: community.vmware reads it, before and after.

The judges are Ansible's community.vmware modules from PyPI's `ansible` package (installed by
.ci/setup.d/25-vsphere-judges.sh, never here), pointed at the twin of inventories/r750xa-4node.yaml
over verified TLS. Each module must succeed, and what it reports must agree with the spec: the
hosts, their processors, the GPUs in passthrough, the VMs with their devices and keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rackcert.lab import twin
from tests.support.twin_judges import Judge, run_modules
from tests.support.vsphere_helpers import cli

ATS = "VMkernel.Boot.atsSupport"


# One VM of each template shape: 1 GPU + NIC port, NVLink pair + NIC port, 1 GPU + vmxnet3.
GUESTS = ("mn-node1", "s1-pair", "s2-single-a")


def _judges(lab: Any, *, provisioned: bool) -> list[Judge]:
    spec = lab.spec
    dc, cluster = spec.vcenter.datacenter, spec.vcenter.cluster
    gpus = sorted({g.pci for p in spec.hardware_profiles for g in p.gpus})
    judges = [
        Judge("vmware_about_info", {}),
        Judge("vmware_cluster_info", {"cluster_name": cluster}),
        Judge("vmware_datastore_info", {"datacenter": dc}),
        Judge("vmware_host_config_info", {"cluster_name": cluster}),
        Judge(
            "vmware_host_config_manager",
            {"cluster_name": cluster, "options": {ATS: True}},
            check=True,
        ),
        Judge(
            "vmware_host_passthrough",
            {"cluster": cluster, "devices": [{"device_name": pci} for pci in gpus]},
            check=True,
        ),
        Judge("vmware_vm_info", {}),
    ]
    host = spec.hosts[0]
    judges.append(
        Judge("vmware_host_facts", {"esxi_hostname": host.address}, label=f"facts {host.name}")
    )
    for vm in spec.vms if provisioned else []:
        for schema in ("summary", "vsphere") if vm.name in GUESTS else ("vsphere",):
            judges.append(
                Judge(
                    "vmware_guest_info",
                    {"name": vm.name, "datacenter": dc, "schema": schema},
                    label=f"guest_info {schema} {vm.name}",
                )
            )
    return judges


def _failed(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: str(r.get("msg", ""))[:300] for name, r in results.items() if r.get("failed")}


def _check_rack(lab: Any, results: dict[str, dict[str, Any]]) -> None:
    """What every module reports agrees with the spec's rack, provisioned or not."""
    spec = lab.spec
    about = results["vmware_about_info"]["about_info"]
    assert (about["version"], about["api_version"]) == ("7.0.3", "7.0.3.0")
    assert about["license_product_version"] == "7.0"

    clusters = results["vmware_cluster_info"]["clusters"]
    info = clusters[spec.vcenter.cluster]
    assert {h["name"] for h in info["hosts"]} == {h.address for h in spec.hosts}
    assert (info["enabled_drs"], info["enabled_vsan"]) == (False, False)
    usage = info["resource_summary"]
    assert usage["cpuCapacityMHz"] == len(spec.hosts) * 64 * 2000  # 2 x Gold 6338 per host
    assert usage["storageUsedMB"] <= usage["storageCapacityMB"]

    names = {d["name"] for d in results["vmware_datastore_info"]["datastores"]}
    assert {t.datastore for t in spec.vm_templates if t.datastore} <= names

    hosts = results["vmware_host_config_info"]["hosts_info"]
    assert set(hosts) == {h.address for h in spec.hosts}

    for host in spec.hosts[:1]:
        facts = results[f"facts {host.name}"]["ansible_facts"]
        profile = spec.profile(host.profile)
        assert facts["ansible_product_name"] == profile.server_model
        assert facts["ansible_distribution_version"] == host.esxi_version
        assert (facts["ansible_processor_count"], facts["ansible_processor_cores"]) == (2, 64)
        assert facts["ansible_processor_vcpus"] == 128
        assert facts["vsan_health"] == "unknown"  # not a vSAN member (PowerScale NFS)


def test_community_vmware_reads_the_rack_before_provision(rack_twin, tmp_path: Path):
    lab = rack_twin()
    results = run_modules(lab, _judges(lab, provisioned=False), tmp_path / "judges")
    assert _failed(results) == {}
    _check_rack(lab, results)
    spec = lab.spec
    # Nothing is provisioned: ATS is off and the GPUs are not in passthrough, so the
    # check-mode modules would change every host.
    assert all(v == {ATS: False} for v in results["vmware_host_config_info"]["hosts_info"].values())
    assert results["vmware_host_config_manager"]["changed"] is True
    assert results["vmware_host_passthrough"]["changed"] is True
    vms = {v["guest_name"] for v in results["vmware_vm_info"]["virtual_machines"]}
    assert not vms & {v.name for v in spec.vms}
    assert twin.handler_panics(lab.twin.files.workdir) == []


def _devices(instance: dict[str, Any], vimtype: str) -> list[dict[str, Any]]:
    return [d for d in instance["config"]["hardware"]["device"] if d["_vimtype"] == vimtype]


def test_community_vmware_reads_the_rack_after_provision(rack_twin, capsys, tmp_path: Path):
    lab = rack_twin(guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    results = run_modules(lab, _judges(lab, provisioned=True), tmp_path / "judges")
    assert _failed(results) == {}
    _check_rack(lab, results)
    spec = lab.spec
    assert all(v == {ATS: True} for v in results["vmware_host_config_info"]["hosts_info"].values())
    assert results["vmware_host_config_manager"]["changed"] is False
    # The GPUs in passthrough on each host are exactly those its VMs hold, every one of them.
    held: dict[str, set[str]] = {h.address: set() for h in spec.hosts}
    hosts = {h.name: h.address for h in spec.hosts}
    gpu_ids = {g.pci for p in spec.hardware_profiles for g in p.gpus}
    for vm in spec.vms:
        instance = results[f"guest_info vsphere {vm.name}"]["instance"]
        for device in _devices(instance, "vim.vm.device.VirtualPCIPassthrough"):
            if device["backing"]["id"] in gpu_ids:
                held[hosts[vm.host]].add(device["backing"]["id"])
    gpus = sum(spec.template(v.template).gpus for v in spec.vms)
    assert sum(len(v) for v in held.values()) == gpus
    enabled = {
        host: {d["device_id"] for d in devices if d["passthruEnabled"]}
        for host, devices in results["vmware_host_passthrough"]["diff"]["before"].items()
    }
    assert enabled == held

    listed = {v["guest_name"]: v for v in results["vmware_vm_info"]["virtual_machines"]}
    for vm in spec.vms:
        row = listed[vm.name]
        assert row["power_state"] == "poweredOn"
        assert row["esxi_hostname"] == hosts[vm.host]
        if vm.name not in GUESTS:
            continue
        template = spec.template(vm.template)
        summary = results[f"guest_info summary {vm.name}"]["instance"]
        assert summary["hw_processor_count"] == template.vcpus
        assert summary["hw_memtotal_mb"] == template.memory_gb * 1024

        instance = results[f"guest_info vsphere {vm.name}"]["instance"]
        config = instance["config"]
        assert config["memoryReservationLockedToMax"] is True
        # Locked to max: the reservation is the memory size, as vCenter reports it.
        assert config["memoryAllocation"]["reservation"] == template.memory_gb * 1024
        assert instance["resourceConfig"]["memoryAllocation"]["reservation"] == (
            template.memory_gb * 1024
        )
        assert not [o for o in config["extraConfig"] if o["key"] == "govcsim"]
        passthrough = _devices(instance, "vim.vm.device.VirtualPCIPassthrough")
        want = template.gpus + (1 if template.nic == "passthrough" else 0)
        assert len(passthrough) == want, vm.name
        # Keys and labels as vCenter assigns them.
        assert [d["key"] for d in passthrough] == list(range(13000, 13000 + want))
        assert [d["deviceInfo"]["label"] for d in passthrough] == [
            f"PCI device {i}" for i in range(want)
        ]
        nics = [d for d in config["hardware"]["device"] if 4000 <= d["key"] < 5000]
        assert [d["deviceInfo"]["label"] for d in nics] == ["Network adapter 1"]
        disks = _devices(instance, "vim.vm.device.VirtualDisk")
        assert [(d["key"], d["deviceInfo"]["label"]) for d in disks] == [(2000, "Hard disk 1")]
    assert twin.handler_panics(lab.twin.files.workdir) == []
