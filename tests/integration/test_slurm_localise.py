"""Issue 34 under a real Slurm (Debian's slurmctld/slurmd 22.05, munge): the slurm_node role
installs the health check slurm.conf names, and `bench --drain` drains the nodes a
localisation verdict names, never an operator's drain. Fixture: tests/support/plugins/slurm.py (SSH
test hosts joined by the role, one controller for every Slurm module of the session; this
module's nodes are node1 and node2)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rackcert.configure.runner import configure
from rackcert.core.localisation import Localisation, read_localisation
from rackcert.core.paths import REPO_ROOT
from rackcert.core.slurm.conf import health_check_script
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import LocaliseRecord
from tests.support.plugins.slurm import SlurmRack, only_on
from validation.bench.localisation.drain import drain_named

PYTHON = sys.executable


def reasons(rack: SlurmRack) -> dict[str, str]:
    out = rack.lab.client("sinfo", "-R", "-h", "-N", "-o", "%N|%E").stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def _with_health_check(rack: SlurmRack, where: Path, rackcert: str):  # noqa: ANN202
    data = yaml.safe_load(rack.loaded.text)
    data["slurm"]["health_check"] = {
        "rackcert": rackcert,
        "spec_on_node": "/etc/rackcert/rack.yaml",
    }
    path = where / "rack-hc.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def _gpus(tools: Path, node: str, count: int) -> None:
    """The node's fake nvidia-smi (CI has no GPU) answers with `count` lab A100s."""
    where = tools / node
    where.mkdir(parents=True, exist_ok=True)
    link = where / "nvidia-smi"
    if not link.exists():
        link.symlink_to(REPO_ROOT / "tests" / "support" / "fakes" / "fake-nvidia-smi")
    config = {"gpus": count, "name": "NVIDIA A100 PCIe 80GB", "driver": "470.82.01",
              "nvlink": True}  # fmt: skip
    (where / "fake-nvidia-smi.json").write_text(json.dumps(config))


def _wait(what, timeout: float = 120.0):  # noqa: ANN001, ANN202 - a predicate
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.5)
    return what()


def test_role_installs_the_health_check_slurm_conf_names_and_slurmd_runs_it(
    slurm_rack: SlurmRack, tmp_path: Path
) -> None:
    rack = slurm_rack
    tools, record = tmp_path / "tools", tmp_path / "health.jsonl"
    _gpus(tools, "node1", 1)  # one GPU of the template's two is gone
    _gpus(tools, "node2", 2)
    # rackcert "installed on the node": this checkout, with the lab's fake GPU tools.
    shim = tmp_path / "rackcert"
    shim.write_text(
        "#!/bin/sh\n"
        + only_on(rack)  # rackcert is on this module's nodes, not on node3 and node4
        + f'exec /usr/bin/env PYTHONPATH={REPO_ROOT} {PYTHON} -m rackcert.cli "$@"'
        f" --tool-path {tools}/{{node}} --health-record {record}\n"
    )
    shim.chmod(0o755)
    program = rack.lab.health_check_program  # what the lab's slurm.conf names
    loaded = _with_health_check(rack, tmp_path, str(shim))
    try:
        joined = configure(loaded, rack.run("hc-join"), tags=["slurm"])
        assert joined.status == "ok", joined.error
        assert program.read_text() == health_check_script(str(shim), "/etc/rackcert/rack.yaml")
        assert stat.S_IMODE(program.stat().st_mode) == 0o755
        for host in rack.hosts:
            assert host.path("/etc/rackcert/rack.yaml").read_text() == loaded.text
        # slurmd runs what the role put there (every 5 s here): node1 drained, node2 not.
        seen = _wait(lambda: reasons(rack).get("node1", "").startswith("rackcert: gpu.count"))
        assert seen, (reasons(rack), rack.lab.node_states())
        assert "node2" not in reasons(rack)
        _gpus(tools, "node1", 2)  # repaired: the next run resumes it
        assert _wait(lambda: "node1" not in reasons(rack)), reasons(rack)
        again = configure(loaded, rack.run("hc-again"), tags=["slurm"])
        assert again.status == "ok" and again.data.totals.changed == 0, again.error
    finally:
        program.write_text("#!/bin/sh\nexit 0\n")
        for node in ("node1", "node2"):
            rack.lab.scontrol("update", f"nodename={node}", "state=resume")
    rack.lab.wait_idle(["node1", "node2"], timeout=30)


