"""What `rackcert bench` can be told, and the shapes of a plan: one place for the options.

Why apart from the orchestration: the CLI, the units and the orchestration all read these;
a unit that imported the orchestration to learn its options would climb back up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.core.spec import Vm

BACKENDS = ("auto", "nccl", "gloo", "horovod")


LAUNCHERS = ("auto", "torchrun", "horovodrun", "mpirun", "srun")


@dataclass
class BenchOptions:
    """Everything `rackcert bench` can be told; defaults are the certification run."""

    local: bool = False
    gpus: list[int] | None = None
    nodes: list[int] | None = None
    vms: list[str] | None = None
    gpus_per_node: int | None = None
    backend: str = "auto"
    quick: bool = False
    naive: bool | None = None
    references: bool | None = None
    compile: bool | None = None
    compile_mode: str | None = None
    compile_optimizer: bool | None = None
    batch: int | None = None
    model: str | None = None
    image_size: int | None = None
    precision: str | None = None
    max_bytes: int | None = None
    skip: set[str] = field(default_factory=set)
    storage_dir: Path | None = None
    synthetic_data: bool | None = None
    line_rate_gbps: float | None = None
    known_hosts: Path | None = None
    # known_hosts ON the nodes for mpirun's hops: the one configure's ssh_trust role fills
    node_known_hosts: str | None = "~/.ssh/known_hosts"
    remote_python: str | None = None  # default: the spec's guest.dl_venv/bin/python
    remote_dir: str | None = None  # a rackcert checkout on the nodes (default: none, the
    # worker is installed in the nodes' environment by configure's dl_runtime role)
    launcher: str = "auto"  # auto | torchrun | horovodrun | mpirun | srun
    reservation: str | None = None  # srun: run inside this Slurm reservation
    network_interface: str | None = None  # default: the spec's network.interface
    rdzv_port: int = 29400
    image: str = "rackcert-bench:latest"
    timeout_s: float = 1800.0
    nccl_tests: str | None = None  # all_reduce_perf to run (default: PATH, then the role's)
    storage_engine: str = "auto"  # fio when installed, else pread
    # inductor/Triton cache on the nodes, kept between runs: default under the DL environment
    # (guest.dl_venv remotely, this interpreter's prefix locally); "" turns it off
    compile_cache: str | None = None

    def __post_init__(self) -> None:
        """Every choice is checked here, once, whoever builds the options (CLI or library)."""
        for name, flag, allowed in _CHOICES:
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise InputError(f"{flag} {value!r}: choose one of {', '.join(allowed)}")
        if self.gpus and not self.local:
            raise InputError("--gpus sweeps GPU counts on this machine: use it with --local")
        if self.reservation and self.launcher != "srun":
            raise InputError("--reservation is a Slurm reservation: use it with --launcher srun")


# (field, the CLI flag that sets it, its choices): one table, read by __post_init__.
_CHOICES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("precision", "--precision", ("fp16", "bf16", "fp32")),
    (
        "compile_mode",
        "--compile-mode",
        ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
    ),
    ("launcher", "--launcher", LAUNCHERS),
    ("storage_engine", "--storage-engine", ("auto", "fio", "pread")),
    ("backend", "--backend", BACKENDS),
)


@dataclass(frozen=True)
class Point:
    """One weak-scaling measurement to launch."""

    nodes: int
    gpus: int
    procs_per_node: int
    vms: tuple[Vm, ...] = ()


@dataclass(frozen=True)
class Engine:
    worker_backend: str  # torch | horovod
    device: str  # cuda | cpu
    name: str  # nccl | gloo | horovod


Progress = Callable[[str], None]
