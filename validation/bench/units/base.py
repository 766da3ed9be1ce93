"""A benchmark as one class: `BenchUnit`, and what the orchestration hands it (`Context`).

Why: adding a benchmark used to touch the orchestration, the worker's task list, the
verdict's signature, the record and the display. A unit declares in one place its name
(bench.json's key and `--skip`'s word), the worker tasks it needs in each launch, how its
figures become its part of the record (`run`), its verdict checks (`checks`) and its lines
on the screen (`lines`); `validation.bench.units.UNITS` lists them, and the run loop, the
verdict, `--skip` and the display read that tuple (superbench's one class per benchmark
with a register call is the model). Its options are declared in its class too (`options`):
`rackcert bench --help`, BenchOptions and the worker's arguments are built from them.

    class Toy(BenchUnit):
        name = "toy"
        options = (Opt("toy_limit", "float", "Most load per CPU", default=1000.0),)
        def run(self, ctx): return ToyResult(value=1.0)
        def checks(self, data, cert): return [check("toy.ok", data["toy"]["value"] > 0, ...)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from rackcert.core.results import Status, VerdictCheck
from rackcert.core.runs import RunDir
from rackcert.core.spec import Certification, Spec
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions, Engine, Point


@dataclass
class Context:
    """What a unit's `run` may read: the spec, the options, the run directory, the engine
    the nodes chose, the plan's points and each point's worker answers so far."""

    spec: Spec
    opts: BenchOptions
    run: RunDir
    engine: Engine
    points: list[Point]
    line_rate_gbps: float | None  # the NIC's, for launches across nodes
    progress: Callable[[str], None] = lambda _m: None
    # each launched point with its tasks' answers merged (rank 0's), in launch order
    answers: list[tuple[Point, dict[str, Any]]] = field(default_factory=list)


class BenchUnit:
    """One benchmark. Override what it needs; the defaults do nothing.

    name: bench.json's key (data[name]) and the word `--skip` knows; `skip_word` when a
    unit is left out with another (the references go with `resnet`). `after_launches`: run
    once after every launch (storage, rdma, nccl-tests), else after each launched point,
    from the answers so far (the record is written after every launch)."""

    name: ClassVar[str] = ""
    # its own options, each declared once: `rackcert bench`'s flags, BenchOptions' values
    # and (worker=True) the worker's arguments (validation.bench.node.declare)
    options: ClassVar[tuple[Opt, ...]] = ()
    skip_word: ClassVar[str | None] = None
    after_launches: ClassVar[bool] = False
    help: ClassVar[str] = ""
    # Its blocks of bench.json by key, with their models: the spine's BenchData reads them
    # through these (validation.bench.units gives them to it), so a record read anywhere the
    # bench is imported is typed by the unit that writes it. A key the spine names itself
    # (resnet50, allreduce, storage: the report reads them) is not repeated here.
    parts: ClassVar[dict[str, Any]] = {}
    # The node module that registers its worker tasks (validation.bench.node.tasks), when
    # it is not one of validation.bench.node's own `*_task` modules, which every worker
    # loads: the worker imports it by name before it runs the tasks.
    task_module: ClassVar[str | None] = None
    # Whether a launch record keeps its tasks' raw answers, under each task's name.
    keeps_answer: ClassVar[bool] = False
    # Environment its tasks' launches need on GPUs (the launch's engine not on the CPU).
    gpu_launch_env: ClassVar[dict[str, str]] = {}

    @property
    def word(self) -> str:
        return self.skip_word or self.name

    def tasks(
        self, opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
    ) -> list[str]:
        """The worker tasks this unit needs in `point`'s launches (validation.bench.node.worker)."""
        return []

    def launch_line(self, task: str, answer: dict[str, Any]) -> str | None:
        """A progress line for one of its tasks' answers, as each launch returns."""
        return None

    def run(self, ctx: Context) -> BaseModel | dict[str, Any] | None:
        """Its part of the record (None: nothing to record yet)."""
        return None

    def also(self, ctx: Context, result: Any) -> dict[str, Any]:
        """Other top-level keys of the record it fills beside data[name] (rarely any)."""
        return {}

    def say(self, ctx: Context, result: Any) -> list[str]:
        """Progress lines once it has run."""
        return []

    def checks(self, data: dict[str, Any], cert: Certification) -> list[VerdictCheck]:
        """Its verdict checks, from bench.json's data (so a recorded run is judged again the
        same way); a check it could not judge is skipped with the reason."""
        return []

    def lines(self, data: dict[str, Any]) -> list[str]:
        """Its lines under the scaling table in `rackcert bench`'s output."""
        return []


def check(
    id_: str, ok: bool | None, observed: str, expected: str, reason: str = ""
) -> VerdictCheck:
    """A verdict check: ok None is "not judged" (skipped), with the reason."""
    status = Status.skipped if ok is None else (Status.passed if ok else Status.failed)
    return VerdictCheck(id=id_, status=status, observed=observed, expected=expected, reason=reason)


def dump(result: BaseModel | dict[str, Any] | None) -> Any:
    """A unit's result as the record holds it."""
    return result.model_dump(mode="json") if isinstance(result, BaseModel) else result