def test_role_refuses_a_health_check_whose_rackcert_is_not_on_the_node(
    slurm_rack: SlurmRack, tmp_path: Path
) -> None:
    rack = slurm_rack
    program = rack.lab.health_check_program
    before = program.read_text()
    loaded = _with_health_check(rack, tmp_path, "/opt/rackcert/nowhere/bin/rackcert")
    result = configure(loaded, rack.run("hc-missing"), tags=["slurm"])
    assert result.status != "ok"
    messages = " ".join(f.message for h in result.data.hosts.values() for f in h.failures)
    assert "/opt/rackcert/nowhere/bin/rackcert is not an executable on this node" in messages
    assert program.read_text() == before  # nothing half-installed


def _verdict(findings: list[dict]) -> dict:
    """A bench record's localisation part, as the localisation stage writes it."""
    return {
        "localise": {
            "schema": 1, "nodes_measured": ["node1", "node2"],
            "nodes": [{"node": "node1", "units": [{"unit": "cpu", "gemm_gflops": 40.0}]},
                      {"node": "node2", "units": [{"unit": "cpu", "gemm_gflops": 81.0}]}],
            "links": [{"a": "node1", "b": "node2", "gbps": 0.48}],
            "rules": {"compute": {"median_fraction": 0.7}},
            "findings": findings,
        }
    }  # fmt: skip


def _loc(findings: list[dict]) -> Localisation:
    loc = read_localisation(LocaliseRecord.model_validate(_verdict(findings)["localise"]))
    assert loc is not None
    return loc


SLOW_NODE = {
    "kind": "compute", "target": "node1", "nodes": ["node1"], "id": "bench.compute[node1]",
    "metric": "gemm_gflops", "value": 40.0, "unit": "GFLOP/s", "reference": 81.0,
    "observed": "40.0 GFLOP/s", "expected": ">= 56.7 GFLOP/s",
    "message": "bench.compute[node1]: 40.0 GFLOP/s, 0.49x rack median 81.0 GFLOP/s",
}  # fmt: skip
SLOW_LINK = {
    "kind": "link", "nodes": ["node1", "node2"], "id": "bench.link[node1<->node2]",
    "target": "node1<->node2", "metric": "bandwidth", "value": 0.48, "unit": "Gb/s",
    "observed": "0.48 Gb/s", "expected": ">= 0.5 Gb/s",
    "message": "bench.link[node1<->node2]: 0.48 Gb/s, below 0.5x line rate 1 Gb/s",
}  # fmt: skip


