"""A benchmark is whole in its file (issue 55): its worker task registers with the worker, its
result model sits beside it, and neither orchestrate, the worker nor the spine names it.

Nothing is started here: the worker's registry and argument parsing, the launch's arguments,
and bench.json's typed blocks are read in this process. tests/integration/
test_bench_unit_launched.py launches a toy unit's task in real Gloo ranks.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from rackcert.core import stage_records
from rackcert.core.stage_records import BenchData
from validation.bench import units
from validation.bench.node import tasks, worker
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units.base import BenchUnit
from validation.bench.units.nccl_tests import NcclTestsResult

# validation.bench's package names a lazy attribute `orchestrate`: the module itself
orchestrate = importlib.import_module("validation.bench.orchestrate")
SHIPPED_TASKS = {"allreduce", "resnet", "naive", "plain", "horovod_ref"}
CPU = Engine("torch", "cpu", "gloo")


@tasks.task("toy_echo")
def toy_echo(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    return {"world": comm.world_size}


class Echo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    world: int


class EchoUnit(BenchUnit):
    name = "toy_echo"
    parts: ClassVar[dict[str, Any]] = {"toy_echo": Echo}
    task_module = __name__

    def tasks(
        self, opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
    ) -> list[str]:
        return ["toy_echo"]


@pytest.fixture
def with_echo(monkeypatch: pytest.MonkeyPatch) -> EchoUnit:
    echo = EchoUnit()
    monkeypatch.setattr(units, "UNITS", (*units.UNITS, echo))
    return echo


def _string_literals(source: str) -> set[str]:
    nodes = ast.walk(ast.parse(source))
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_the_shipped_tasks_register_from_their_own_files() -> None:
    loaded = tasks.load()
    assert set(loaded) >= SHIPPED_TASKS
    assert {loaded[t].__module__ for t in SHIPPED_TASKS} == {
        "validation.bench.node.allreduce_task",
        "validation.bench.node.resnet_task",
    }


def test_neither_the_worker_nor_orchestrate_names_a_task_or_unit() -> None:
    # the worker's run: what it runs is what was registered (its --tasks default aside)
    assert not SHIPPED_TASKS & _string_literals(inspect.getsource(worker.run))
    named = SHIPPED_TASKS | {u.name for u in units.UNITS} | {"resnet50"}
    assert not named & _string_literals(Path(inspect.getfile(orchestrate)).read_text())


def test_the_spine_keeps_no_units_result_model() -> None:
    for moved in ("NcclTestsResult", "RdmaResult", "References", "NaiveVsDefault", "SideBySide"):
        assert not hasattr(stage_records, moved), moved
    assert not {"nccl_tests", "rdma", "references", "naive_vs_default"} & set(
        BenchData.model_fields
    )


def test_a_units_task_module_reaches_the_worker_which_registers_its_task(
    with_echo: EchoUnit,
) -> None:
    args = orchestrate.worker_args(BenchOptions(), CPU, ["toy_echo"])
    assert args[:6] == ["--tasks", "toy_echo", "--device", "cpu", "--task-module", __name__]
    parsed = worker.parse(args)
    assert parsed.task_module == [__name__]
    assert tasks.load(parsed.task_module)["toy_echo"] is toy_echo
    # the worker loads the active units' task modules; a unit left out sends none
    skipped = BenchOptions.of(skip={"toy_echo"})
    assert "--task-module" not in orchestrate.worker_args(skipped, CPU, ["resnet"])


def test_the_worker_refuses_a_task_nobody_registered_before_the_ranks_meet() -> None:
    with pytest.raises(SystemExit, match="--tasks 'toy_nothing': no such task"):
        worker.run(worker.parse(["--tasks", "toy_nothing", "--device", "cpu"]))


def test_a_task_name_two_functions_claim_is_refused() -> None:
    def other(comm: Any, args: argparse.Namespace) -> None:
        return None

    with pytest.raises(ValueError, match="'allreduce' is registered twice"):
        tasks.task("allreduce")(other)


def test_a_units_block_is_typed_by_its_model_while_it_is_a_unit(with_echo: EchoUnit) -> None:
    data = BenchData.model_validate({"toy_echo": {"world": 2}, "nccl_tests": {"skipped": True}})
    assert data.part("toy_echo") == Echo(world=2)
    assert isinstance(data.part("nccl_tests"), NcclTestsResult)
    assert data.model_dump(mode="json")["toy_echo"] == {"world": 2}
    with pytest.raises(ValidationError, match="bogus"):
        BenchData.model_validate({"toy_echo": {"world": 2, "bogus": 1}})


def test_a_block_no_unit_claims_is_kept_as_it_was_written() -> None:
    data = BenchData.model_validate({"toy_echo": {"world": 2, "bogus": 1}})
    assert data.part("toy_echo") == {"world": 2, "bogus": 1}
