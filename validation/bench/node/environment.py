"""What the benchmark ran on: GPU, driver, NCCL, torch, Horovod, host; recorded with every figure.

Gathered inside the worker (rank 0), so it describes the nodes, not the machine that
launched them. Each probe is optional: a missing tool leaves its field None.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from typing import Any


def _nvidia_smi() -> dict[str, Any]:
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    if not rows:
        return {}
    return {"driver": rows[0][1], "gpu_memory": rows[0][2] if len(rows[0]) > 2 else None}


def _smi(*args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["nvidia-smi", *args], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def gpu_topology() -> dict[str, Any]:
    """`nvidia-smi topo -m` as printed, and each GPU's index by PCI bus id: what the
    controller needs to tell which link a launch's GPUs talk over (NV#, PIX ... SYS).
    Parsed where rackcert runs (validation.bench.links), not here."""
    if not shutil.which("nvidia-smi"):
        return {}
    out: dict[str, Any] = {"topo_m": _smi("topo", "-m")}
    ids = _smi("--query-gpu=index,pci.bus_id", "--format=csv,noheader")
    rows = [[c.strip() for c in ln.split(",")] for ln in (ids or "").splitlines() if "," in ln]
    out["gpu_index_by_bus_id"] = {r[1].lower(): int(r[0]) for r in rows if r[0].isdigit()}
    return out


def device_bus_id(device: Any) -> str | None:
    """The PCI bus id of a torch CUDA device (nvidia-smi's form, lower case), or None."""
    try:
        import torch

        props: Any = torch.cuda.get_device_properties(device)  # pci_* not in torch's stubs
        return (
            f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        ).lower()
    except Exception:  # noqa: BLE001 - a CPU rank, or a torch without these fields
        return None


def collect() -> dict[str, Any]:
    """Versions and hardware of this node, as far as they can be read."""
    env: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        # Where the worker ran from: the nodes' own environment, not the controller's.
        "python_executable": sys.executable,
        "worker_module": os.path.dirname(os.path.abspath(__file__)),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": None,
        "torchvision": None,
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "gpu": None,
        "gpu_count": 0,
        "driver": None,
        "horovod": None,
    }
    try:
        import torch

        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
            env["gpu_count"] = torch.cuda.device_count()
            env["cudnn"] = torch.backends.cudnn.version()
            try:
                env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
            except Exception:  # noqa: BLE001 - a build without NCCL
                env["nccl"] = None
    except ImportError:
        pass
    try:
        import torchvision

        env["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    try:
        import horovod

        env["horovod"] = horovod.__version__
    except ImportError:
        pass
    env.update(_nvidia_smi())
    env.update(gpu_topology())
    return env
