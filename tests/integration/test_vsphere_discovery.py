"""Discovery: what it reports per host and VM, in a constant number of round trips."""

from __future__ import annotations

from provision.discovery import discover
from provision.planner import plan
from rackcert.core.vsphere_rules import mmio_size_gb

R750 = "inventories/r750xa-4node.yaml"


def test_discovery_reports_the_hardware_spec_discover_needs(rack_twin):
    existing = {
        "name": "old-vm",
        "host": "esx02.example.internal",
        "power_on": True,
        "cpus": 4,
        "memory_mb": 4096,
    }
    lab = rack_twin(R750, vms=[existing])
    with lab.connect() as si:
        inv = discover(si)
    assert [h.name for h in inv.hosts] == [f"esx0{i}.example.internal" for i in range(1, 5)]
    host = inv.host("esx02.example.internal")
    assert (host.vendor, host.model, host.esxi_version) == (
        "Dell Inc.",
        "PowerEdge R750xa",
        "7.0.3",
    )
    assert host.numa_nodes == 2 and host.ats_enabled is False and host.system_id
    gpu = host.device("0000:b1:00.0")
    assert (gpu.vendor_id, gpu.device_id, gpu.numa_node) == (0x10DE, 0x20B5, 1)
    assert gpu.parent_bridge == "0000:b0:02.0" and host.device(gpu.parent_bridge).class_id == 0x0604
    assert gpu.passthru_capable and not gpu.passthru_enabled and not gpu.passthru_active
    port = host.device("0000:4b:00.1")
    assert (port.vendor_id, port.device_id, port.numa_node) == (0x15B3, 0x101D, 0)
    bridge = host.device("0000:16:02.0")
    assert bridge.vendor_id == 0x8086  # arrives as a negative xsd:short
    assert "grid_a100d-40c" in host.vgpu_types
    workload = [n for n in host.vm_names if not inv.vm(n).managed_by]
    assert workload == ["old-vm"]
    agents = [v for v in inv.vms if v.managed_by == "com.vmware.vim.eam"]
    assert len(agents) == 3 and all(v.name.startswith("vCLS-") for v in agents)
    vm = inv.vm("old-vm")
    assert (vm.host, vm.power_state, vm.num_cpus) == (host.name, "poweredOn", 4)
    assert inv.round_trips == 5


def test_round_trips_do_not_grow_with_hosts(rack_twin):
    trips = []
    for count in (4, 32):
        lab = rack_twin(R750, hosts=count)
        with lab.connect() as si:
            inv = discover(si)
        workload = [v for v in inv.vms if not v.managed_by]
        assert len(inv.hosts) == count and len(workload) == count
        trips.append(inv.round_trips)
    assert trips[0] == trips[1] == 5


def test_planner_is_pure_and_deterministic(rack_twin):
    lab = rack_twin(R750)
    with lab.connect() as si:
        inv = discover(si)
    frozen = inv.model_dump_json()
    first = [a.model_dump() for a in plan(lab.spec, inv)]
    second = [a.model_dump() for a in plan(lab.spec, inv)]
    assert first == second and inv.model_dump_json() == frozen


def test_mmio_window_rule():
    assert mmio_size_gb([80]) == 256
    assert mmio_size_gb([80, 80]) == 512
    assert mmio_size_gb([40, 40]) == 256
    assert mmio_size_gb([40]) == 128
    assert mmio_size_gb([80, 80], override=1024) == 1024
    assert mmio_size_gb([]) == 0


def test_discovery_benchmark_runs_and_naive_walk_grows(tmp_path, vcsim_binary):
    from benchmarks.discovery import measure

    small = measure(1, tmp_path)
    larger = measure(3, tmp_path)
    assert small["rackcert_round_trips"] == larger["rackcert_round_trips"] == 5
    assert larger["naive_round_trips"] > small["naive_round_trips"] > 5
