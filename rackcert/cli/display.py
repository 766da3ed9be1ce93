"""How each stage's record is shown: one public function per record, for every command.

Why one module: `rackcert plan`, `provision`, `configure`, `validate`, `bench`, `bootstrap`
and `demo` show the same records; each command (and bootstrap, which runs them all) calls
these functions, so no command reaches into another one's private helpers and a record
looks the same wherever it is shown. Text that comes from nodes, vCenter or run files is
data: it is printed as rich `Text` (no markup parsed, no emoji codes), never interpolated
into markup. Tables go through `show_table`: rich tables on a terminal, one plain line per
row in CI logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rackcert.cli.output import show_table

if TYPE_CHECKING:  # imported where used: every invocation imports this module (issue 55)
    from rackcert.core.stage_records import (
        ActionRecord,
        BenchRecord,
        ConfigureRecord,
        HostKeys,
        PlanRecord,
        ProvisionRecord,
        ReportRecord,
        ValidateNode,
        ValidateRecord,
    )
    from rackcert.lab.explain import BenchFailure, LabExplanation
    from rackcert.pipeline import PipelineResult

_VERDICT_STYLE = {"PASS": "green", "FAIL": "red"}


def say(console: Console, *parts: str | tuple[str, str]) -> None:
    """One line from plain pieces and (text, style) pieces; nothing in them is markup."""
    console.print(Text.assemble(*parts), soft_wrap=True, highlight=False)


# -- plan and provision ---------------------------------------------------------------------
def actions_table(actions: Sequence[ActionRecord], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("#", "target", "action", "change", "reason"):
        table.add_column(col, overflow="fold")
    for i, a in enumerate(actions, 1):
        # Text cells: no markup or emoji parsing of data (":ab:" in a PCI id or fingerprint).
        change = Text(a.change)
        if a.blocked:
            change.append(f" ({a.blocked})", style="yellow")
        table.add_row(str(i), Text(a.target), Text(a.kind), change, Text(a.reason))
    return table


def show_actions(console: Console, actions: Sequence[ActionRecord], title: str) -> None:
    show_table(console, actions_table(actions, title))


def show_plan(console: Console, record: PlanRecord, path: Path, rack: str) -> None:
    """The plan: its warnings, the VMs left alone, then the actions (or that there are none)."""
    for warning in record.data.warnings:
        say(console, ("warning", "yellow"), f": {warning}")
    agents = record.data.left_alone
    if agents:
        managers = ", ".join(sorted({a.managed_by for a in agents}))
        say(
            console,
            f"left alone: {len(agents)} VM(s) vCenter extensions manage ({managers}):"
            f" {', '.join(a.name for a in agents)}",
        )
    actions = record.data.actions
    if not actions:
        say(console, ("nothing to do", "green"), f": the rack matches its spec (recorded {path})")
        return
    show_actions(console, actions, f"plan for rack {rack}")
    for number, wave in enumerate(record.data.waves, 1):
        say(console, f"host wave {number}: {', '.join(wave)}")
    say(console, f"{len(actions)} action(s); recorded {path}")


def show_provision(console: Console, record: ProvisionRecord, path: Path) -> None:
    data = record.data
    for name, state in data.vms.items():
        if state.get("left_off"):
            say(console, ("left powered off", "yellow"), f": {name}: {state['left_off']}")
    if not data.actions:
        say(console, ("nothing to do", "green"), f": the rack matches the spec (recorded {path})")
        return
    say(console, ("provisioned", "green"), f": {len(data.done)} action(s) done (recorded {path})")


def show_enrolled(console: Console, host_keys: HostKeys | None) -> None:
    """The host keys trusted on first contact in this stage (enforced from now on)."""
    for e in host_keys.enrolled if host_keys else []:
        say(console, f"enrolled host key of {e.host}: {e.key_type} {e.fingerprint}"
            " (first contact; enforced from now on)")  # fmt: skip


# -- configure ------------------------------------------------------------------------------
def show_configure(console: Console, record: ConfigureRecord, path: Path) -> None:
    """First-contact host keys, the per-host table, then the totals."""
    from rackcert.configure.progress import summary_table

    data = record.data
    show_enrolled(console, data.host_keys)
    hosts = sorted(data.hosts.values(), key=lambda h: h.name)
    show_table(console, summary_table(hosts, check=data.check))
    for h in hosts:  # the family each node was found to be (its facts, not the spec's guest.os)
        found = (h.outcomes.get("rackcert_facts_versions") or {}).get("os")
        if found:
            say(console, f"{h.name}: found {found}")
    t = data.totals
    would = " would be made" if data.check else ""
    say(
        console,
        f"{t.hosts} hosts: {t.ok} ok, {t.failed} failed, {t.unreachable} unreachable;"
        f" {t.changed} changes{would}. Record: {path}",
    )


# -- validate -------------------------------------------------------------------------------
def show_validate(console: Console, record: ValidateRecord, path: Path, junit: Path) -> None:
    """Per-node counts, each failing check with its fix, then the summary line."""
    data = record.data
    show_enrolled(console, data.host_keys)
    table = Table(title="validate", title_justify="left")
    for col in ("node", "status", "pass", "fail", "error", "warn", "skip", "note"):
        table.add_column(col)
    rows: dict[str, ValidateNode | None] = dict(data.nodes)
    for r in data.results:  # hypervisor-only nodes (ESXi hosts)
        rows.setdefault(r.node, None)
    by_node: dict[str, list] = {}
    for r in data.results:
        by_node.setdefault(r.node, []).append(r)
    for name, info in rows.items():
        mine = by_node.get(name, [])
        fatal = [r for r in mine if r.severity.value == "error"]
        bad_fatal = [r for r in fatal if r.status.value in ("fail", "error")]
        counts = {
            "pass": sum(r.status.value == "pass" for r in mine),
            "fail": sum(r.status.value == "fail" for r in fatal),
            "error": sum(r.status.value == "error" for r in fatal),
            "warn": sum(r.status.value in ("fail", "error") for r in mine) - len(bad_fatal),
            "skip": sum(r.status.value == "skip" for r in mine),
        }
        bad = (info is not None and info.status == "failed") or bool(bad_fatal)
        status = Text("FAILED", style="red") if bad else Text("passed", style="green")
        note = info.error if info is not None else "hypervisor"
        table.add_row(Text(name), status, *(str(counts[s]) for s in counts), Text(note[:60]))
    show_table(console, table)
    for r in data.results:
        if r.status.value not in ("fail", "error"):
            continue
        # A failing check of severity warning (or info) does not fail the run: WARN.
        is_fatal = r.severity.value == "error"
        word = (r.status.value.upper(), "red") if is_fatal else ("WARN", "yellow")
        line: list[str | tuple[str, str]] = [word, f" {r.node} {r.id}: {r.reason or 'failed'}"
                f" (observed: {r.observed or '-'}; expected: {r.expected or '-'})"]  # fmt: skip
        if r.fix:
            line.append(f"\n    fix: {r.fix}")
        say(console, *line)
    s = data.summary
    say(
        console,
        ("OK", "green") if s.ok else ("FAILED", "red"),
        f" {s.passed} passed, {s.failed} failed, {s.errors} errors, {s.warnings} warnings,"
        f" {s.skipped} skipped in {s.wall_seconds:.1f}s; record {path}; JUnit {junit}",
    )


# -- bench ----------------------------------------------------------------------------------
def show_bench(console: Console, record: BenchRecord, path: Path) -> None:
    """The scaling table, the allreduce and other figures, each verdict check, the verdict."""
    data: dict[str, Any] = record.data.model_dump(mode="json")
    sc = data.get("resnet50")
    if sc:
        t = Table(
            title=f"ResNet50 {sc['precision']} batch {sc['batch_per_gpu']}/GPU, {sc['backend']}"
        )
        cols = ("nodes", "GPUs", "images/s", "+-", "per GPU", "speedup", "efficiency", "warm-up s")
        for col in cols:
            t.add_column(col, justify="right")
        for p in sc["points"]:
            warm = p.get("warmup_s")
            t.add_row(
                str(p["nodes"]),
                str(p["gpus"]),
                f"{p['images_per_sec']:.1f}",
                "-" if p.get("intervals") == 1 else f"{p['spread']:.1f}",
                f"{p['images_per_sec_per_gpu']:.1f}",
                f"{p['speedup']:.2f}",
                f"{p['efficiency']:.3f}",
                "" if warm is None else f"{warm:.1f}",
            )
        show_table(console, t)
    for line in _bench_lines(data):
        say(console, line)
    for warning in data.get("warnings") or []:
        say(console, f"warning: {warning}")
    v = data["verdict"]
    for c in v["checks"]:
        status = "not judged" if c["status"] == "skip" else c["status"]
        need = " (required)" if c.get("required") else ""
        say(console, f"  {status:>10}  {c['id']}{need}: {c['observed']} {c['reason']}".rstrip())
    word = v["verdict"]
    say(console, "verdict: ", (word, _VERDICT_STYLE.get(word, "yellow")), f"; bench.json in {path}")
    if word == "INCOMPLETE":
        say(console, "  not judged: " + "; ".join(v["not_judged"]))


def _localise_lines(loc: dict[str, Any]) -> list[str]:
    """Localisation's scope and time; its findings are the verdict's checks below."""
    if not loc:
        return []
    t = loc.get("timing") or {}
    out = f"localise: {len(loc.get('nodes') or [])} node(s)"
    if loc.get("links"):
        out += (
            f", {len(loc['links'])} link(s) in {t.get('rounds')} {loc['pattern']} round(s)"
            f" ({loc['engine']}), {t.get('rounds_s', 0):.1f} s ="
            f" {t.get('rounds_over_pair') or 0:.1f} x one pair's {t.get('pair_s') or 0:.2f} s"
        )
    return [f"{out}; {len(loc.get('findings') or [])} finding(s)"]


def _bench_lines(data: dict[str, Any]) -> list[str]:
    """One line per figure beside the scaling table: each benchmark's lines (its unit's
    `lines`, validation.bench.units.UNITS), then localisation's."""
    from validation.bench.units import UNITS

    lines = [line for unit in UNITS for line in unit.lines(data)]
    return lines + _localise_lines(data.get("localise") or {})


