"""What `rackcert bench` can be told, and the shapes of a plan: one place for the options.

Why apart from the orchestration: the CLI, the units and the orchestration all read these;
a unit that imported the orchestration to learn its options would climb back up.

Two kinds of options: the run's own (where, how many, which launcher) are BenchOptions'
fields here; a benchmark's own (ResNet's --batch, the sweep's --max-bytes, storage's
--storage-dir) are declared once in its unit's file (`BenchUnit.options`,
validation.bench.node.declare.Opt) and held in `values`, read as attributes all the same:

    opts = BenchOptions.of(local=True, batch=64)   # or BenchOptions(local=True, values={...})
    opts.batch, opts.max_bytes                     # 64, None (its declared default)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError
from rackcert.core.spec import Vm
from validation.bench.node.declare import Opt

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
    skip: set[str] = field(default_factory=set)
    known_hosts: Path | None = None
    # known_hosts ON the nodes for mpirun's hops: the one configure's ssh_trust role fills
    node_known_hosts: str | None = "~/.ssh/known_hosts"
    remote_python: str | None = None  # default: the spec's guest.dl_venv/bin/python
    remote_dir: str | None = None  # a rackcert checkout on the nodes (default: none, the
    # worker is installed in the nodes' environment by configure's dl_runtime role)
    launcher: str = "auto"  # auto | torchrun | horovodrun | mpirun | srun
    reservation: str | None = None  # srun: run inside this Slurm reservation
    network_interface: str | None = None  # default: the spec's network.interface
    rdzv_port: int | None = None  # default: network.firewall.launcher_port_range's first
    image: str = "rackcert-bench:latest"
    timeout_s: float = 1800.0
    # inductor/Triton cache on the nodes, kept between runs: default under the DL environment
    # (guest.dl_venv remotely, this interpreter's prefix locally); "" turns it off
    compile_cache: str | None = None
    # the benchmarks' own options, by name (each declared once in its unit's file)
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Every choice is checked here, once, whoever builds the options (CLI or library)."""
        for name, flag, allowed in _CHOICES:
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise InputError(f"{flag} {value!r}: choose one of {', '.join(allowed)}")
        self.values = {k: checked(opt_named(k), v) for k, v in self.values.items()}
        if self.gpus and not self.local:
            raise InputError("--gpus sweeps GPU counts on this machine: use it with --local")
        if self.reservation and self.launcher != "srun":
            raise InputError("--reservation is a Slurm reservation: use it with --launcher srun")

    def __getattr__(self, name: str) -> Any:
        """A benchmark's option by name: its value, else its declared default."""
        if name.startswith("_") or "values" not in self.__dict__:
            raise AttributeError(name)
        try:
            opt = declared()[name]
        except KeyError:
            raise AttributeError(f"BenchOptions has no option {name!r}") from None
        return self.__dict__["values"].get(name, opt.default)

    @classmethod
    def of(cls, **given: Any) -> BenchOptions:
        """Options from keywords: the run's fields and the benchmarks' options alike."""
        return cls().with_(**given)

    def with_(self, **given: Any) -> BenchOptions:
        """A copy with these keywords set (a field, or a declared option into `values`)."""
        own = {f.name for f in fields(self)}
        unit = {k: v for k, v in given.items() if k not in own}
        base = {k: v for k, v in given.items() if k in own}
        return replace(self, **base, values={**self.values, **base.get("values", {}), **unit})

    def given(self, opts: list[Opt]) -> list[tuple[Opt, Any]]:
        """Each of `opts` with its value here (its default when not given)."""
        return [(opt, getattr(self, opt.name)) for opt in opts]


_declarations: Callable[[], dict[str, Opt]] | None = None


def declarations_from(source: Callable[[], dict[str, Opt]]) -> None:
    """Where BenchOptions learns the benchmarks' options: validation.bench.units registers
    its `declared_options` when it is imported. A registration, not an import from here,
    because the units sit above this module (they read BenchOptions): importing them here
    would run back up and close a cycle. `source` is asked at each use, so a unit added to
    UNITS later is known too."""
    global _declarations
    _declarations = source


def declared() -> dict[str, Opt]:
    """Every benchmark's options by name (validation.bench.units.UNITS' declarations)."""
    if _declarations is None:
        raise RuntimeError("no benchmark's options are known yet: import validation.bench.units")
    return _declarations()


def opt_named(name: str) -> Opt:
    opt = declared().get(name)
    if opt is None:
        raise InputError(f"bench option {name!r}: no benchmark declares it")
    return opt


def checked(opt: Opt, value: Any) -> Any:
    """`value` for `opt`, as its declaration allows (one line naming the flag if not)."""
    if value is None:
        return None
    want = {"int": "an integer", "float": "a number", "bool": "true or false"}.get(opt.kind)
    if opt.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError(f"{opt.flag} {value!r}: want {want}")
    if opt.kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{opt.flag} {value!r}: want {want}")
        value = float(value)
    if opt.kind == "bool" and not isinstance(value, bool):
        raise InputError(f"{opt.flag} {value!r}: want {want}")
    if opt.kind in ("str", "path") and not isinstance(value, str | Path):
        raise InputError(f"{opt.flag} {value!r}: want a {'path' if opt.kind == 'path' else 'word'}")
    if opt.kind == "path":
        value = Path(value)
    if opt.choices and value not in opt.choices:
        raise InputError(f"{opt.flag} {value!r}: choose one of {', '.join(opt.choices)}")
    if opt.minimum is not None and value < opt.minimum:
        raise InputError(f"{opt.flag} {value!r}: want at least {opt.minimum:g}")
    return value


# (field, the CLI flag that sets it, its choices): the run's own options, read by
# __post_init__ (a benchmark's choices are in its declaration).
_CHOICES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("launcher", "--launcher", LAUNCHERS),
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
