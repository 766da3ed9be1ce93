"""A benchmark with a worker task, added as one file: launched, recorded and judged.

The toy is whole in this file: its node side (a worker task, registered with the worker by
name: validation.bench.node.tasks) gathers every rank's host name through the ranks' real
collectives; its controller side (a BenchUnit) asks for that task in each launch, names
this module as its task module, types its block of bench.json with its own model, keeps
its raw answer in each launch record and judges that every rank answered. Nothing else of
the bench is told about it (not orchestrate, not the worker, not the spine's
stage_records): it is added to validation.bench.units.UNITS, and `rackcert bench --local`
runs real torchrun launches of Gloo CPU ranks with every shipped benchmark skipped.
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

import validation.bench
from rackcert.core.results import Status, VerdictCheck
from rackcert.core.runs import RunDir
from rackcert.core.spec import Certification
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import BenchRecord, bench_parts
from validation.bench import units
from validation.bench.node.tasks import task
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units.base import BenchUnit, Context, check

pytestmark = pytest.mark.integration  # real torchrun launches of Gloo ranks

SHIPPED = {"allreduce", "resnet", "storage", "rdma"}
TASK = "toy_hosts"


# -- the toy's node side: runs in every rank, imported by the worker as --task-module -----
@task(TASK)
def toy_hosts(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Every rank's host name, gathered through the launch's collectives."""
    return {"hosts": comm.allgather_object(socket.gethostname()), "world": comm.world_size}


# -- the toy's controller side ---------------------------------------------------------------
class ToyPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ranks: int
    answered: int


class ToyHosts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    points: list[ToyPoint]


class ToyHostsUnit(BenchUnit):
    """Each launch's ranks, each answering with its host: judged all answered."""

    name = "toy_hosts"
    parts: ClassVar[dict[str, Any]] = {"toy_hosts": ToyHosts}
    task_module = __name__
    keeps_answer = True

    def tasks(
        self, opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
    ) -> list[str]:
        return [TASK]

    def launch_line(self, task: str, answer: dict[str, Any]) -> str | None:
        return f"{len(answer['hosts'])} rank(s) answered"

    def run(self, ctx: Context) -> ToyHosts | None:
        pts = [ToyPoint(ranks=p.gpus, answered=len(r[TASK]["hosts"])) for p, r in ctx.answers]
        return ToyHosts(points=pts) if pts else None

    def checks(self, data: dict[str, Any], cert: Certification) -> list[VerdictCheck]:
        got = data.get(self.name)
        if got is None:
            return [check("toy.hosts", None, "", "every rank answers", "toy not run")]
        short = [p for p in got["points"] if p["answered"] != p["ranks"]]
        seen = ", ".join(f"{p['answered']}/{p['ranks']}" for p in got["points"])
        return [check("toy.hosts", not short, seen, "every rank answers")]


@pytest.fixture
def with_toy(monkeypatch: pytest.MonkeyPatch) -> ToyHostsUnit:
    toy = ToyHostsUnit()
    monkeypatch.setattr(units, "UNITS", (*units.UNITS, toy))
    return toy


def test_a_toy_units_worker_task_is_launched_recorded_and_judged(
    with_toy: ToyHostsUnit, tmp_path: Path
) -> None:
    loaded = load_spec("inventories/lab.yaml")
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)
    said: list[str] = []
    validation.bench.run(loaded, run, local=True, skip=SHIPPED, progress=said.append)
    on_disk = BenchRecord.model_validate_json((run.path / "bench.json").read_text())
    data = on_disk.data
    # launched: one launch per point (1 and 2 Gloo CPU ranks), the worker ran the toy's task
    assert [ln.tasks for ln in data.launches] == [[TASK], [TASK]]
    assert "--task-module" in data.launches[0].commands[0]
    kept = [ln.model_extra[TASK] for ln in data.launches if ln.model_extra]
    assert [len(a["hosts"]) for a in kept] == [1, 2] and [a["world"] for a in kept] == [1, 2]
    assert all(h == socket.gethostname() for a in kept for h in a["hosts"])
    assert f"  {TASK}: 2 rank(s) answered" in said
    # recorded: its block at its own key, read back through its model
    block = data.part("toy_hosts")
    assert isinstance(block, ToyHosts)
    assert [(p.ranks, p.answered) for p in block.points] == [(1, 1), (2, 2)]
    assert data.units is None
    # judged: its check passed; the shipped ones were not judged
    checks = {c.id: c for c in data.verdict.checks}  # type: ignore[union-attr]
    assert checks["toy.hosts"].status is Status.passed
    assert checks["toy.hosts"].observed == "1/1, 2/2"
    assert checks["allreduce.correct"].status is Status.skipped


def test_the_toys_block_is_the_spines_only_while_the_toy_is_a_unit(
    with_toy: ToyHostsUnit, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "toy_hosts" in bench_parts()
    monkeypatch.setattr(units, "UNITS", tuple(u for u in units.UNITS if u is not with_toy))
    assert "toy_hosts" not in bench_parts() and "nccl_tests" in bench_parts()