# -- report ---------------------------------------------------------------------------------
def show_verdict(console: Console, record: ReportRecord, limit: int = 8) -> None:
    word = record.data.verdict or "INCOMPLETE"
    say(console, "verdict: ", (word, f"bold {_VERDICT_STYLE.get(word, 'yellow')}"))
    for reason in record.data.reasons[:limit]:
        say(console, f"  - {reason}")


# -- rehearsal ----------------------------------------------------------------------------
def show_rehearsal(console: Console, data: Any, path: Path) -> None:
    """The rehearsal in lines: static data, actions, refusals, notes, second plan, times."""
    from rackcert.report.rehearsal import line as rehearsal_line

    def line(text: str) -> None:
        console.print(text, markup=False, emoji=False, highlight=False, soft_wrap=True)

    for text in data.static:
        line(f"served as static data: {text}")
    if data.actions:
        show_actions(console, data.actions, "rehearsed on the twin")
    for refusal in data.refusals:
        line(f"refused ({refusal.by}) {refusal.target}: {refusal.action}: {refusal.message}")
    for note in data.notes:
        line(f"note: {note}")
    if data.second_plan:
        line(f"second plan NOT empty: {len(data.second_plan)} action(s):")
        for a in data.second_plan:
            line(f"  {a.target}: {a.kind}: {a.change}")
    else:
        line("second plan: empty (the twin converged)")
    if data.capture and data.twin_digest != data.capture.inventory_digest:
        line("note: the twin's digest differs from the capture's (see served as static data)")
    times = ", ".join(f"{k} {v:.2f} s" for k, v in data.seconds.items())
    digest = data.capture.inventory_digest if data.capture else ""
    line(f"times: {times}; capture digest {digest}")
    line(f"{rehearsal_line(data)} (recorded {path})")


