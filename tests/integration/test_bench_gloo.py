"""`rackcert bench --local` for real: torchrun, 2 Gloo CPU processes, through the CLI.

One bench run (module fixture) is read by several tests: allreduce correctness and the
nccl-tests arithmetic on measured times, a tiny ResNet (32 px, 2 timed steps) through
the same DDP code path as the GPU run, the naive comparison, storage reads, manifests,
the verdict, and the run record. A second launch with 3 ranks checks busbw = algbw x 4/3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from validation.bench.node import compilecache

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventories" / "lab.yaml"


def rackcert(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("bench")
    (tmp / "data").mkdir()
    cache_files = compilecache.count_files(Path(compilecache.default_dir(sys.prefix)))
    proc = rackcert(
        "bench", str(LAB), "--local", "--quick", "--backend", "gloo", "--gpus", "2",
        "--naive", "--model", "resnet18", "--max-bytes", "65536",
        "--storage-dir", str(tmp / "data"), "--synthetic-data",
        "--runs-dir", str(tmp / "runs"), "--json",
    )  # fmt: skip
    # INCOMPLETE (exit 1): one local point judges neither busbw over the link nor scaling.
    assert proc.returncode == 1, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    record = json.loads((Path(out["run"]) / "bench.json").read_text())
    return {
        "out": out,
        "record": record,
        "data": record["data"],
        "tmp": tmp,
        "cache_files_before_the_run": cache_files,
    }


def test_record_is_the_bench_stage_with_a_verdict(bench: dict[str, Any]) -> None:
    rec = bench["record"]
    assert rec["stage"] == "bench" and rec["status"] == "ok" and rec["error"] is None
    v = rec["data"]["verdict"]
    assert v["verdict"] == "INCOMPLETE" and v["passed"] is False and v["reasons"] == []
    assert {c["id"] for c in v["checks"] if c["status"] == "skip" and c["required"]} == {
        "allreduce.busbw_fraction",  # a local run talks inside this machine, not over the link
        "resnet50.scaling_efficiency",  # one scale measured
        "resnet50.images_per_gpu",  # the lab sets no threshold
    }
    ids = [c["id"] for c in rec["data"]["verdict"]["checks"]]
    assert "allreduce.correct" in ids and "resnet50.images_per_gpu" in ids
    env = rec["data"]["environment"]
    assert env["torch"] and env["gpu_count"] == 0


def test_allreduce_two_gloo_ranks_correct_and_nccl_tests_arithmetic(bench: dict[str, Any]) -> None:
    ar = bench["data"]["allreduce"]
    assert ar["backend"] == "gloo" and ar["world_size"] == 2 and ar["device"] == "cpu"
    sizes = [p["size_bytes"] for p in ar["points"]]
    assert sizes[0] == 8 and sizes[-1] == 65536 and len(sizes) == 14
    for p in ar["points"]:
        assert p["correct"] is True
        assert p["time_us"] > 0
        assert p["algbw_gbps"] == pytest.approx(p["size_bytes"] / (p["time_us"] * 1e-6) / 1e9)
        assert p["busbw_gbps"] == pytest.approx(p["algbw_gbps"] * 2 * (2 - 1) / 2)
        assert p["count"] * 4 == p["size_bytes"]


def test_tiny_resnet_two_ranks_through_ddp(bench: dict[str, Any]) -> None:
    sc = bench["data"]["resnet50"]
    assert sc["model"] == "resnet18" and sc["backend"] == "gloo"
    (point,) = sc["points"]
    assert point["gpus"] == 2 and point["images_per_sec"] > 0
    assert point["images_per_sec_per_gpu"] == pytest.approx(point["images_per_sec"] / 2)
    launches = bench["data"]["launches"]
    # One process per configuration: the sweep, the default loop, the naive loop.
    assert [ln["tasks"] for ln in launches] == [["allreduce"], ["resnet"], ["naive"]]
    launch = launches[1]
    assert all(ln["exit_warning"] is None for ln in launches)
    assert bench["data"]["warnings"] == []
    run = launch["resnet"]
    assert run["world_size"] == 2 and run["loss_finite"] is True
    assert (
        run["config"]["image_size"] == 32
        and run["config"]["intervals"] * run["config"]["steps_per_interval"] == 1
    )
    assert len(run["per_rank_mean"]) == 2 and all(v > 0 for v in run["per_rank_mean"])
    assert "torch.distributed.run" in launch["commands"][0]
    assert point["warmup_s"] == pytest.approx(run["warmup_s"])  # recorded per point
    # One timed interval: the point says so, and no spread is claimed from it.
    assert point["intervals"] == run["config"]["intervals"] == 1
    # Every rank built the same weights from the seed: compared, not broadcast.
    assert run["config"]["start_sync"].startswith("same on every rank")
    # Where the launch's time went, rank 0's clock: its start, then each phase.
    phases = launch["phases"]
    assert list(phases) == ["started_s", "connect_s", "environment_s", "resnet_s"]
    assert all(v is not None and v >= 0 for v in phases.values())
    assert sum(phases.values()) <= launch["wall_s"] + 0.5
    # The ranks kept their compile cache under the DL environment (here: this interpreter's).
    cache = launch["compile_cache"]
    assert cache["dir"] == f"{sys.prefix}/var/cache/rackcert/compile"
    assert cache["from"] == "rackcert" and "error" not in cache, cache
    # files_before is the cache's file count as the launch started: no fewer than this test
    # counted before the run, no more than there are now (a cache only grows).
    now = compilecache.count_files(Path(cache["dir"]))
    assert bench["cache_files_before_the_run"] <= cache["files_before"] <= now, (cache, now)


def test_naive_loop_measured_in_a_process_of_its_own(bench: dict[str, Any]) -> None:
    nd = bench["data"]["naive_vs_default"]
    assert nd["naive"]["config"]["precision"] == "fp32"
    assert nd["naive"]["config"]["channels_last"] is False
    assert nd["ratio"] == pytest.approx(
        nd["default"]["images_per_sec"] / nd["naive"]["images_per_sec"]
    )


def test_storage_reads_synthetic_files(bench: dict[str, Any]) -> None:
    (st,) = bench["data"]["storage"]["nodes"]  # local: one node, the same shape as ssh runs
    assert st["synthetic"] is True and st["errors"] == 0 and st["reads"] > 0
    assert st["latency_ms"]["p50"] <= st["latency_ms"]["p99"] <= st["latency_ms"]["max"]
    assert list((bench["tmp"] / "data" / "rackcert-synthetic").iterdir())


def test_manifests_rendered_and_validated(bench: dict[str, Any]) -> None:
    k8s = bench["data"]["kubernetes"]
    assert k8s["pod_templates_validated"] is True
    kinds = {(f["kind"], f["nodes"]) for f in k8s["files"]}
    assert {("PyTorchJob", 1), ("PyTorchJob", 2), ("MPIJob", 2)} <= kinds
    assert all(Path(f["path"]).is_file() for f in k8s["files"])


def declared(**values: Any) -> list[str]:
    """The worker's arguments for these benchmark options, from their units' declarations
    (as a launch passes them: declarations as data, then the flags)."""
    from validation.bench.node.declare import worker_argv
    from validation.bench.units import declared_options

    return worker_argv((declared_options()[k], v) for k, v in values.items())


def test_three_ranks_busbw_is_four_thirds_of_algbw(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
         "-m", "validation.bench.node.worker", "--tasks", "allreduce", "--device", "cpu",
         *declared(max_bytes=4096), "--iters", "2", "--warmup-iters", "1"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    from validation.bench.launch import parse_result

    result = parse_result(proc.stdout)
    assert result is not None and result["world_size"] == 3
    for p in result["allreduce"]["points"]:
        assert p["correct"] is True
        assert p["busbw_gbps"] == pytest.approx(p["algbw_gbps"] * 4 / 3)


def test_failed_launch_is_one_line_and_recorded(tmp_path: Path) -> None:
    proc = rackcert(
        "bench", str(LAB), "--local", "--quick", "--backend", "gloo", "--gpus", "1",
        "--model", "no_such_model", "--skip", "allreduce,storage",
        "--runs-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 1
    err = proc.stderr.strip()
    assert err.startswith("error: bench launch") and "no_such_model" in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    (record,) = tmp_path.glob("lab/*/bench.json")
    data = json.loads(record.read_text())
    assert data["status"] == "failed" and "no_such_model" in data["error"]


def test_settled_steps_then_the_median_window_on_two_ranks() -> None:
    """After the warm-up every rank runs the same untimed steps for about --settle-s (rank
    0's count, agreed through a gather: a rank that stopped alone would hang the next
    collective), then the figure is the median window, the mean beside it."""
    import statistics

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "validation.bench.node.worker", "--device", "cpu", "--tasks", "resnet", "--quick",
         *declared(model="resnet18"), "--settle-s", "0.3", "--intervals", "3"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RACKCERT_RESULT "))
    run = json.loads(line.split(" ", 1)[1])["resnet"]
    assert run["world_size"] == 2 and run["config"]["settle_s"] == 0.3
    assert run["settle_steps"] >= 5 and run["settle_steps"] % 5 == 0 and run["settle_s"] >= 0.3
    totals = run["interval_totals"]
    assert len(totals) == 3
    assert run["images_per_sec"] == pytest.approx(statistics.median(totals))
    assert run["images_per_sec_mean"] == pytest.approx(statistics.fmean(totals))
    assert run["under_load"] == {} and run["compile_cache"] is None  # CPU: eager, no NVML
