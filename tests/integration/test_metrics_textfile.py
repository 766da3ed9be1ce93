"""Prometheus textfiles from validate, the health check and bench: the format, hostile node
strings, drift from the certified run, and atomic writes. promtool (Debian's prometheus
package) lints every file rackcert writes here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rackcert.core.results import CheckResult, Status
from rackcert.core.runs import RunDir, list_runs
from rackcert.core.stage_records import BenchRecord, ValidateNode
from rackcert.metrics.families import (
    bench_families,
    exposition,
    health_families,
    validate_families,
)
from rackcert.metrics.labels import LABEL_CAP
from tests.support.metrics_textfile import samples
from tests.support.metrics_textfile import validate_record as _record
from tests.support.validate_local import H200_SPEC, ROOT, rackcert

H200_BENCH = ROOT / "docs" / "evidence" / "h200-bench.json"  # a real one-H200 bench.json


def promtool_check(text: bytes | str) -> None:
    """`promtool check metrics` must find nothing: format errors and lint problems both."""
    data = text.encode() if isinstance(text, str) else text
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=data, capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


HOSTILE = (
    'n1"} 1\nrackcert_check_failed{check="x",node="evil",severity="error",spec="lab"} 1\n'
    "# TYPE evil gauge\n\\"
)


def test_hostile_node_strings_are_escaped_bounded_and_add_no_series() -> None:
    long = "x" * 100_000
    names = [HOSTILE, long, "bad\udcffutf8", "\x1b]52;c;AAAA\x07", "node1"]
    results = [
        CheckResult(id="gpu.driver", node=n, status=Status.failed, observed=HOSTILE) for n in names
    ]
    nodes = {n: ValidateNode(versions={"nvidia_driver": HOSTILE}) for n in names}
    text = exposition(validate_families(_record(results, nodes), "lab"))
    promtool_check(text)
    got = samples(text)
    checks = [s for s in got if s[0] == "rackcert_check_failed"]
    assert len(checks) == len(names)  # one series per result, none smuggled in
    assert not any(s[1].get("node") == "evil" for s in got)
    assert not any(name.startswith("evil") for name, _, _ in got)
    for _, labels, _ in got:
        assert all(len(v) <= LABEL_CAP for v in labels.values()), labels
    # The hostile value survives as text (controls shown), not as structure.
    assert any(s[1]["node"].startswith('n1"} 1\\n') for s in checks)
    assert sum(1 for s in got if s[0] == "rackcert_node_version_info") == len(names)


def test_equal_label_sets_merge_to_the_worse_value() -> None:
    """Two results that cap to the same labels must not write a duplicate series (promtool
    and node_exporter both refuse a file with one): the failing one wins."""
    same = "y" * 500
    results = [
        CheckResult(id="gpu.count", node=same + "a", status=Status.passed),
        CheckResult(id="gpu.count", node=same + "b", status=Status.failed),
    ]
    text = exposition(validate_families(_record(results, {}), "lab"))
    promtool_check(text)
    checks = [s for s in samples(text) if s[0] == "rackcert_check_failed"]
    assert len(checks) == 1 and checks[0][2] == 1.0


@pytest.mark.parametrize(
    ("action", "drained"),
    [("drain", 1.0), ("kept-own-drain", 1.0), ("kept-operator-drain", 0.0), ("resume", 0.0)],
)
def test_health_check_drained_is_rackcerts_own_drain_only(action: str, drained: float) -> None:
    """An operator's drain is not rackcert's: the alert says what the health check did."""
    results = [CheckResult(id="gpu.count", node="n1", status=Status.failed)]
    text = exposition(health_families(results, "lab", "n1", seconds=1.0, finished=1.0,
                                      action=action))  # fmt: skip
    promtool_check(text)
    got = {s[0]: s[2] for s in samples(text)}
    assert got["rackcert_health_check_drained"] == drained
    assert got["rackcert_health_check_ok"] == 0.0


def test_bench_families_from_a_real_h200_record() -> None:
    record = BenchRecord.model_validate(json.loads(H200_BENCH.read_text()))
    text = exposition(bench_families(record, record.rack))
    promtool_check(text)
    got = {(n, tuple(sorted(lab.items()))): v for n, lab, v in samples(text)}
    point = record.data.resnet50.points[0]  # type: ignore[union-attr]
    key = [k for k in got if k[0] == "rackcert_bench_resnet50_images_per_second"]
    assert len(key) == 1 and got[key[0]] == pytest.approx(point.images_per_sec)
    assert dict(key[0][1])["gpus"] == "1"
    # One rank moves nothing: no allreduce busbw series rather than a 0 that would alert.
    assert not any(k[0].startswith("rackcert_bench_allreduce") for k in got)
    verdict = [v for k, v in got.items() if k[0] == "rackcert_bench_verdict_passed"]
    assert verdict == [1.0 if record.data.verdict.passed else 0.0]  # type: ignore[union-attr]


def _fake_tools(tmp_path: Path, cfg: dict) -> str:
    from tests.support.plugins.validate import FAKE_SMI, H200_FIXTURES

    copy = tmp_path / "fakes-copy"
    if not copy.exists():
        import shutil

        shutil.copytree(FAKE_SMI.parent, copy / "fakes", symlinks=True)
        shutil.copytree(H200_FIXTURES, copy / "fixtures" / "h200")
    d = tmp_path / "fake-tools" / "h200-node1"
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "nvidia-smi").exists():
        (d / "nvidia-smi").symlink_to(copy / "fakes" / FAKE_SMI.name)
    (d / "fake-nvidia-smi.json").write_text(json.dumps(cfg))
    return str(tmp_path / "fake-tools" / "{node}")


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory):
    """Two validate runs of the H200 spec with the fake nvidia-smi: the first certified,
    the second after a driver upgrade that also left GPU0's link at x8."""
    tmp = tmp_path_factory.mktemp("metrics")
    runs, prom = tmp / "runs", tmp / "textfiles"
    prom.mkdir()

    def validate(cfg: dict, out: str, *more: str):
        return rackcert(
            "validate", str(H200_SPEC), "--local", "--runs-dir", str(runs), "--check", "gpu",
            "--tool-path", _fake_tools(tmp, cfg), "--metrics-textfile", str(prom / out), *more,
        )  # fmt: skip

    first = validate({}, "first.prom")
    assert first.returncode == 0, first.stdout + first.stderr
    RunDir.open(list_runs(runs)[-1].path).write_stage("report", {"verdict": "PASS"})
    cfg = {"driver": "585.10.01", "fields": {"pcie.link.width.current": "8"}}
    second = validate(cfg, "second.prom")
    as_json = validate(cfg, "third.prom", "--json")
    return first, second, as_json, prom


