"""The vSphere rules have one home: what provision writes is what validation expects.

Each case builds a spec, lets the real planner plan a VM that exists without rackcert's
extraConfig, writes what the plan says (as apply would) into the recorded VM, and runs
the real hypervisor checks over it: before, every wanted key fails its check; after,
they pass, and a second plan changes no extraConfig.
"""

from __future__ import annotations

import itertools
import ssl
from http.client import IncompleteRead, RemoteDisconnected
from typing import Any

import pytest

from provision.planner import plan
from rackcert.core.errors import InputError
from rackcert.core.observed import ObservedVm, PassthroughDevice, VirtualDisk, VirtualNic
from rackcert.core.pci import MELLANOX, NVIDIA
from rackcert.core.placement import place
from rackcert.core.results import Status
from rackcert.core.spec import Gpu, Nic
from rackcert.core.spec_loader import load_spec
from rackcert.core.vsphere_rules import (
    ALLOW_P2P,
    MMIO_ENABLE,
    MMIO_SIZE,
    NUMA_AFFINITY,
    RELAX_ACS,
    TRANSIENT_FAULTS,
    mmio_size_gb,
    with_retries,
)
from rackcert.discover.catalog import shipped_catalog
from rackcert.lab import twin
from tests.support.discover_helpers import inventory_of, spec_of
from tests.support.spec_helpers import EXAMPLES, example_data
from validation.hypervisor_results import hypervisor_results

OWNED = {MMIO_ENABLE, MMIO_SIZE, ALLOW_P2P, RELAX_ACS, NUMA_AFFINITY}
CHECK_OF = {MMIO_SIZE: "hv.vm.mmio", ALLOW_P2P: "hv.vm.p2p", NUMA_AFFINITY: "hv.vm.numa"}


@pytest.mark.parametrize(
    ("memory", "expected"),
    [([80], 256), ([80, 80], 512), ([40, 40], 256), ([24], 64), ([48, 48], 256), ([141], 512)]
    + [([141, 141], 1024), ([], 0), ([80], 128)],
)
def test_mmio_window_is_gpu_memory_to_a_power_of_two_doubled(memory, expected):
    override = 128 if expected == 128 else None
    assert mmio_size_gb(memory, override) == expected


def _spec(memory: int, gpus: int, nic: str, mode: str, **template: Any):
    data = example_data()
    for gpu in data["hardware_profiles"][0]["gpus"]:
        gpu["memory_gb"] = memory
    tmpl = data["vm_templates"][0] | {"name": "t", "gpus": gpus, "nic": nic, "gpu_mode": mode}
    tmpl["nvlink"] = "required" if gpus == 2 else "none"
    if mode == "vgpu":
        tmpl["vgpu_profile"] = "grid_a100d-40c"
    data["vm_templates"] = [tmpl | template]
    data["vms"] = [{"name": "vm1", "template": "t", "host": "esx01", "address": "10.10.0.11"}]
    return spec_of(data)


def _recorded_vm(spec, inventory, extra: dict[str, str]) -> ObservedVm:
    """vm1 as vCenter would record it: cloned, devices in place, rackcert's keys as given."""
    tmpl = spec.template("t")
    placement = place(spec)[0]
    if tmpl.gpu_mode == "vgpu":
        devices = [PassthroughDevice(backing="vgpu", vgpu=tmpl.vgpu_profile) for _ in range(2)]
        devices = devices[: len(placement.gpus)]
    else:
        devices = [PassthroughDevice(backing="fixed", id=g) for g in placement.gpus]
        if tmpl.nic == "passthrough":
            devices.append(PassthroughDevice(backing="fixed", id=placement.nic))
    return ObservedVm(
        name="vm1",
        moid="vm-1",
        host=inventory.hosts[0].name,
        power_state="poweredOff",
        firmware="efi",
        num_cpus=tmpl.vcpus,
        memory_mb=tmpl.memory_gb * 1024,
        memory_reservation_locked=True,
        extra_config=extra,
        passthrough=devices,
        disks=[VirtualDisk(key=2000, capacity_gb=float(tmpl.disk_gb), datastore=tmpl.datastore)],
        nics=[VirtualNic(key=4000, type="vmxnet3", network=tmpl.network)],
    )


def _planned_extra(spec, inventory) -> dict[str, str]:
    """The extraConfig the planner would write into vm1 (its vm.reconfigure action)."""
    actions = [a for a in plan(spec, inventory) if a.target == "vm1"]
    reconfigure = [a for a in actions if a.kind == "vm.reconfigure"]
    return reconfigure[0].params["extra_config"] if reconfigure else {}


def _verdicts(spec, inventory) -> dict[str, Status]:
    return {r.id: r.status for r in hypervisor_results(spec, inventory) if r.node == "vm1"}


MODES = ("passthrough", "vgpu")
CASES = list(itertools.product((24, 40, 80, 141), (1, 2), ("passthrough", "vmxnet3"), MODES))


