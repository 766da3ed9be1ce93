"""The roll's Hypervisor port (provision.hypervisor_port.VSphereHypervisor) on the rack twin: power,
maintenance with rackcert's mark, a reboot proven by a later bootTime, the mark cleared on
exit; and a whole roll of the lab's two hosts through it (Slurm and the guests in memory).

No guest runs in these VMs, so no VMware Tools: ShutdownGuest is refused with
ToolsUnavailable as vSphere refuses it (twin/guestops.go), one line through the port; the roll
then powers the VM off and records it (forced_power_off)."""

from __future__ import annotations

import time

import pytest

from provision.hypervisor_port import VSphereHypervisor
from rackcert.core.errors import RackcertError
from rackcert.upgrade.machine import Ports, Roll, Timing
from rackcert.upgrade.ports import Certificate, NodeState, RealClock
from tests.support.upgrade_helpers import make_plan, new_run, spec_of

LAB = "inventories/lab.yaml"
REBOOT = {"reboot": {"connected_ms": 200, "down_ms": 800}}


def _vms() -> list[dict]:
    return [
        {"name": "lab-node1", "host": "lab-esx01.lab.internal", "cpus": 2, "memory_mb": 2048},
        {"name": "lab-node2", "host": "lab-esx02.lab.internal", "cpus": 2, "memory_mb": 2048},
    ]


def test_power_maintenance_and_reboot_through_the_port(rack_twin):
    lab = rack_twin(LAB, vms=_vms(), desc=REBOOT)
    hv = VSphereHypervisor(lab.spec, wait_guest=False)
    hv.power_on("lab-node1")
    assert hv.power_state("lab-node1") == "poweredOn"
    with pytest.raises(RackcertError, match="lab-node1: ShutdownGuest: .*VMware Tools is not"):
        hv.shutdown_guest("lab-node1")
    assert hv.power_state("lab-node1") == "poweredOn"
    hv.power_off("lab-node1")
    assert hv.power_state("lab-node1") == "poweredOff"
    with pytest.raises(RackcertError, match="lab-node1: power off failed"):
        hv.power_off("lab-node1")  # InvalidPowerState, as one line
    assert hv.marked_hosts() == []
    hv.enter_maintenance("lab-esx01", "R1")
    assert hv.marked_hosts() == ["lab-esx01"]
    before = hv.boot_time("lab-esx01")
    hv.reboot("lab-esx01")
    deadline = time.monotonic() + 30
    while True:
        try:
            now = hv.boot_time("lab-esx01")
        except RackcertError:
            now = ""
        if now and now > before:
            break
        assert time.monotonic() < deadline, "bootTime never moved"
        time.sleep(0.1)
    hv.exit_maintenance("lab-esx01")
    ref = hv._find("host", "lab-esx01")
    assert not ref.runtime.inMaintenanceMode, [(v.key, v.value) for v in ref.customValue]
    assert hv.marked_hosts() == [], [(v.key, v.value) for v in ref.customValue]
    hv.power_on("lab-node1")
    assert hv.power_state("lab-node1") == "poweredOn"


class _Slurm:
    kind = "slurm"

    def __init__(self):
        self.drained: dict[str, str] = {}

    def nodes(self, names):
        return {
            n: NodeState(n, "IDLE", n in self.drained, 0, self.drained.get(n, "")) for n in names
        }

    def drain(self, node, reason):
        self.drained[node] = reason

    def resume(self, node):
        self.drained.pop(node, None)

    set_reason = drain


class _HostImage:
    """vLCM's rule, read from the twin: apply only to a host in maintenance mode."""

    def __init__(self, hv: VSphereHypervisor, esxi: str):
        self.hv, self.images = hv, {}
        self.esxi = esxi

    def current(self, host):
        return self.images.get(host, {"esxi": self.esxi})

    def apply(self, host, versions):
        ref = self.hv._find("host", host)
        assert ref.runtime.inMaintenanceMode, f"{host}: apply outside maintenance mode"
        self.images[host] = dict(versions)


class _Guests:
    """The guests' side as the roll sees it: what validate and the per-node stage would
    record (a check passing and a figure, before and after alike: the roll's resume rule
    needs evidence both times), and the driver it installs."""

    CHECKS = {"os.kernel": "pass"}
    FIGURES = {"cpu.gemm_gflops": 100.0}

    def __init__(self):
        self.versions: dict[str, dict[str, str]] = {}

    def apply(self, node, versions):
        self.versions[node] = dict(versions)

    def baseline(self, nodes):
        return {
            n: Certificate(
                versions={"nvidia_driver": "470.82.01"},
                checks=dict(self.CHECKS),
                figures=dict(self.FIGURES),
            )
            for n in nodes
        }

    def certify(self, node, versions):
        return Certificate(
            versions=self.versions.get(node, {"nvidia_driver": "470.82.01"}),
            checks=dict(self.CHECKS),
            figures=dict(self.FIGURES),
        )