def test_drain_names_the_node_keeps_an_operators_drain_and_resumes_only_its_own(
    slurm_rack: SlurmRack, tmp_path: Path
) -> None:
    rack = slurm_rack
    env = {"SLURM_CONF": str(rack.lab.conf)}
    record = tmp_path / "slurm-drains.jsonl"
    try:
        loc = _loc([SLOW_NODE, SLOW_LINK])
        done = drain_named(loc, record=record, env=env, run="r1")
        assert [(a.node, a.action) for a in done] == [("node1", "drain")]
        # The link finding names a cable: neither end is drained for it.
        assert reasons(rack) == {"node1": "rackcert: " + SLOW_NODE["message"]}
        # Same verdict again: nothing changes; Slurm keeps the reason.
        again = drain_named(loc, record=record, env=env, run="r2")
        assert [(a.node, a.action) for a in again] == [("node1", "kept-own-drain")]

        # An operator drains node2; a verdict that names node2 leaves it as it is, and a
        # clean node1 is resumed (bench drained it, with the reason Slurm still shows).
        rack.lab.scontrol("update", "nodename=node2", "state=drain", "reason=operator: BIOS")
        named2 = dict(SLOW_NODE, nodes=["node2"], message="bench.compute[node2]: slow")
        third = drain_named(_loc([named2]), record=record, env=env)
        assert [(a.node, a.action) for a in third] == [
            ("node1", "resume"),
            ("node2", "kept-operator-drain"),
        ]
        assert reasons(rack) == {"node2": "operator: BIOS"}

        # A drain rackcert's health check made (its reason, not in bench's record) stays too.
        hc_reason = "rackcert: gpu.count: 1"
        rack.lab.scontrol("update", "nodename=node1", "state=drain", f"reason={hc_reason}")
        clean = drain_named(_loc([]), record=record, env=env)
        assert {(a.node, a.action) for a in clean} == {
            ("node1", "kept-operator-drain"),
            ("node2", "kept-operator-drain"),
        }
        assert reasons(rack) == {"node1": hc_reason, "node2": "operator: BIOS"}
    finally:
        for node in ("node1", "node2"):
            rack.lab.scontrol("update", f"nodename={node}", "state=resume")
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(e["node"], e["action"]) for e in lines] == [("node1", "drain"), ("node1", "resume")]
    rack.lab.wait_idle(["node1", "node2"], timeout=30)


def test_drain_without_a_slurm_block_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    spec = tmp_path / "no-slurm.yaml"
    data = yaml.safe_load((REPO_ROOT / "inventories" / "lab.yaml").read_text())
    data.pop("slurm", None)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = subprocess.run(
        [PYTHON, "-m", "rackcert.cli", "bench", str(spec), "--local", "--drain",
         "--runs-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--drain drains Slurm nodes: the spec has no slurm block" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_horovod_under_srun_meets_through_mpi_on_both_nodes(
    slurm_rack: SlurmRack, tmp_path: Path
) -> None:
    """`bench --launcher srun --backend horovod`: srun --mpi=pmix starts one Horovod rank on
    each node, they meet through Open MPI's MPI_Init (PMIx), and the allreduce is right."""
    rack = slurm_rack
    # CPU nodes (CI has no GPU): a template without GPUs, so srun asks for no gres.
    data = yaml.safe_load(rack.loaded.text)
    cpu = {**data["vm_templates"][0], "name": "cpu-only", "gpus": 0}
    cpu.pop("nvlink", None)
    data["vm_templates"].append(cpu)
    for vm in data["vms"]:
        vm["template"] = "cpu-only"
    spec = tmp_path / "cpu.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = subprocess.run(
        [PYTHON, "-m", "rackcert.cli", "bench", str(spec), "--launcher", "srun",
         "--backend", "horovod", "--nodes", "2", "--gpus-per-node", "1", "--quick",
         "--max-bytes", "65536", "--skip", "resnet,storage", "--remote-python", PYTHON,
         "--remote-dir", str(REPO_ROOT), "--runs-dir", str(tmp_path / "runs"), "--json"],
        capture_output=True, text=True, timeout=400, cwd=REPO_ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    # INCOMPLETE (exit 1): no ResNet50 measured, so not every required check is judged.
    assert proc.returncode == 1 and proc.stdout.strip(), proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["launch"]["engine"] == "horovod" and data["launch"]["launcher"] == "srun"
    (launch,) = data["launches"]
    (cmd,) = launch["commands"]
    assert cmd[:2] == ["srun", "--mpi=pmix"] and "--backend horovod" in cmd[-1]
    assert sorted(launch["slurm"]["nodes"]) == ["node1", "node2"]
    ar = data["allreduce"]
    assert ar["world_size"] == 2 and ar["points"] and all(p["correct"] for p in ar["points"])
    assert {r["host"] for r in launch["ranks"]} == {"node1", "node2"}
