"""Kubeflow PyTorchJob and MPIJob manifests for the same bench, rendered and schema-checked.

For Kubernetes shops the engine is the Kubeflow training operator (PyTorchJob runs
torchrun with its PET_* rendezvous variables) or the MPI operator (MPIJob runs mpirun
with Horovod, as the seed did). Manifests come from jinja2 templates beside this module.

Validation, offline: kubernetes-validate ships the Kubernetes JSON schemas but not the
Kubeflow CRDs. So every replica's pod template is validated with kubernetes-validate as
a core `v1 PodTemplate` (strict: unknown fields are errors), and the envelope against
the subset of the CRDs' openAPIV3Schema (training-operator kubeflow.org_pytorchjobs v1,
mpi-operator kubeflow.org_mpijobs v2beta1) that these manifests use, written below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError

TEMPLATES = Path(__file__).resolve().parent / "templates"
K8S_VERSION = "1.30"

_RUN_POLICY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "activeDeadlineSeconds": {"type": "integer", "minimum": 0},
        "backoffLimit": {"type": "integer", "minimum": 0},
        "cleanPodPolicy": {"type": "string", "enum": ["All", "Running", "None"]},
        "suspend": {"type": "boolean"},
        "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
    },
}


def _replicas(roles: list[str]) -> dict[str, Any]:
    spec = {
        "type": "object",
        "additionalProperties": False,
        "required": ["replicas", "template"],
        "properties": {
            "replicas": {"type": "integer", "minimum": 0, "maximum": 2147483647},
            "restartPolicy": {
                "type": "string",
                "enum": ["Always", "OnFailure", "Never", "ExitCode"],
            },
            "template": {"type": "object"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {r: spec for r in roles},
        "required": roles[:1],
    }


def _envelope(api: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api},
            "kind": {"const": kind},
            "metadata": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"},
                    "namespace": {
                        "type": "string",
                        "pattern": r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                    },
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "spec": spec,
        },
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "PyTorchJob": _envelope(
        "kubeflow.org/v1",
        "PyTorchJob",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["pytorchReplicaSpecs"],
            "properties": {
                "nprocPerNode": {"type": "string"},
                "runPolicy": _RUN_POLICY,
                "elasticPolicy": {"type": "object"},
                "pytorchReplicaSpecs": _replicas(["Master", "Worker"]),
            },
        },
    ),
    "MPIJob": _envelope(
        "kubeflow.org/v2beta1",
        "MPIJob",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["mpiReplicaSpecs"],
            "properties": {
                "slotsPerWorker": {"type": "integer", "minimum": 1},
                "mpiImplementation": {"type": "string", "enum": ["OpenMPI", "Intel", "MPICH"]},
                "runLauncherAsWorker": {"type": "boolean"},
                "sshAuthMountPath": {"type": "string"},
                "launcherCreationPolicy": {
                    "type": "string",
                    "enum": ["AtStartup", "WaitForWorkersReady"],
                },
                "runPolicy": _RUN_POLICY,
                "mpiReplicaSpecs": _replicas(["Launcher", "Worker"]),
            },
        },
    ),
}


@dataclass(frozen=True)
class Manifest:
    kind: str
    nodes: int
    path: Path
    text: str


def render(
    kind: str,
    *,
    rack: str,
    nodes: int,
    gpus_per_node: int,
    image: str,
    worker_args: list[str],
    namespace: str = "default",
) -> str:
    """One manifest as YAML text: kind is PyTorchJob or MPIJob."""
    import jinja2

    template = {"PyTorchJob": "pytorchjob.yaml.j2", "MPIJob": "mpijob.yaml.j2"}[kind]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # YAML, not HTML; values are emitted through tojson
    )
    name = (
        f"rackcert-bench-{rack}-{kind.lower()}-{nodes}n".lower().replace("_", "-")[:63].strip("-")
    )
    return env.get_template(template).render(
        name=name,
        namespace=namespace,
        rack=rack,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        image=image,
        worker_args=worker_args,
    )


def pod_templates(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every replica's pod template, by role."""
    spec = doc.get("spec") or {}
    replicas = spec.get("pytorchReplicaSpecs") or spec.get("mpiReplicaSpecs") or {}
    return [(role, r.get("template") or {}) for role, r in replicas.items()]


def kubernetes_validate_available() -> bool:
    """kubernetes-validate is a dev extra (its schemas weigh ~100 MB); without it the pod
    templates go unchecked and the record says so."""
    import importlib.util

    return importlib.util.find_spec("kubernetes_validate") is not None


def validate(text: str, *, k8s_version: str = K8S_VERSION) -> list[str]:
    """Problems found in one manifest (empty when it is valid). Works offline.

    The envelope is always checked; pod templates only where kubernetes-validate is installed.
    """
    import jsonschema
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [f"not YAML: {exc}"]
    if not isinstance(doc, dict) or doc.get("kind") not in SCHEMAS:
        kind = doc.get("kind") if isinstance(doc, dict) else None
        return [f"not a PyTorchJob or MPIJob: kind {kind!r}"]
    problems = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in jsonschema.Draft202012Validator(SCHEMAS[doc["kind"]]).iter_errors(doc)
    ]
    if not kubernetes_validate_available():
        return problems
    import kubernetes_validate

    for role, template in pod_templates(doc):
        wrapped = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"{doc['metadata'].get('name', 'x')}-{role.lower()}"},
            "template": template,
        }
        try:
            kubernetes_validate.validate(wrapped, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path)
            problems.append(f"{role} pod template {where}: {exc.message}")
    return problems


def write_manifests(
    out_dir: Path,
    *,
    rack: str,
    node_counts: list[int],
    gpus_per_node: int,
    image: str,
    worker_args: list[str],
    namespace: str = "default",
) -> dict[str, Any]:
    """Render and validate PyTorchJob + MPIJob for each node count; raise on an invalid one."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for kind in ("PyTorchJob", "MPIJob"):
        for n in node_counts:
            text = render(
                kind,
                rack=rack,
                nodes=n,
                gpus_per_node=gpus_per_node,
                image=image,
                worker_args=worker_args,
                namespace=namespace,
            )
            problems = validate(text)
            if problems:
                raise InputError(f"rendered {kind} for {n} node(s) is invalid: {problems[0]}")
            path = out_dir / f"{kind.lower()}-{n}n.yaml"
            path.write_text(text)
            files.append({"kind": kind, "nodes": n, "path": str(path), "valid": True})
    return {
        "pod_templates_validated": kubernetes_validate_available(),
        "image": image,
        "namespace": namespace,
        "kubernetes_schema_version": K8S_VERSION,
        "files": files,
    }
