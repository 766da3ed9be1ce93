"""Run directories for the report tests, written through RunDir like the real stages do.

Every record is built from the stage models (rackcert.core.stage_records) and the producers'
own pieces (discovery's Inventory models, configure's ConfigureHost, validate's summary and
JUnit, bench's scaling arithmetic and verdict), never as a hand-written dict, so the
report tests read exactly the shapes that occur.

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

from rackcert.core.observed import (
    Inventory,
    ObservedHost,
    ObservedVm,
    PassthroughDevice,
    PciDevice,
)
from rackcert.core.results import (
    AllreducePoint,
    AllreduceResult,
    CheckResult,
    ScalingPoint,
    ScalingResult,
    Severity,
    Status,
)
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import (
    BenchData,
    ConfigureData,
    ConfigureHost,
    PlanData,
    ProvisionData,
    StorageNode,
    StorageResult,
    ValidateData,
    ValidateNode,
)
from validation.bench import verdict
from validation.bench.units.allreduce import busbw_fraction
from validation.bench.units.resnet import scaling
from validation.junit import junit_xml
from validation.runner import _summary as validate_summary

REPO = Path(__file__).resolve().parents[3]
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


def _host(name: str, vms: list[str]) -> ObservedHost:
    gpus = [
        PciDevice(
            id=pci,
            vendor_id=0x10DE,
            device_id=0x20B5,
            class_id=0x0302,
            vendor_name="NVIDIA Corporation",
            device_name="GA100 [A100 PCIe 80GB]",
            numa_node=0 if i < 2 else 1,
            passthru_capable=True,
            passthru_enabled=True,
            passthru_active=True,
        )
        for i, pci in enumerate(GPU_PCI)
    ]
    nic = PciDevice(
        id="0000:4b:00.0",
        vendor_id=0x15B3,
        device_id=0x101D,
        class_id=0x0200,
        vendor_name="Mellanox Technologies",
        device_name="MT2892 Family [ConnectX-6 Dx]",
        numa_node=0,
        passthru_capable=True,
        passthru_enabled=True,
        passthru_active=True,
    )
    bridge = PciDevice(id="0000:00:00.0", vendor_id=0x8086, device_id=0x09A2, class_id=0x0600)
    return ObservedHost(
        name=name,
        moid=f"host-{name}",
        address=f"{name}.example.internal",
        vendor="Dell Inc.",
        model="PowerEdge R750xa",
        esxi_version="7.0.3",
        esxi_build="19193900",
        connection_state="connected",
        power_state="poweredOn",
        ats_enabled=True,
        numa_nodes=2,
        pci_devices=[bridge, *gpus, nic],
        vm_names=vms,
    )


def _vm(name: str, host: str, gpu: str) -> ObservedVm:
    return ObservedVm(
        name=name,
        moid=f"vm-{name}",
        host=host,
        power_state="poweredOn",
        firmware="efi",
        num_cpus=32,
        memory_mb=65536,
        memory_reservation_locked=True,
        hardware_version="vmx-19",
        extra_config={
            "pciPassthru.use64bitMMIO": "TRUE",
            "pciPassthru.64bitMMIOSizeGB": "256",
            "numa.nodeAffinity": "0",
        },
        passthrough=[
            PassthroughDevice(
                key=13000, backing="fixed", id=gpu, vendor_id=0x10DE, device_id=0x20B5
            )
        ],
    )


def inventory() -> Inventory:
    """What provision.discovery returns for the seed's four R750xa hosts, one VM on each."""
    return Inventory(
        vcenter="vcenter.example.internal",
        api_version="7.0.3.0",
        hosts=[_host(h, [n]) for h, n in zip(HOSTS, NODES, strict=True)],
        vms=[_vm(n, h, GPU_PCI[0]) for h, n in zip(HOSTS, NODES, strict=True)],
        round_trips=1,
    )


def facts(driver: str, drivers: dict[str, str] | None = None) -> dict[str, Any]:
    """facts.json as validation/facts.py writes it: pyinfra facts per node."""
    out = {}
    for node in NODES:
        drv = (drivers or {}).get(node, driver)
        out[node] = {
            "hostname": node,
            "os": {
                "name": "Ubuntu",
                "major": 20,
                "minor": 4,
                "release_meta": {"ID": "ubuntu", "VERSION_ID": "20.04"},
            },
            "kernel": "5.4.0-135-generic",
            "arch": "x86_64",
            "kernel_modules": {"nvidia_peermem": {"size": 16384}},
            "sysctl": {"kernel.version": "#152-Ubuntu SMP", "net.core.rmem_max": 268435456},
            "mounts": {"/mnt/data": {"device": "powerscale:/ifs/data/imagenet", "type": "nfs"}},
            "deb_packages": {
                "nvidia-container-toolkit": ["1.14.3-1"],
                "cuda-toolkit-11-4": ["11.4.4-1"],
                "mlnx-ofed-kernel-utils": ["5.4-OFED.5.4.3.1.0.1"],
            },
            "rpm_packages": {},
            "nics": {
                "ens3f0np0": {
                    "mtu": "9000",
                    "mac": "b8:ce:f6:00:00:01",
                    "state": "up",
                    "speed_mbps": "100000",
                    "driver": "mlx5_core",
                    "pci": "0000:0b:00.0",
                }
            },
            "gpus": [
                {
                    "index": "0",
                    "pci.bus_id": "00000000:0B:00.0",
                    "name": "NVIDIA A100 80GB PCIe",
                    "uuid": f"GPU-{node}-0",
                    "serial": "1322021000001",
                    "vbios_version": "92.00.45.00.05",
                    "driver_version": drv,
                    "memory.total": "81920",
                }
            ],
        }
    return {"collector": "pyinfra", "seconds": 1.7, "nodes": out}