# -- bootstrap and demo ---------------------------------------------------------------------
def show_run_summary(console: Console, result: PipelineResult, *, lab: bool = False) -> None:
    """The closing lines of bootstrap and demo: each stage's time and result, the verdict,
    where the report is, and (in the lab) how much of a FAIL is only the lab's missing GPUs."""
    from rackcert.core.runs import STAGES
    from rackcert.core.stage_records import ReportRecord, ValidateRecord

    run = result.run
    say(console, f"summary of run {run.path}:")
    shown = [s for s in STAGES if s in result.seconds or s in result.resumed]
    for name in shown or run.stages():
        if name == result.failed:
            state: tuple[str, str] = ("failed", "red")
        elif name in result.resumed:
            state = ("resumed", "dim")
        else:
            state = ("ok", "green")
        seconds = result.seconds.get(name)
        took = f"{seconds:7.1f} s" if seconds is not None else "      - "
        say(console, f"  {name:<10} {took}  ", state)
    report = run.read_record("report")
    word = (report.data.verdict if isinstance(report, ReportRecord) else None) or "INCOMPLETE"
    validate = run.read_record("validate")
    results = validate.data.results if isinstance(validate, ValidateRecord) else []
    failing = [r for r in results if r.status.value in ("fail", "error")]
    counted = f" ({len(failing)} failing check(s) in validate)" if validate else ""
    say(console, "verdict: ", (word, f"bold {_VERDICT_STYLE.get(word, 'yellow')}"), counted)
    html = run.path / "report.html"
    if html.is_file():
        say(console, "report: ", (str(html.resolve()), "bold"))
    if lab:
        for text in lab_explanation(run).lines():
            say(console, text)