def test_validate_writes_a_clean_textfile_atomically(upgraded) -> None:
    first, _second, _j, prom = upgraded
    text = (prom / "first.prom").read_text()
    promtool_check(text)
    got = samples(text)
    assert {s[1]["check"] for s in got if s[0] == "rackcert_check_failed"} >= {
        "gpu.count",
        "gpu.driver",
        "gpu.pcie.link",
    }
    assert all(s[2] == 0.0 for s in got if s[0] == "rackcert_check_failed")
    gpu = [s[1] for s in got if s[0] == "rackcert_gpu_info"]
    assert len(gpu) == 1 and gpu[0]["UUID"].startswith("GPU-") and gpu[0]["pci_bus_id"]
    compared = [s[1:] for s in got if s[0] == "rackcert_drift_compared"]
    assert compared == [({"spec": "h200-local", "certified_run": ""}, 0.0)]
    # Readable by node_exporter's own user; no temp file left beside it.
    assert (prom / "first.prom").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in prom.iterdir()) == ["first.prom", "second.prom", "third.prom"]


def test_drift_is_a_metric_and_a_line_of_validate_output(upgraded) -> None:
    _first, second, as_json, prom = upgraded
    assert second.returncode == 1 and "Traceback" not in second.stderr
    out = second.stdout
    assert "drift from the certified run" in out
    assert "drift h200-node1 version nvidia_driver: 580.159.04 -> 585.10.01" in out
    assert "drift h200-node1 check gpu.pcie.link: pass -> fail (worse)" in out
    text = (prom / "second.prom").read_text()
    promtool_check(text)
    drift = {(s[1]["kind"], s[1]["item"]): s for s in samples(text) if s[0] == "rackcert_drift"}
    version = drift[("version", "nvidia_driver")]
    assert version[1]["before"] == "580.159.04" and version[1]["after"] == "585.10.01"
    assert version[2] == 0.0  # changed, not by itself worse
    width = [s for k, s in drift.items() if k[0] == "gpu" and k[1].endswith("pcie_width")]
    assert len(width) == 1 and width[0][1]["after"] == "8" and width[0][2] == 1.0
    items = [s for s in samples(text) if s[0] == "rackcert_drift_items"]
    assert items == [("rackcert_drift_items", {"spec": "h200-local", "node": "h200-node1"},
                      float(len(drift)))]  # fmt: skip
    failed = {s[1]["check"]: s[2] for s in samples(text) if s[0] == "rackcert_check_failed"}
    assert failed["gpu.driver"] == 1.0 and failed["gpu.pcie.link"] == 1.0
    assert failed["gpu.count"] == 0.0
    doc = json.loads(as_json.stdout)
    assert {(d["kind"], d["item"]) for d in doc["drift"]} == set(drift)