def checks(driver: str, fail: dict[str, str] | None = None) -> list[CheckResult]:
    """Results per node; `fail` maps 'check.id@node' to the observed value that fails it."""
    fail = fail or {}
    catalogue = [
        ("node.reachable", "ssh ok", "reachable", "Check the VM is up and the SSH key works"),
        ("gpu.count", "1 GPU(s)", "1 GPU(s)", "Check the VM's passthrough devices"),
        ("gpu.model", "NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB", "Correct the profile"),
        ("gpu.driver", driver, "470.82.01", "Install the pinned driver (rackcert configure)"),
        ("gpu.cuda.toolkit", "11.4", "11.4", "Install CUDA 11.4 (rackcert configure)"),
        ("gpu.persistence", "GPU0=Enabled", "Enabled", "nvidia-smi -pm 1 (role nvidia_driver)"),
        ("gpu.pcie.link", "GPU0=Gen4 x16", "Gen4 x16", "Reseat the GPU or check the BIOS slot"),
        ("gpu.nvlink.active", "GPU0-GPU1 NV12", "NV# between the pair", "Seat the NVLink bridge"),
        ("ofed.version", "5.4-3.1.0.0", "5.4-3.1.0.0", "Install MLNX_OFED (role ofed)"),
        ("nic.ats", "ATS_ENABLED=True(1)", "ATS_ENABLED=True", "mlxconfig set ATS_ENABLED=1"),
        ("storage.mount", "/mnt/data nfs vers=3", "/mnt/data nfs vers=3", "Rerun configure"),
        ("net.mtu", "9000", "9000", "Set MTU 9000 (role network)"),
    ]
    out = []
    for node in NODES:
        for check_id, observed, expected, fix in catalogue:
            key = f"{check_id}@{node}"
            bad = key in fail
            out.append(
                CheckResult(
                    id=check_id,
                    node=node,
                    severity=Severity.error,
                    status=Status.failed if bad else Status.passed,
                    observed=fail.get(key, observed),
                    expected=expected,
                    fix=fix,
                    reason=f"saw {fail[key]}, expected {expected}" if bad else "",
                )
            )
    out.append(
        CheckResult(
            id="hv.ats.enabled",
            node="esx01",
            status=Status.passed,
            observed="atsSupport=TRUE",
            expected="atsSupport=TRUE",
            fix="rackcert provision (sets VMkernel.Boot.atsSupport, reboots in maintenance)",
        )
    )
    out.append(
        CheckResult(
            id="time.sync",
            node="mn-node4",
            severity=Severity.warning,
            status=Status.skipped,
            reason="chronyc not installed",
            fix="apt install chrony",
        )
    )
    return out


def allreduce(world: int = 4, peak_gbps: float = 11.2) -> AllreduceResult:
    factor = 2 * (world - 1) / world
    points = []
    size = 8
    while size <= 1 << 30:
        t = 30e-6 + size * factor / (peak_gbps * 1e9)
        algbw = size / t / 1e9
        points.append(
            AllreducePoint(
                size_bytes=size,
                count=size // 4,
                time_us=round(t * 1e6, 2),
                algbw_gbps=round(algbw, 4),
                busbw_gbps=round(algbw * factor, 4),
                correct=True,
            )
        )
        size *= 2
    return AllreduceResult(
        backend="horovod",
        device="cuda",
        world_size=world,
        points=points,
        line_rate_gbps=100.0,
        busbw_fraction=busbw_fraction([p.model_dump() for p in points], 100.0),
    )


def resnet50(scale: float = 1.0) -> ScalingResult:
    """The seed's Table 2 through bench's own speedup/efficiency arithmetic."""
    rows = [
        {
            "nodes": nodes,
            "gpus": nodes,
            "images_per_sec": round(figure * scale, 2),
            "images_per_sec_per_gpu": round(figure * scale / nodes, 2),
            "spread": round(figure * scale * 0.006, 2),
        }
        for nodes, figure in TABLE2.items()
    ]
    return ScalingResult(
        model="resnet50",
        batch_per_gpu=1024,
        precision="fp16",
        channels_last=True,
        compiled=False,
        device="cuda",
        points=[ScalingPoint(**row) for row in scaling(rows)],
    )