def lab_explanation(run: Any) -> LabExplanation:
    """Every failing check of a lab run (validate's and bench's verdict), sorted by cause."""
    from rackcert.core.stage_records import BenchRecord, ValidateRecord
    from rackcert.lab.explain import explain

    validate = run.read_record("validate")
    bench = run.read_record("bench")
    verdict = bench.data.verdict if isinstance(bench, BenchRecord) else None
    allreduce = bench.data.allreduce if isinstance(bench, BenchRecord) else None
    failing_bench = [
        _bench_failure(c.id, c.observed or c.reason, allreduce, run)
        for c in (verdict.checks if verdict else [])
        if c.status.value in ("fail", "error")
    ]
    return explain(
        validate.data.results if isinstance(validate, ValidateRecord) else [], failing_bench
    )


def _bench_failure(id_: str, observed: str, allreduce: Any, run: Any) -> BenchFailure:
    """A failing bench check; the allreduce's with the figures that tell the shared CPU from
    the link (rackcert.lab.explain.BenchFailure.link_held) and the run's spec's rule."""
    from rackcert.lab.explain import BenchFailure

    if id_ != "allreduce.busbw_fraction" or allreduce is None:
        return BenchFailure(id_, observed)
    from rackcert.core.errors import RackcertError
    from rackcert.core.spec_loader import parse_spec

    try:
        text = (run.path / "spec.yaml").read_text()
        rule = parse_spec(text).spec.certification.allreduce_busbw_fraction_min
    except (OSError, RackcertError):  # no spec in the run: no rule to hold it to, a finding
        rule = None
    return BenchFailure(
        id_,
        observed,
        ranks=allreduce.world_size,
        fixed_time_us=allreduce.fixed_time_us,
        fraction_less_fixed=allreduce.busbw_fraction_less_fixed,
        fraction_min=rule,
    )


def show_health_check(console: Console, outcome: Any) -> None:
    """validation.healthcheck.HealthOutcome: one line per failing check, then the verdict and,
    under Slurm, what was done to the node (drain, resume, an operator's drain kept)."""
    for r in outcome.failing:
        say(console, ("FAIL", "red"), f" {r.node} {r.id}: {r.observed or r.reason}")
    word = ("OK", "green") if outcome.ok else ("FAILED", "red")
    action = f"; slurm: {outcome.action}" if outcome.slurm else ""
    say(
        console,
        word,
        f" health check of {outcome.node}: {len(outcome.failing)} failing of"
        f" {len(outcome.results)} in {outcome.seconds:.1f}s{action}",
    )


def health_check_json(outcome: Any) -> dict[str, Any]:
    """The health check's answer for --json."""
    return {
        "node": outcome.node,
        "ok": outcome.ok,
        "action": outcome.action,
        "reason": outcome.reason,
        "seconds": round(outcome.seconds, 2),
        "results": [r.model_dump(mode="json") for r in outcome.results],
    }
