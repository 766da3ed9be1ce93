"""Hypervisor checks over a recorded discovery, with expectations from spec + placement."""

from __future__ import annotations

from pathlib import Path

from rackcert.core.observed import Inventory, ObservedHost, ObservedVm, PassthroughDevice, PciDevice
from rackcert.core.placement import nic_function, place
from rackcert.core.results import Status
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.core.vsphere_rules import mmio_size_gb
from validation.hypervisor_results import discovery_record, hypervisor_results

SPEC = Path(__file__).resolve().parents[2] / "inventories" / "r750xa-4node.yaml"


def test_mmio_rule_from_design():
    assert mmio_size_gb([80]) == 256
    assert mmio_size_gb([80, 80]) == 512
    assert mmio_size_gb([40, 40]) == 256
    assert mmio_size_gb([141]) == 512
    assert mmio_size_gb([80], override=128) == 128


def good_inventory(spec) -> Inventory:
    """What a correct provision would have left: built from the same placement."""
    placements = place(spec)
    hosts, vms = [], []
    for h in spec.hosts:
        prof = spec.profile(h.profile)
        devs = [
            PciDevice(
                id=g.pci,
                vendor_id=0x10DE,
                device_id=0x20B5,
                passthru_enabled=True,
                passthru_active=True,
            )
            for g in prof.gpus
        ]
        devs += [
            PciDevice(
                id=nic_function(n.pci, port),
                vendor_id=0x15B3,
                device_id=0x101D,
                passthru_enabled=True,
                passthru_active=True,
            )
            for n in prof.nics
            for port in range(n.ports)
        ]
        hosts.append(ObservedHost(name=h.name, moid=h.name, ats_enabled=True, pci_devices=devs))
    for p in placements:
        prof = spec.host_profile(p.host)
        mem = [g.memory_gb for g in prof.gpus if g.pci in p.gpus]
        extra = {
            "pciPassthru.use64bitMMIO": "TRUE",
            "pciPassthru.64bitMMIOSizeGB": str(mmio_size_gb(mem)),
            "numa.nodeAffinity": str(p.numa),
        }
        devices = [PassthroughDevice(backing="fixed", id=g) for g in p.gpus]
        vm_spec = next(v for v in spec.vms if v.name == p.vm)
        if spec.template(vm_spec.template).nic == "passthrough":
            devices.append(PassthroughDevice(backing="fixed", id=p.nic))
        if len(devices) > 1:  # GPUs and NIC talk P2P (GPUDirect RDMA)
            extra |= {"pciPassthru.allowP2P": "true", "pciPassthru.RelaxACSforP2P": "true"}
        vms.append(
            ObservedVm(
                name=p.vm,
                moid=p.vm,
                host=p.host,
                firmware="efi",
                memory_reservation_locked=True,
                extra_config=extra,
                passthrough=devices,
            )
        )
    return Inventory(hosts=hosts, vms=vms)


def test_correct_rack_passes_everything():
    spec = load_spec(SPEC).spec
    results = hypervisor_results(spec, good_inventory(spec))
    assert results and all(r.status in (Status.passed, Status.skipped) for r in results), [
        r for r in results if r.status not in (Status.passed, Status.skipped)
    ]
    ids = {r.id for r in results}
    assert {"hv.host.ats", "hv.vm.mmio", "hv.vm.p2p", "hv.vm.numa", "hv.vm.devices"} <= ids


def test_each_drift_fails_exactly_its_check():
    spec = load_spec(SPEC).spec
    inv = good_inventory(spec)
    inv.host("esx02").ats_enabled = False
    pair = inv.vm("s1-pair")
    pair.extra_config["pciPassthru.64bitMMIOSizeGB"] = "128"
    del pair.extra_config["pciPassthru.allowP2P"]
    inv.vm("mn-node3").memory_reservation_locked = False
    inv.vm("mn-node4").extra_config["numa.nodeAffinity"] = "1"
    inv.vms = [v for v in inv.vms if v.name != "s3-pair-b"]
    failing = {(r.node, r.id) for r in hypervisor_results(spec, inv) if r.status is Status.failed}
    assert failing == {
        ("esx02", "hv.host.ats"),
        ("s1-pair", "hv.vm.mmio"),
        ("s1-pair", "hv.vm.p2p"),
        ("mn-node3", "hv.vm.reservation"),
        ("mn-node4", "hv.vm.numa"),
        ("s3-pair-b", "hv.vm.present"),
    }
    mmio = next(
        r for r in hypervisor_results(spec, inv) if r.id == "hv.vm.mmio" and r.node == "s1-pair"
    )
    # 1 GPU + passthrough ConnectX-6 without the P2P keys: no GPUDirect RDMA, so it fails
    del inv.vm("mn-node1").extra_config["pciPassthru.RelaxACSforP2P"]
    p2p = {(r.node, r.id): r for r in hypervisor_results(spec, inv)}
    assert p2p[("mn-node1", "hv.vm.p2p")].status is Status.failed
    assert p2p[("s2-single-a", "hv.vm.p2p")].status is Status.skipped  # vmxnet3, 1 GPU
    assert "64bitMMIOSizeGB=512" in mmio.expected and mmio.fix


def test_discovery_read_from_provision_record_else_plan(tmp_path):
    loaded = load_spec(SPEC)
    spec = loaded.spec
    run = RunDir.create(tmp_path, spec.metadata.name, loaded.sha256, loaded.text)
    assert discovery_record(spec.metadata.name, run, tmp_path) is None
    inv = good_inventory(spec)
    run.write_stage("plan", {"observed": inv.model_dump(mode="json"), "actions": []})
    got, source = discovery_record(spec.metadata.name, run, tmp_path)
    assert source.endswith("plan.json") and got.vm("mn-node1") is not None
    later = RunDir.create(tmp_path, spec.metadata.name, loaded.sha256, loaded.text)
    inv.host("esx01").ats_enabled = False
    later.write_stage("provision", {"observed_after": inv.model_dump(mode="json")})
    got, source = discovery_record(spec.metadata.name, None, tmp_path)
    assert source.endswith("provision.json") and got.host("esx01").ats_enabled is False


def test_discovery_lookup_reads_no_record_of_validate_only_runs(tmp_path, monkeypatch):
    # Every validate looks for the newest discovery; the validate-only runs after it (each
    # validate.json grows with the nodes) are not parsed, and an unreadable run is passed over.
    import rackcert.core.runs

    loaded = load_spec(SPEC)
    rack = loaded.spec.metadata.name
    old = RunDir.create(tmp_path, rack, loaded.sha256, loaded.text)
    old.write_stage("plan", {"observed": good_inventory(loaded.spec).model_dump(mode="json")})
    broken = RunDir.create(tmp_path, rack, loaded.sha256, loaded.text)
    (broken.path / "provision.json").write_text("{not json")
    later = [RunDir.create(tmp_path, rack, loaded.sha256, loaded.text) for _ in range(3)]
    for run in later:
        (run.path / "validate.json").write_text('{"stage": "validate", "data": {}}')
    read: list[str] = []
    real = rackcert.core.runs.read_json
    monkeypatch.setattr(rackcert.core.runs, "read_json", lambda p: read.append(str(p)) or real(p))

    got, source = discovery_record(rack, later[-1], tmp_path)
    assert source == str(old.path / "plan.json") and got.vm("mn-node1") is not None
    assert not any(str(run.path) in path for run in later for path in read), read
