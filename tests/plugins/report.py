"""Run directories for the report tests, written through RunDir like the real stages do.

`write_run(root, ...)` records a realistic run of the seed's Dell R750xa rack:
plan/provision discovery (R750xa hosts with 4 x A100 PCIe and a ConnectX-6 Dx),
configure per-host stats, facts.json, validate results, bench figures (the seed's
Table 2 ResNet50 throughput, an allreduce sweep over 100 GbE). Knobs change one
thing at a time (driver version, a slower ResNet50, failing checks, missing
stages) so tests can assert exactly what the report shows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from rackcert.runs import RunDir
from rackcert.spec_loader import load_spec

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "inventories" / "r750xa-4node.yaml"
NODES = ["mn-node1", "mn-node2", "mn-node3", "mn-node4"]
HOSTS = ["esx01", "esx02", "esx03", "esx04"]
GPU_PCI = ["0000:17:00.0", "0000:31:00.0", "0000:b1:00.0", "0000:ca:00.0"]
TABLE2 = {1: 2757.21, 2: 5391.751667, 4: 10675.0925}
TOPO = """\
\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV12\tSYS\t0-31\t0
GPU1\tNV12\t X \tSYS\t0-31\t0
NIC0\tSYS\tSYS\t X \t\t
"""


def _host(name: str, vms: list[str]) -> dict[str, Any]:
    gpus = [
        {
            "id": pci,
            "vendor_id": 0x10DE,
            "device_id": 0x20B5,
            "class_id": 0x0302,
            "vendor_name": "NVIDIA Corporation",
            "device_name": "GA100 [A100 PCIe 80GB]",
            "numa_node": 0 if i < 2 else 1,
            "passthru_capable": True,
            "passthru_enabled": True,
            "passthru_active": True,
        }
        for i, pci in enumerate(GPU_PCI)
    ]
    nic = {
        "id": "0000:4b:00.0",
        "vendor_id": 0x15B3,
        "device_id": 0x101D,
        "class_id": 0x0200,
        "vendor_name": "Mellanox Technologies",
        "device_name": "MT2892 Family [ConnectX-6 Dx]",
        "numa_node": 0,
        "passthru_capable": True,
        "passthru_enabled": True,
        "passthru_active": True,
    }
    bridge = {"id": "0000:00:00.0", "vendor_id": 0x8086, "device_id": 0x09A2, "class_id": 0x0600}
    return {
        "name": name,
        "moid": f"host-{name}",
        "address": f"{name}.example.internal",
        "vendor": "Dell Inc.",
        "model": "PowerEdge R750xa",
        "esxi_version": "7.0.3",
        "esxi_build": "19193900",
        "bios_version": "1.1.3",
        "connection_state": "connected",
        "power_state": "poweredOn",
        "ats_enabled": True,
        "numa_nodes": 2,
        "pci_devices": [bridge, *gpus, nic],
        "vm_names": vms,
    }


def _vm(name: str, host: str, gpu: str) -> dict[str, Any]:
    return {
        "name": name,
        "moid": f"vm-{name}",
        "host": host,
        "power_state": "poweredOn",
        "firmware": "efi",
        "num_cpus": 32,
        "memory_mb": 65536,
        "memory_reservation_locked": True,
        "hardware_version": "vmx-19",
        "extra_config": {
            "pciPassthru.use64bitMMIO": "TRUE",
            "pciPassthru.64bitMMIOSizeGB": "256",
            "numa.nodeAffinity": "0",
        },
        "passthrough": [
            {"key": 13000, "backing": "fixed", "id": gpu, "vendor_id": 0x10DE, "device_id": 0x20B5}
        ],
    }


def inventory() -> dict[str, Any]:
    return {
        "vcenter": "vcenter.example.internal",
        "api_version": "7.0.3.0",
        "hosts": [_host(h, [n]) for h, n in zip(HOSTS, NODES, strict=True)],
        "vms": [_vm(n, h, GPU_PCI[0]) for h, n in zip(HOSTS, NODES, strict=True)],
        "round_trips": 1,
    }


def facts(driver: str, drivers: dict[str, str] | None = None) -> dict[str, Any]:
    out = {}
    for node in NODES:
        out[node] = {
            "os": {"LinuxDistribution": {"name": "Ubuntu", "major": 20, "minor": 4}},
            "kernel": "5.4.0-135-generic",
            "nvidia": {
                "driver_version": (drivers or {}).get(node, driver),
                "cuda_version": "11.4",
                "gpu_name": "NVIDIA A100 80GB PCIe",
                "topology": TOPO,
            },
            "ofed_info": "MLNX_OFED_LINUX-5.4-3.1.0.0:",
            "nic": {"driver": "mlx5_core", "firmware_version": "22.31.1014"},
            "packages": {"nvidia-container-toolkit": ["1.14.3-1"]},
        }
    return {"nodes": out}


def checks(driver: str, fail: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Results per node; `fail` maps 'check.id@node' to the observed value that fails it."""
    fail = fail or {}
    catalogue = [
        ("gpu.count", "1", "1", "Give the VM its GPU in the spec and re-run provision"),
        ("gpu.driver.version", driver, "470.82.01", "Install the pinned driver: rerun configure"),
        ("gpu.persistence", "Enabled", "Enabled", "nvidia-smi -pm 1 (role nvidia_driver)"),
        ("gpu.pcie.link", "Gen4 x16", "Gen4 x16", "Reseat the GPU or check the BIOS slot"),
        ("ofed.version", "5.4-3.1.0.0", "5.4-3.1.0.0", "Install MLNX_OFED (role ofed)"),
        ("nic.ats", "ATS_ENABLED=True", "ATS_ENABLED=True", "mlxconfig set ATS_ENABLED=1"),
        ("storage.mount", "/mnt/data nfs vers=3", "/mnt/data nfs vers=3", "Rerun configure"),
        ("net.mtu", "9000", "9000", "Set MTU 9000 (role network)"),
    ]
    out = []
    for node in NODES:
        for check_id, observed, expected, fix in catalogue:
            key = f"{check_id}@{node}"
            bad = key in fail
            out.append(
                {
                    "id": check_id,
                    "node": node,
                    "severity": "error",
                    "status": "fail" if bad else "pass",
                    "observed": fail.get(key, observed),
                    "expected": expected,
                    "fix": fix,
                    "reason": f"saw {fail[key]}, expected {expected}" if bad else "",
                }
            )
    out.append(
        {
            "id": "hv.ats.enabled",
            "node": "esx01",
            "severity": "error",
            "status": "pass",
            "observed": "atsSupport=TRUE",
            "expected": "atsSupport=TRUE",
            "fix": "rackcert provision (sets VMkernel.Boot.atsSupport, reboots in maintenance)",
        }
    )
    out.append(
        {
            "id": "clock.sync",
            "node": "mn-node4",
            "severity": "warning",
            "status": "skip",
            "reason": "chronyc not installed",
            "fix": "apt install chrony",
        }
    )
    return out