@pytest.mark.parametrize(("memory", "gpus", "nic", "mode"), CASES)
def test_what_provision_writes_is_what_validation_expects(memory, gpus, nic, mode):
    spec = _spec(memory, gpus, nic, mode)
    inventory = inventory_of(spec)
    inventory.vms = [_recorded_vm(spec, inventory, {})]
    written = _planned_extra(spec, inventory)
    owned = {k: v for k, v in written.items() if k in OWNED}
    before = _verdicts(spec, inventory)
    for key, check_id in CHECK_OF.items():
        want = Status.failed if key in owned else Status.skipped
        assert before[check_id] is want, (key, owned, before)

    inventory.vms = [_recorded_vm(spec, inventory, written)]
    after = _verdicts(spec, inventory)
    assert all(after[c] in (Status.passed, Status.skipped) for c in CHECK_OF.values()), after
    assert {c for c in CHECK_OF.values() if after[c] is Status.passed} == {
        CHECK_OF[k] for k in owned if k in CHECK_OF
    }
    assert not {k: v for k, v in _planned_extra(spec, inventory).items() if k in OWNED}
    # The rules themselves: MMIO for passthrough GPUs only; P2P from two P2P devices.
    assert (MMIO_SIZE in owned) is (mode == "passthrough")
    if MMIO_SIZE in owned:
        assert owned[MMIO_SIZE] == str(mmio_size_gb([memory] * gpus)) and owned[MMIO_ENABLE]
    p2p = gpus + (nic == "passthrough" and mode == "passthrough")
    assert (ALLOW_P2P in owned and RELAX_ACS in owned) is (p2p >= 2)


def test_template_override_and_numa_off_reach_both_sides():
    spec = _spec(80, 1, "passthrough", "passthrough", mmio_size_gb=1024, numa_affinity=False)
    inventory = inventory_of(spec)
    inventory.vms = [_recorded_vm(spec, inventory, {})]
    written = _planned_extra(spec, inventory)
    assert written[MMIO_SIZE] == "1024" and NUMA_AFFINITY not in written
    inventory.vms = [_recorded_vm(spec, inventory, written)]
    after = _verdicts(spec, inventory)
    assert after["hv.vm.mmio"] is Status.passed and after["hv.vm.numa"] is Status.skipped


def test_a_provisioned_vgpu_vm_is_not_failed_for_the_mmio_window_provision_never_sets():
    """The old validation copy expected use64bitMMIO on vGPU VMs, which provision never
    writes (vGPU: no DirectPath BARs): `provision --power-cycle`, its fix, changed nothing."""
    spec = _spec(80, 2, "vmxnet3", "vgpu")
    inventory = inventory_of(spec)
    inventory.vms = [_recorded_vm(spec, inventory, {})]
    inventory.vms = [_recorded_vm(spec, inventory, _planned_extra(spec, inventory))]
    assert _verdicts(spec, inventory)["hv.vm.mmio"] is Status.skipped


# -- the twin's PCI ids are the discover catalog's --------------------------------------------
def test_twin_devices_are_the_catalogs():
    catalog = shipped_catalog()
    for part in catalog.gpus:
        gpu = Gpu(pci="0000:17:00.0", model=part.model, memory_gb=part.memory_gb, numa=0)
        assert twin.gpu_ids(gpu) == part.ids(), part.model
    for part in catalog.nics:
        nic = Nic(pci="0000:4b:00.0", model=part.model, ports=2, speed_gbps=100, numa=0)
        assert twin.nic_ids(nic) == part.ids(), part.model


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_twin_is_discovered_as_its_own_models(path):
    spec = load_spec(path).spec
    catalog = shipped_catalog()
    for profile in spec.hardware_profiles:
        devices = twin.pci_devices(profile)
        gpus = [d for d in devices if d["vendor_id"] == NVIDIA]
        nics = [d for d in devices if d["vendor_id"] == MELLANOX]
        assert len(gpus) == len(profile.gpus) and len(nics) == sum(n.ports for n in profile.nics)
        for d in gpus:
            part = catalog.gpu(d["vendor_id"], d["device_id"])
            want = next(g for g in profile.gpus if g.pci == d["id"])
            assert part is not None and part.memory_gb == want.memory_gb, d
        for d in nics:
            assert catalog.nic(d["vendor_id"], d["device_id"]) is not None, d


def test_a_model_the_catalog_does_not_know_is_one_clear_error():
    gpu = Gpu(pci="0000:17:00.0", model="Frobnicator 9000", memory_gb=16, numa=0)
    with pytest.raises(InputError, match="'Frobnicator 9000' is not in the discover catalog"):
        twin.gpu_ids(gpu)


def test_a_spec_model_name_finds_its_part_by_words_and_memory():
    catalog = shipped_catalog()
    assert catalog.gpu_named("NVIDIA A100 80GB PCIe").device_id == "20b5"  # nvidia-smi order
    assert catalog.gpu_named("NVIDIA A100", 40).device_id == "20f1"
    assert catalog.nic_named("Mellanox ConnectX-6").device_id == "101b"
    assert catalog.nic_named("ConnectX-6 Dx").device_id == "101d"


# -- transient faults: one list, one retry policy ---------------------------------------------
def _flaky(fault: BaseException, calls: list[int]):
    def call() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise fault
        return "answered"

    return call


@pytest.mark.parametrize(
    "fault",
    [
        RemoteDisconnected("gone"),
        ConnectionResetError(),
        BrokenPipeError(),
        IncompleteRead(b""),
        ssl.SSLEOFError(8, "EOF occurred in violation of protocol"),
        TimeoutError(),
    ],
    ids=type,
)
def test_a_transient_fault_is_retried(fault):
    calls: list[int] = []
    assert with_retries(_flaky(fault, calls), backoff_s=0) == "answered" and len(calls) == 2
    assert isinstance(fault, TRANSIENT_FAULTS)


@pytest.mark.parametrize(
    ("fault", "final"),
    [
        (ssl.SSLCertVerificationError("certificate verify failed"), ()),
        (ValueError("not a fault of the line"), ()),
        (ConnectionRefusedError(), (ConnectionRefusedError, TimeoutError)),
    ],
    ids=lambda v: type(v).__name__,
)
def test_a_verdict_is_never_retried(fault, final):
    calls: list[int] = []
    with pytest.raises(type(fault)):
        with_retries(_flaky(fault, calls), final=final, backoff_s=0)
    assert len(calls) == 1