def storage() -> StorageResult:
    """What validation.bench.units.storage.run_storage records for two nodes."""
    per_node = [
        StorageNode(
            path="/mnt/data",
            files=1024,
            bytes_in_files=1 << 30,
            cache_drop_requested=True,
            readers=16,
            block_bytes=1 << 20,
            duration_s=10.0,
            reads=11000,
            bytes_read=11534336000,
            throughput_mb_s=1153.4,
            iops=1100.0,
            latency_ms={"p50": 1.9, "p90": 4.0, "p99": 7.4, "p99.9": 9.0, "max": 12.0},
            node=node,
        )
        for node in NODES[:2]
    ]
    return StorageResult(
        note="the spec's mount point",
        path="/mnt/data",
        throughput_mb_s=sum(n.throughput_mb_s for n in per_node),
        nodes=per_node,
    )


def bench_data(
    resnet_scale: float, driver: str, drivers: dict[str, str] | None, bench_passed: bool | None
) -> BenchData:
    """bench.json's data, its verdict judged by validation.bench.verdict as bench does.

    bench_passed forces the outcome through the threshold (a floor of 1 or of 1e9 images/s
    per GPU), so a test can record a verdict the figures alone would not earn."""
    loaded = load_spec(SPEC)
    res, ar, st = resnet50(resnet_scale), allreduce(), storage()
    cert = loaded.spec.certification
    if bench_passed is not None:
        floor = 1.0 if bench_passed else 1e9
        cert = cert.model_copy(update={"resnet50_images_per_gpu_min": floor})
    raw = [{"world_size": p.gpus, "loss_finite": True} for p in res.points]
    judged = verdict.judge(
        cert,
        ar,
        res,
        raw,
        st.model_dump(),
        judge_link=True,
        required=loaded.spec.required_checks(),
    )
    return BenchData(
        mode="ssh",
        judge_link=True,
        thresholds=cert,
        environment={
            "hostname": NODES[0],
            "python": "3.8.10",
            "torch": "1.12.0",
            "cuda": "11.3",
            "nccl": "2.10.3",
            "gpu": "NVIDIA A100 80GB PCIe",
            "gpu_count": 1,
            "driver": (drivers or {}).get(NODES[0], driver),
            "horovod": "0.28.1",
        },
        allreduce=ar,
        resnet50=res,
        storage=st,
        verdict=judged,
    )


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
        run.write_stage("plan", PlanData(observed=inv))
    if "provision" in stages:
        run.write_stage("provision", ProvisionData(observed_before=inv, observed_after=inv))
    if "configure" in stages:
        hosts = [ConfigureHost(name=n, ok=42, skipped=3, tasks_done=45) for n in NODES]
        run.write_stage(
            "configure",
            ConfigureData(
                rc=0,
                totals={"hosts": 4, "ok": 4},
                hosts={h.name: h for h in hosts},
            ),
        )
    if "validate" in stages:
        doc = facts(driver, drivers)
        for node, more in (extra_facts or {}).items():
            doc["nodes"].setdefault(node, {}).update(more)
        from rackcert.core.runs import atomic_write_json

        atomic_write_json(run.path / "facts.json", doc)
        results = checks(driver, fail)
        summary = validate_summary(results, 1.0)
        nodes = {
            n: ValidateNode(reachable=True, status="passed" if summary["ok"] else "failed")
            for n in NODES
        }
        run.write_stage(
            "validate",
            ValidateData(results=results, nodes=nodes, summary=summary, facts="facts.json"),
            status="ok" if summary["ok"] else "failed",
            error=None if summary["ok"] else f"{summary['error_failures']} checks failed",
        )
        (run.artifacts("validate") / "junit.xml").write_bytes(junit_xml(results))
    if "bench" in stages:
        run.write_stage("bench", bench_data(resnet_scale, driver, drivers, bench_passed))
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


@pytest.fixture(scope="session")
def built_pair(tmp_path_factory):
    """Two runs of one rack with reports built (A: json, html, pdf; B: json, html).

    A is the certified baseline, B is after an upgrade (driver 470.103.01) with ResNet50 10%
    slower. Read-only: tests that change files copy the run directory first."""
    from rackcert.report.build import build_report

    root = tmp_path_factory.mktemp("report-pair") / "runs"
    run_a = write_run(root)
    run_b = write_run(root, driver="470.103.01", resnet_scale=0.9)
    build_report(run_a)
    build_report(run_b, formats=("json", "html"))  # one PDF is enough: rendering costs ~5 s
    return root, run_a, run_b


def copy_run(run: RunDir, dest_root: Path) -> RunDir:
    """A byte-identical copy of a run directory (for tests that tamper with it)."""
    import shutil

    target = dest_root / run.path.parent.name / run.path.name
    shutil.copytree(run.path, target)
    return RunDir.open(target)


def start_serve(root: Path, *extra: str):
    """`rackcert serve --port 0` on `root` as a real process; returns (process, base URL)."""
    import os
    import re
    import subprocess
    import sys

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rackcert.cli",
            "serve",
            "--runs-dir",
            str(root),
            "--port",
            "0",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 90
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            break
        lines.append(line)
        match = re.search(r"(http://[\d.]+:\d+/)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    proc.wait()
    raise AssertionError(f"rackcert serve did not start: {''.join(lines)}")


def stop(proc) -> None:
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