def allreduce(world: int = 4, peak_gbps: float = 11.2) -> dict[str, Any]:
    factor = 2 * (world - 1) / world
    points = []
    size = 8
    while size <= 1 << 30:
        t = 30e-6 + size * factor / (peak_gbps * 1e9)
        algbw = size / t / 1e9
        points.append(
            {
                "size_bytes": size,
                "count": size // 4,
                "time_us": round(t * 1e6, 2),
                "algbw_gbps": round(algbw, 4),
                "busbw_gbps": round(algbw * factor, 4),
                "correct": True,
            }
        )
        size *= 2
    return {
        "backend": "horovod",
        "device": "cuda",
        "world_size": world,
        "dtype": "float32",
        "points": points,
        "line_rate_gbps": 100.0,
        "busbw_fraction": round(points[-1]["busbw_gbps"] * 8 / 100.0, 4),
    }


def resnet50(scale: float = 1.0) -> dict[str, Any]:
    base = TABLE2[1] * scale
    points = []
    for nodes, figure in TABLE2.items():
        value = figure * scale
        points.append(
            {
                "nodes": nodes,
                "gpus": nodes,
                "images_per_sec": round(value, 2),
                "images_per_sec_per_gpu": round(value / nodes, 2),
                "spread": round(value * 0.006, 2),
                "speedup": round(value / base, 4),
                "efficiency": round(value / base / nodes, 4),
            }
        )
    return {
        "model": "resnet50",
        "batch_per_gpu": 1024,
        "precision": "fp16",
        "channels_last": True,
        "compiled": False,
        "device": "cuda",
        "points": points,
    }