def test_a_roll_on_the_twin_patches_each_host_with_its_vm_off(rack_twin, tmp_path):
    lab = rack_twin(LAB, vms=_vms(), desc=REBOOT)
    import yaml

    data = yaml.safe_load(lab.spec_path.read_text())
    new = yaml.safe_load(lab.spec_path.read_text())
    new["guest"]["nvidia_driver"] = "470.141.03"
    for host in new["hosts"]:
        host["esxi_version"] = "7.0.3u"
    hv = VSphereHypervisor(lab.spec, wait_guest=False)
    for vm in ("lab-node1", "lab-node2"):
        hv.power_on(vm)
    guests = _Guests()
    image = _HostImage(hv, "7.0.3")
    ports = Ports(_Slurm(), hv, guests, guests, image, RealClock())  # type: ignore[arg-type]
    plan = make_plan(spec_of(data), spec_of(new))
    run = new_run(tmp_path, new)
    timing = Timing(shutdown_timeout=1, reboot_timeout=60, poll=0.2)
    out = Roll(plan, run, ports, timing).run()
    assert out.status == "done", out.stopped_because
    assert [n.state for n in out.nodes] == ["resumed", "resumed"]
    # No Tools in these guests: vCenter refuses ShutdownGuest, the roll powers off, recorded.
    shutdowns = [s.detail for n in out.nodes for s in n.steps if s.step == "shutdown guest"]
    assert len(shutdowns) == 2, shutdowns
    assert all(
        "ShutdownGuest refused" in d and "VMware Tools is not running" in d for d in shutdowns
    )
    assert all(n.forced_power_off for n in out.nodes)
    for host in out.hosts:
        assert host.boot_time_after > host.boot_time_before
        assert host.image_after == {"esxi": "7.0.3u"}
        assert [s.step for s in host.steps] == [
            "host maintenance",
            "host image",
            "reboot",
            "exit maintenance",
        ]
    assert hv.marked_hosts() == []
    assert all(hv.power_state(v) == "poweredOn" for v in ("lab-node1", "lab-node2"))


def test_a_roll_moves_the_host_images_through_vlcm(rack_twin, tmp_path):
    """The real host-image port (provision/host_image_port over the twin's vLCM) in the roll:
    each host remediated alone, in rackcert's maintenance window with its VM off; vLCM's
    remediation reboots it, which the roll proves by bootTime instead of rebooting again."""
    import yaml

    from provision.host_image_port import VlcmHostImage
    from rackcert.core.spec_loader import parse_spec
    from tests.support.twin_vlcm import NEW_BASE, VLCM

    lab = rack_twin(LAB, vms=_vms(), desc={"vlcm": VLCM, **REBOOT})
    data = yaml.safe_load(lab.spec_path.read_text())
    data["host_software"] = {"vgpu_manager_version": "535.154.02"}
    new = yaml.safe_load(yaml.safe_dump(data))
    new["host_software"] = {
        "vgpu_manager_version": "535.161.05",
        "components": {"nmlx5": "4.23.0.66"},
    }
    new["guest"]["nvidia_driver"] = "470.141.03"
    for host in new["hosts"]:
        host["esxi_version"] = NEW_BASE
    after = parse_spec(yaml.safe_dump(new, sort_keys=False), str(lab.spec_path)).spec
    hv = VSphereHypervisor(lab.spec, wait_guest=False)
    for vm in ("lab-node1", "lab-node2"):
        hv.power_on(vm)
    port = VlcmHostImage(after, timeout_s=120)
    assert port.current("lab-esx01")["vgpu_manager"] == "535.154.02"
    guests = _Guests()
    ports = Ports(_Slurm(), hv, guests, guests, port, RealClock())  # type: ignore[arg-type]
    plan = make_plan(spec_of(data), spec_of(new))
    assert {c.component for c in plan.changes} == {"esxi", "vgpu_manager", "nmlx5", "nvidia_driver"}
    timing = Timing(shutdown_timeout=1, reboot_timeout=120, poll=0.2)
    out = Roll(plan, new_run(tmp_path, new), ports, timing).run()
    assert out.status == "done", out.stopped_because
    assert [n.state for n in out.nodes] == ["resumed", "resumed"]
    for host in out.hosts:
        assert {k: host.image_after.get(k) for k in ("esxi", "vgpu_manager", "nmlx5")} == {
            "esxi": NEW_BASE, "vgpu_manager": "535.161.05", "nmlx5": "4.23.0.66"
        }  # fmt: skip
        reboot = next(s for s in host.steps if s.step == "reboot")
        assert "rebooted by the image's remediation" in reboot.detail
        assert host.boot_time_after > host.boot_time_before
    assert hv.marked_hosts() == []
