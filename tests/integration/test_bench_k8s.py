"""Kubeflow PyTorchJob / MPIJob manifests: rendered from the templates, schema-validated
(envelope against the CRD subset, pod templates with kubernetes-validate, strict), offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rackcert.core.errors import InputError
from validation.bench import k8s

ROOT = Path(__file__).resolve().parents[2]


def _render(kind: str, nodes: int = 2, gpus: int = 2) -> str:
    return k8s.render(
        kind,
        rack="lab",
        nodes=nodes,
        gpus_per_node=gpus,
        image="rackcert-bench:0.1",
        worker_args=["--tasks", "allreduce,resnet"],
    )


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_pytorchjob_valid_and_shaped_for_torchrun(nodes: int) -> None:
    text = _render("PyTorchJob", nodes)
    assert k8s.validate(text) == []
    doc = yaml.safe_load(text)
    replicas = doc["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1
    assert replicas.get("Worker", {"replicas": 0})["replicas"] == nodes - 1
    container = replicas["Master"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"  # the training operator looks for this name
    assert container["command"][:5] == [
        "python", "-m", "torch.distributed.run", "-m", "validation.bench.node.worker"
    ]  # fmt: skip
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert doc["spec"]["nprocPerNode"] == "2"


@pytest.mark.parametrize("nodes", [1, 4])
def test_mpijob_valid_and_runs_horovod_on_every_slot(nodes: int) -> None:
    text = _render("MPIJob", nodes, gpus=4)
    assert k8s.validate(text) == []
    doc = yaml.safe_load(text)
    spec = doc["spec"]
    assert spec["slotsPerWorker"] == 4 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == nodes
    cmd = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[:3] == ["mpirun", "-np", str(nodes * 4)]
    assert cmd[cmd.index("--backend") + 1] == "horovod"


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("replicas: 1\n", "replicas: one\n", "spec/pytorchReplicaSpecs/Master/replicas"),
        ("restartPolicy: Never", "restartPolicy: Sometimes", "restartPolicy"),
        ("imagePullPolicy:", "imagePullPolicyTypo:", "Master pod template"),
        ("mountPath: /dev/shm", "mountPath: 17", "Master pod template"),
        ("nprocPerNode:", "nprocsPerNode:", "Additional properties"),
    ],
)
def test_broken_manifests_are_rejected(old: str, new: str, where: str) -> None:
    text = _render("PyTorchJob").replace(old, new, 1)
    assert text != _render("PyTorchJob")
    problems = k8s.validate(text)
    assert problems and any(where in p for p in problems), problems


def test_write_manifests_writes_both_kinds_and_refuses_an_invalid_one(tmp_path: Path) -> None:
    out = k8s.write_manifests(
        tmp_path, rack="lab", node_counts=[1, 2], gpus_per_node=2, image="x:1", worker_args=[]
    )
    assert sorted(Path(f["path"]).name for f in out["files"]) == [
        "mpijob-1n.yaml", "mpijob-2n.yaml", "pytorchjob-1n.yaml", "pytorchjob-2n.yaml"
    ]  # fmt: skip
    with pytest.raises(InputError, match="PyTorchJob for 1 node.*metadata/namespace"):
        k8s.write_manifests(
            tmp_path / "bad", rack="lab", node_counts=[1], gpus_per_node=1, image="x:1",
            worker_args=[], namespace="Not_A_Namespace",
        )  # fmt: skip


def test_validation_works_without_network(tmp_path: Path) -> None:
    """kubernetes-validate must need no download: run it in a network namespace with no links."""
    path = tmp_path / "job.yaml"
    path.write_text(_render("MPIJob"))
    code = (
        "import sys; from validation.bench import k8s; "
        "p = k8s.validate(open(sys.argv[1]).read()); "
        "assert k8s.kubernetes_validate_available(); print(p); sys.exit(1 if p else 0)"
    )
    proc = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert proc.stdout.strip() == "[]"