def write_run(
    root: Path,
    *,
    driver: str = "470.82.01",
    drivers: dict[str, str] | None = None,
    resnet_scale: float = 1.0,
    fail: dict[str, str] | None = None,
    stages: tuple[str, ...] = ("plan", "provision", "configure", "validate", "bench"),
    bench_passed: bool | None = None,
    extra_facts: dict[str, Any] | None = None,
) -> RunDir:
    """A run directory as the stages would leave it (the report stage not yet run)."""
    loaded = load_spec(SPEC)
    run = RunDir.create(root, loaded.spec.metadata.name, loaded.sha256, loaded.text)
    inv = inventory()
    if "plan" in stages:
        run.write_stage("plan", {"observed": inv, "actions": []})
    if "provision" in stages:
        run.write_stage(
            "provision", {"observed_before": inv, "actions": [], "done": [], "observed_after": inv}
        )
    if "configure" in stages:
        run.write_stage(
            "configure",
            {n: {"ok": 42, "changed": 0, "failed": 0, "unreachable": 0} for n in NODES},
        )
    if "validate" in stages:
        doc = facts(driver, drivers)
        for node, more in (extra_facts or {}).items():
            doc["nodes"].setdefault(node, {}).update(more)
        from rackcert.runs import atomic_write_json

        atomic_write_json(run.path / "facts.json", doc)
        results = checks((drivers or {}).get(NODES[0], driver), fail)
        failed = [r for r in results if r["status"] == "fail" and r["severity"] == "error"]
        run.write_stage(
            "validate",
            {
                "results": results,
                "nodes": {n: {"reachable": True} for n in NODES},
                "summary": {"total": len(results), "failed": len(failed)},
            },
            status="failed" if failed else "ok",
            error=f"{len(failed)} checks failed" if failed else None,
        )
        (run.artifacts("validate") / "junit.xml").write_text(
            '<?xml version="1.0"?><testsuite name="rackcert" tests="34"/>\n'
        )
    if "bench" in stages:
        res = resnet50(resnet_scale)
        per_gpu = min(p["images_per_sec_per_gpu"] for p in res["points"])
        passed = per_gpu >= 2500 if bench_passed is None else bench_passed
        reasons = [
            f"ResNet50 scaling efficiency {res['points'][-1]['efficiency']:.3f} at 4 nodes >= 0.9",
            f"ResNet50 {per_gpu:.0f} images/s per GPU "
            + (">= 2500" if passed else "< 2500 (minimum)"),
            "allreduce busbw 0.896 of line rate >= 0.7",
        ]
        run.write_stage(
            "bench",
            {
                "environment": {
                    "gpu": "NVIDIA A100 80GB PCIe",
                    "driver": drivers.get(NODES[0], driver) if drivers else driver,
                    "cuda": "11.4",
                    "nccl": "2.11.4",
                    "torch": "1.12.0",
                    "horovod": "0.28.1",
                },
                "allreduce": allreduce(),
                "resnet50": res,
                "storage": {
                    "readers": 64,
                    "read_mib_s": 2310.5,
                    "latency_ms": {"p50": 1.9, "p99": 7.4},
                },
                "verdict": {"passed": passed, "reasons": reasons},
            },
        )
    time.sleep(0.001)  # distinct run timestamps
    return run


@pytest.fixture
def report_runs(tmp_path: Path):
    """A factory: report_runs(**knobs) -> RunDir under a per-test runs root."""
    root = tmp_path / "runs"

    def make(**knobs: Any) -> RunDir:
        return write_run(root, **knobs)

    make.root = root  # type: ignore[attr-defined]
    return make
