"""A benchmark added as one file: a toy BenchUnit, run, judged, recorded and displayed.

The toy reads this machine's load average (something real to measure, no worker needed),
declares one option, one verdict check and one screen line, and is added to
validation.bench.units.UNITS; nothing else of the bench is told about it: its option is in
`rackcert bench --help`, in BenchOptions and in the worker's arguments from its one
declaration. The bench runs locally with every shipped
benchmark skipped, so the toy is all it measures.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from rich.console import Console

import validation.bench
from rackcert.cli import bench_cmds
from rackcert.cli.display import show_bench
from rackcert.core.errors import InputError
from rackcert.core.results import Status, VerdictCheck
from rackcert.core.runs import RunDir
from rackcert.core.spec import Certification
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import BenchRecord
from validation.bench import units
from validation.bench.node import worker
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions, Engine
from validation.bench.orchestrate import worker_args
from validation.bench.units.base import BenchUnit, Context, check

SHIPPED = {"allreduce", "resnet", "storage", "rdma"}


class LoadResult(BaseModel):
    load_1m: float
    cpus: int
    limit: float


TOY_LIMIT = Opt(
    "toy_limit", "float", "Most 1-minute load per CPU the toy passes", default=1000.0, worker=True
)


class ToyUnit(BenchUnit):
    """The machine's 1-minute load per CPU, judged against --toy-limit (1000: always met)."""

    name = "toy_load"
    after_launches = True
    options = (TOY_LIMIT,)

    def run(self, ctx: Context) -> LoadResult:
        limit = ctx.opts.toy_limit
        return LoadResult(load_1m=os.getloadavg()[0], cpus=os.cpu_count() or 1, limit=limit)

    def checks(self, data: dict[str, Any], cert: Certification) -> list[VerdictCheck]:
        got = (data.get("units") or {}).get(self.name)
        if got is None:
            return [check("toy.load", None, "", "a limit per CPU", "toy not run")]
        per_cpu, want = got["load_1m"] / got["cpus"], f"< {got['limit']:g} per CPU"
        return [check("toy.load", per_cpu < got["limit"], f"{per_cpu:.2f} per CPU", want)]

    def lines(self, data: dict[str, Any]) -> list[str]:
        got = (data.get("units") or {}).get(self.name)
        return [f"toy: load {got['load_1m']:.2f} over {got['cpus']} CPU(s)"] if got else []


@pytest.fixture
def with_toy(monkeypatch: pytest.MonkeyPatch) -> ToyUnit:
    toy = ToyUnit()
    monkeypatch.setattr(units, "UNITS", (*units.UNITS, toy))
    return toy


def _bench(tmp_path: Path, skip: set[str]) -> tuple[BenchRecord, Path]:
    loaded = load_spec("inventories/lab.yaml")
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)
    return validation.bench.run(loaded, run, local=True, skip=skip), run.path / "bench.json"


def test_a_toy_unit_is_run_judged_recorded_and_displayed(with_toy: ToyUnit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _record, path = _bench(tmp_path, SHIPPED)
    # recorded, through the stage's model, read back from bench.json
    on_disk = BenchRecord.model_validate_json(path.read_text())
    assert on_disk.data.units is not None
    got = on_disk.data.units["toy_load"]
    assert got["cpus"] == os.cpu_count() and got["load_1m"] >= 0
    # judged: its check is in the verdict, passed; the shipped ones are not judged
    checks = {c.id: c for c in on_disk.data.verdict.checks}  # type: ignore[union-attr]
    assert checks["toy.load"].status is Status.passed
    assert checks["allreduce.correct"].status is Status.skipped
    # displayed: its line under the bench's output, and its check among the verdict's
    out = io.StringIO()
    show_bench(Console(file=out, width=200), on_disk, path)
    text = out.getvalue()
    assert f"toy: load {got['load_1m']:.2f} over {got['cpus']} CPU(s)" in text
    assert "pass  toy.load: " in text, text


def test_skip_knows_the_toy_and_leaves_it_out(with_toy: ToyUnit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert units.skip_words()[-1] == "toy_load"
    record, _path = _bench(tmp_path, SHIPPED | {"toy_load"})
    assert record.data.units is None  # no unit outside the schema ran
    checks = {c.id: c for c in record.data.verdict.checks}  # type: ignore[union-attr]
    assert checks["toy.load"].status is Status.skipped


def test_skip_refuses_a_word_no_unit_has() -> None:
    with pytest.raises(InputError, match="--skip 'toy_load': choose from allreduce, resnet"):
        units.check_skip({"toy_load"})


def test_the_cli_help_names_every_units_skip_word(with_toy: ToyUnit) -> None:
    """--skip's help is built from UNITS when bench's parameters are built (on its first use,
    rackcert.cli.deferred); so is bootstrap's --bench-skip's."""
    from typer.testing import CliRunner

    from rackcert.cli import app

    words = "allreduce,resnet,rdma,storage,toy_load"
    assert units.skip_words() == tuple(words.split(","))
    assert bench_cmds.skip_help() == f"Comma list of {words} to leave out"
    for command in ("bench", "bootstrap"):
        shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "300"})
        assert shown.exit_code == 0, shown.output
        assert words in shown.output, shown.output


def test_the_toys_one_option_declaration_feeds_the_cli_options_and_worker(
    with_toy: ToyUnit, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from rackcert.cli import app

    # --help: the flag with its whole help, from the declaration
    shown = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "--toy-limit" in shown.output and TOY_LIMIT.help in shown.output
    # BenchOptions: the declared default, a value given, a value of the wrong kind refused
    assert BenchOptions().toy_limit == 1000.0
    assert BenchOptions.of(toy_limit=2).toy_limit == 2.0
    with pytest.raises(InputError, match="--toy-limit 'high': want a number"):
        BenchOptions.of(toy_limit="high")
    # the worker's arguments: the declaration as data, then the flag; the worker reads it
    args = worker_args(BenchOptions.of(toy_limit=5.0), Engine("torch", "cpu", "gloo"), ["x"])
    assert args[-2:] == ["--toy-limit", "5.0"] and "--declared" in args
    assert worker.parse(args).toy_limit == 5.0
    # and the flag reaches the unit: a limit no machine meets fails the toy's check
    skip = ",".join(SHIPPED)
    ran = CliRunner().invoke(
        app,
        ["bench", "inventories/lab.yaml", "--local", "--skip", skip, "--toy-limit", "0",
         "--runs-dir", str(tmp_path), "--json"],
    )  # fmt: skip
    assert ran.exit_code == 1, ran.output
    (path,) = tmp_path.glob("lab/*/bench.json")
    on_disk = BenchRecord.model_validate_json(path.read_text())
    judged = {c.id: c for c in on_disk.data.verdict.checks}  # type: ignore[union-attr]
    assert judged["toy.load"].status is Status.failed
    assert judged["toy.load"].expected == "< 0 per CPU"
