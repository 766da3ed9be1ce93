"""Run stages in order over one run directory, resumably, and always end with a report.

The pipeline knows nothing about vSphere or Ansible: a stage is a name and a
callable that records its own `<stage>.json` and raises a RackcertError when it
fails. What the pipeline adds is the order, the resume rule (skip stages
whose record says ok), the stop-on-failure rule, and the final report stage,
which runs even after a failure so the report shows what was done.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text

from rackcert.core.errors import RackcertError
from rackcert.core.runs import RunDir

StageFn = Callable[[RunDir], None]


@dataclass(frozen=True)
class Stage:
    name: str
    run: StageFn
    title: str = ""


@dataclass
class PipelineResult:
    run: RunDir
    done: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    failed: str | None = None
    error: RackcertError | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failed is None


def completed(run: RunDir) -> set[str]:
    """Stages whose record says ok: what --resume skips."""
    return {s for s in run.stages() if (run.read_stage(s) or {}).get("status") == "ok"}


def _record_failure(run: RunDir, stage: str, error: RackcertError, started: str) -> None:
    """Make sure a failed stage has a failed record, without overwriting its own."""
    record = run.read_stage(stage)
    if record is None or record.get("started_at", "") < started:
        run.write_stage(stage, {}, status="failed", error=str(error), started_at=started)


def run_pipeline(
    stages: Sequence[Stage],
    run: RunDir,
    *,
    resume: bool = False,
    final: Stage | None = None,
    console: Console | None = None,
) -> PipelineResult:
    """Run `stages` in order, then `final` (the report) whatever happened before it."""
    from rackcert.core.runs import utc_now

    console = console or Console(highlight=False)
    result = PipelineResult(run=run)
    skip = completed(run) if resume else set()
    total = len(stages) + (1 if final else 0)
    for index, stage in enumerate(stages, 1):
        label = f"[{index}/{total}] {stage.name}"
        if stage.name in skip:
            _line(console, (f"{label}: already recorded ok, skipped (--resume)", "dim"))
            result.resumed.append(stage.name)
            continue
        _heading(console, f"{label} {stage.title}".strip())
        started, t0 = utc_now(), time.monotonic()
        try:
            stage.run(run)
        except RackcertError as exc:
            result.seconds[stage.name] = time.monotonic() - t0
            _record_failure(run, stage.name, exc, started)
            result.failed, result.error = stage.name, exc
            _line(console, (f"x {stage.name} failed: ", "red"), str(exc))
            break
        result.seconds[stage.name] = time.monotonic() - t0
        result.done.append(stage.name)
        _line(console, (f"ok {stage.name}", "green"), f" ({result.seconds[stage.name]:.1f} s)")
    if final is not None:
        _heading(console, f"[{total}/{total}] {final.name} {final.title}".strip())
        t0 = time.monotonic()
        try:
            final.run(run)
            result.done.append(final.name)
        except RackcertError as exc:
            _line(console, (f"x {final.name} failed: ", "red"), str(exc))
            if result.failed is None:
                result.failed, result.error = final.name, exc
        result.seconds[final.name] = time.monotonic() - t0
    return result


def _heading(console: Console, text: str) -> None:
    """A rule on a terminal; a plain line in a log (no box-drawing characters in CI logs)."""
    if console.is_terminal:
        console.rule(Text(text), align="left")
    else:
        console.print(Text(f"== {text}"), soft_wrap=True)


def _line(console: Console, *parts: str | tuple[str, str]) -> None:
    """Stage messages carry vCenter's and Ansible's words: shown as text, never as markup."""
    console.print(Text.assemble(*parts), soft_wrap=True, highlight=False)
