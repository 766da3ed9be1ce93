"""Metric cardinality for a large rack: series, textfile size and write time.

The closing figures of the metrics issue: a synthetic 256-node rack with 8 GPUs per node
(2,048 GPUs), every validate check on every node (guest and hypervisor checks, as
`rackcert validate --list` names them), seven versions per node, facts.json's GPU rows,
drift on a tenth of the nodes (three items each), and bench's figures as bench.json holds
them today (ResNet50 at 1..256 nodes, allreduce, storage per node). The localisation's
figures (per node, per GPU, per link: all n(n-1)/2 pairs) are sized as a separate row,
built as bench.json's `data.localise` (schema 1) and read through the same adapter. Each
row: series (samples) written, bytes, and the time to build the families and write the
textfile atomically (best of --repeat; CPU seconds beside wall seconds, the machine being
shared).

    python benchmarks/metrics_scale.py                 # 256 nodes x 8 GPUs
    python benchmarks/metrics_scale.py --nodes 64 --gpus 4 --promtool
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT))

from rackcert.core.results import (  # noqa: E402
    AllreducePoint,
    AllreduceResult,
    CheckResult,
    ScalingPoint,
    ScalingResult,
    Status,
)
from rackcert.core.stage_records import (  # noqa: E402
    BenchData,
    BenchRecord,
    StorageNode,
    StorageResult,
    ValidateData,
    ValidateNode,
    ValidateRecord,
)
from rackcert.metrics.bench_figures import BenchFigure, figures_of, localise_figures  # noqa: E402
from rackcert.metrics.certified_drift import DriftItem  # noqa: E402
from rackcert.metrics.families import (  # noqa: E402
    Family,
    bench_families,
    health_families,
    validate_families,
)
from rackcert.metrics.textfile import write_textfile  # noqa: E402

STAMP = {
    "rack": "big",
    "spec_sha256": "0" * 64,
    "status": "failed",
    "started_at": "2026-12-04T10:00:00.000000Z",
    "finished_at": "2026-12-04T10:03:00.0Z",
}
VERSIONS = {
    "nvidia_driver": "550.54.15",
    "cuda_driver": "12.4",
    "cuda": "12.4.131",
    "gpu_model": "NVIDIA A100 80GB PCIe",
    "ofed": "MLNX_OFED_LINUX-23.10-1.1.9.0",
    "os": "ubuntu-22.04",
    "gpu_count": "8",
}


def _node(i: int) -> str:
    return f"gpu-node-{i:03d}"


def validate_record(nodes: int, gpus: int) -> tuple[ValidateRecord, dict, list[DriftItem]]:
    from validation.checks import listed

    ids = [d.id for d in listed()]
    results = [
        CheckResult(
            id=cid,
            node=_node(n),
            status=Status.failed if (n + k) % 97 == 0 else Status.passed,
            observed="x",
        )
        for n in range(nodes)
        for k, cid in enumerate(ids)
    ]
    data = ValidateData(
        results=results,
        nodes={_node(n): ValidateNode(reachable=True, versions=VERSIONS) for n in range(nodes)},
    )
    rows = {
        _node(n): [
            {
                "index": str(g),
                "uuid": f"GPU-{n:04x}{g:04x}-0000-0000-0000-000000000000",
                "pci.bus_id": f"00000000:{0x17 + g * 0x10:02X}:00.0",
                "name": "NVIDIA A100 80GB PCIe",
                "driver_version": "550.54.15",
                "vbios_version": "92.00.68.00.01",
                "pcie.link.width.current": "16",
                "pcie.link.gen.current": "4",
            }
            for g in range(gpus)
        ]
        for n in range(nodes)
    }
    drift = [
        DriftItem(_node(n), kind, item, "a", "b", worse)
        for n in range(0, nodes, 10)
        for kind, item, worse in (
            ("version", "nvidia_driver", False),
            ("observed", "gpu.driver", False),
            ("gpu", "00000000:17:00.0 pcie_width", True),
        )
    ]
    return ValidateRecord(**STAMP, data=data), rows, drift


def bench_record(nodes: int, gpus: int) -> BenchRecord:
    scales = [s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if s <= nodes]
    res = ScalingResult(
        batch_per_gpu=256,
        precision="bf16",
        channels_last=True,
        device="cuda",
        points=[
            ScalingPoint(
                nodes=s,
                gpus=s * gpus,
                images_per_sec=6000.0 * s * gpus,
                images_per_sec_per_gpu=6000.0,
            )
            for s in scales
        ],
    )
    ar = AllreduceResult(
        backend="nccl",
        device="cuda",
        world_size=nodes * gpus,
        link="nic",
        points=[
            AllreducePoint(
                size_bytes=1 << 30,
                count=1 << 28,
                time_us=1.0,
                algbw_gbps=10.0,
                busbw_gbps=12.0,
                correct=True,
            )
        ],
        busbw_fraction=0.97,
    )
    storage = StorageResult(
        path="/data",
        nodes=[
            StorageNode(path="/data", node=_node(n), throughput_mb_s=2000.0) for n in range(nodes)
        ],
    )
    return BenchRecord(
        **{**STAMP, "status": "ok"}, data=BenchData(resnet50=res, allreduce=ar, storage=storage)
    )


def localisation(nodes: int, gpus: int) -> list[BenchFigure]:
    """bench.json's data.localise (schema 1, validation.bench.localisation.stages) for the
    rack, read
    through the metrics' one adapter: every node pair's link (round-robin covers all
    n(n-1)/2), every GPU's GEMM and copy figures, every node's inner allreduce, every rank
    of the largest scaling run."""
    loc = {
        "schema": 1,
        "links": [
            {"a": _node(a), "b": _node(b), "gbps": 97.5, "rtt_min_us": 4.1, "error": None}
            for a in range(nodes)
            for b in range(a + 1, nodes)
        ],
        "nodes": [
            {
                "node": _node(n),
                "units": [
                    {
                        "unit": f"GPU{g}",
                        "pci": f"0000:{0x17 + g * 0x10:02x}:00.0",
                        "gemm_gflops": 250000.0,
                        "h2d_gb_s": 25.0,
                        "d2h_gb_s": 26.0,
                    }
                    for g in range(gpus)
                ],
                "allreduce": {"ranks": gpus, "busbw_gb_s": 230.0},
                "error": None,
            }
            for n in range(nodes)
        ],
        "ranks": [
            {
                "label": f"{nodes} node(s), {nodes * gpus} GPU(s): resnet",
                "ranks": [
                    {
                        "rank": n * gpus + g,
                        "host": _node(n),
                        "bus_id": None,
                        "images_per_sec": 6000.0,
                    }
                    for n in range(nodes)
                    for g in range(gpus)
                ],
            }
        ],
    }
    return localise_figures(loc)


def measure(build, where: Path, repeat: int) -> tuple[int, int, float, float]:
    """(series, bytes, best wall s, best CPU s) of building the families and writing them."""
    best_wall = best_cpu = float("inf")
    size = series = 0
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        families: list[Family] = build()
        size = write_textfile(where, families)
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
        series = sum(len(f.samples) for f in families)
    return series, size, best_wall, best_cpu


def serve_scrape(
    root: Path, vrec: ValidateRecord, rows: dict, repeat: int
) -> tuple[float, float, int]:
    """One /metrics body (rackcert.metrics.latest) over a certified run and a newer one of
    the rack, both with facts.json: what each Prometheus scrape of serve costs."""
    import json

    from rackcert.core.runs import RunDir
    from rackcert.metrics.latest import runs_exposition

    for n in range(2):
        run = RunDir.create(root, "big", "0" * 64, "spec")
        (run.path / "facts.json").write_text(
            json.dumps({"nodes": {k: {"gpus": v} for k, v in rows.items()}})
        )
        run.write_stage("validate", vrec.data.model_copy(update={"facts": "facts.json"}))
        if n == 0:
            run.write_stage("report", {"verdict": "PASS"})
    from rackcert.metrics import latest

    best_wall = best_cpu = float("inf")
    size = 0
    for _ in range(repeat):
        latest._CACHE.clear()  # a scrape after a new run: everything read again
        w0, c0 = time.perf_counter(), time.process_time()
        size = len(runs_exposition(root))
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    w0 = time.perf_counter()
    runs_exposition(root)  # nothing changed since: the last body
    print(
        f"serve /metrics, records unchanged since the last scrape: {time.perf_counter() - w0:.4f} s"
    )
    return best_wall, best_cpu, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--promtool", action="store_true", help="Also lint each file (promtool)")
    ap.add_argument("--families", action="store_true", help="Also list series per family")
    args = ap.parse_args()
    vrec, rows, drift = validate_record(args.nodes, args.gpus)
    brec = bench_record(args.nodes, args.gpus)
    loc = localisation(args.nodes, args.gpus)
    one = [r for r in vrec.data.results if r.node == _node(0)][:11]
    cases = {
        "validate (all nodes, GPUs, drift)": lambda: validate_families(
            vrec, "big", gpus=rows, drift=drift, certified="20261201T000000Z"
        ),
        "health check (one node)": lambda: health_families(
            one, "big", _node(0), seconds=3.2, finished=1.8e9, action="none"
        ),
        "bench (bench.json today)": lambda: bench_families(brec, "big"),
        "bench + localisation (node/GPU/link)": lambda: bench_families(
            brec, "big", figures_of(brec.data) + loc
        ),
    }
    tmp = Path(tempfile.mkdtemp(prefix="metrics-scale-"))
    try:
        print(
            f"{args.nodes} nodes x {args.gpus} GPUs = {args.nodes * args.gpus} GPUs;"
            f" {len(vrec.data.results)} check results; best of {args.repeat}"
        )
        print(f"| {'textfile':38} | series | bytes | build+write s | CPU s |")
        print(f"|{'-' * 40}|-------:|------:|--------------:|------:|")
        for name, build in cases.items():
            path = tmp / "rackcert.prom"
            series, size, wall, cpu = measure(build, path, args.repeat)
            lint = ""
            if args.promtool:
                done = subprocess.run(
                    ["promtool", "check", "metrics"],
                    input=path.read_bytes(),
                    capture_output=True,
                    check=False,
                )
                lint = (
                    " promtool ok"
                    if done.returncode == 0
                    else " PROMTOOL: " + (done.stdout + done.stderr).decode()[:200]
                )
            print(f"| {name:38} | {series:,} | {size:,} | {wall:.3f} | {cpu:.3f} |{lint}")
        scrape_s, cpu_s, size = serve_scrape(tmp / "runs", vrec, rows, args.repeat)
        print(
            f"\nserve /metrics over two such runs (certified + latest, drift computed):"
            f" {size:,} bytes in {scrape_s:.3f} s ({cpu_s:.3f} s CPU), best of {args.repeat}"
        )
        if args.families:
            print("\n| family | series |\n|---|---:|")
            for name, build in cases.items():
                for f in build():
                    if f.samples:
                        print(f"| {f.name} ({name.split(' (')[0]}) | {len(f.samples):,} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