def test_health_check_textfile(tmp_path: Path) -> None:
    prom = tmp_path / "health.prom"
    done = rackcert(
        "validate", str(H200_SPEC), "--health-check", "--node", "h200-node1",
        "--tool-path", _fake_tools(tmp_path, {"gpus": 0}),
        "--health-record", str(tmp_path / "h.jsonl"), "--metrics-textfile", str(prom),
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    text = prom.read_text()
    promtool_check(text)
    got = {(s[0], s[1].get("check", "")): s for s in samples(text)}
    assert got[("rackcert_health_check_failed", "gpu.count")][2] == 1.0
    assert got[("rackcert_health_check_ok", "")][2] == 0.0
    assert got[("rackcert_health_check_drained", "")][2] == 0.0  # not under Slurm: no drain
    assert got[("rackcert_health_check_ok", "")][1]["node"] == "h200-node1"


def test_bad_textfile_path_is_one_line_before_any_work(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for cmd, name, why in (
        ("validate", "metrics.txt", "reads only *.prom"),
        ("validate", "missing/m.prom", "does not exist"),
        ("bench", "metrics.txt", "reads only *.prom"),
    ):
        where = str(tmp_path / name)
        done = rackcert(cmd, str(H200_SPEC), "--local", "--runs-dir", str(runs),
                        "--metrics-textfile", where)  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and "Traceback" not in done.stderr
    assert not runs.exists()  # refused before a run directory was made


# bench.json data.localise as validation.bench.localisation.stages (schema 1) documents it.
LOCALISE = {
    "schema": 1,
    "links": [
        {"a": "lab-node1", "b": "lab-node2", "gbps": 0.194, "rtt_min_us": 41.0, "error": None},
        {"a": "lab-node1", "b": "lab-node3", "gbps": None, "error": "iperf3: refused"},
        {"a": HOSTILE, "b": "lab-node3", "gbps": 0.08, "error": None},
    ],
    "nodes": [
        {"node": "lab-node1", "device": "cuda", "error": None,
         "units": [{"unit": "GPU0", "pci": "0000:17:00.0", "gemm_gflops": 9.1,
                    "h2d_gb_s": 25.1, "d2h_gb_s": 26.0}],
         "allreduce": {"ranks": 2, "busbw_gb_s": 120.5}},
        {"node": "lab-node2", "error": "probe timed out", "units": [], "allreduce": None},
    ],
    "ranks": [{"label": "2 node(s), 4 GPU(s): resnet",
               "ranks": [{"rank": 0, "host": "lab-node1", "bus_id": None,
                          "images_per_sec": 41.2}]}],
}  # fmt: skip


def test_localisation_figures_through_the_one_adapter() -> None:
    from rackcert.metrics.bench_figures import localise_figures

    record = BenchRecord.model_validate(json.loads(H200_BENCH.read_text()))
    figures = localise_figures(LOCALISE)
    text = exposition(bench_families(record, record.rack, figures))
    promtool_check(text)
    got = samples(text)
    links = {(s[1]["node"][:8], s[1]["peer"]): s[2] for s in got
             if s[0] == "rackcert_bench_link_bandwidth_bytes_per_second"}  # fmt: skip
    assert links == {("lab-node", "lab-node2"): 0.194e9 / 8, ('n1"} 1\\n', "lab-node3"): 0.08e9 / 8}
    h2d = [s for s in got if s[0] == "rackcert_bench_host_to_device_bytes_per_second"]
    assert [(s[1]["node"], s[1]["gpu"], s[2]) for s in h2d] == [
        ("lab-node1", "0000:17:00.0", 25.1e9)
    ]
    node_ar = [s[2] for s in got if s[0] == "rackcert_bench_node_allreduce_busbw_bytes_per_second"]
    assert node_ar == [120.5e9]
    ranks = [s[1] for s in got if s[0] == "rackcert_bench_rank_images_per_second"]
    assert [(r["node"], r["rank"]) for r in ranks] == [("lab-node1", "0")]
    assert not any(s[0].startswith("evil") for s in got)
    assert localise_figures({**LOCALISE, "schema": 2}) == []  # another schema: no guessing


def test_bench_drift_lines_and_textfile_against_the_certified_bench(tmp_path: Path) -> None:
    """What `rackcert bench` does after its figures: compare with the certified run's bench,
    write its textfile, print one line per figure beyond tolerance (none with --json)."""
    from rackcert.core.stage_records import BenchData, StorageNode, StorageResult
    from rackcert.metrics.record_metrics import bench_drift_lines

    root = tmp_path / "runs"

    def bench_run(mb_s: float) -> tuple[RunDir, BenchRecord]:
        run = RunDir.create(root, "lab", "a" * 64, "spec")
        node = StorageNode(path="/d", node="n1", throughput_mb_s=mb_s)
        record = run.write_stage("bench", BenchData(storage=StorageResult(nodes=[node])))
        assert isinstance(record, BenchRecord)
        return run, record

    certified, _ = bench_run(2000.0)
    certified.write_stage("report", {"verdict": "PASS"})
    run, record = bench_run(1000.0)
    prom = tmp_path / "bench.prom"
    lines = bench_drift_lines(record, run, root, prom, quiet=False)
    assert lines[0].startswith(f"figures against the certified run {certified.path.name}: 1")
    assert lines[1] == "drift n1 figure storage_read_bytes_per_second: 2e+09 -> 1e+09 (worse)"
    text = prom.read_text()
    promtool_check(text)
    drift = [s for s in samples(text) if s[0] == "rackcert_drift"]
    assert [(s[1]["kind"], s[2]) for s in drift] == [("figure", 1.0)]
    assert bench_drift_lines(record, run, root, None, quiet=True) == []
