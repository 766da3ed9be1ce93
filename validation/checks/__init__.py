"""The check registry: one small function per check, with a stable id.

A check judges; it never gathers. It receives a `NodeView` (the node's probe
outputs and its `NodeExpect`) and returns an `Outcome`. Its docstring's first
line says what is expected; a line starting with `Fix:` is the one-line hint
shown when it fails. `run_check` turns the outcome into a
`rackcert.results.CheckResult` and turns a crash into status `error`, so one
broken check never hides the others.

    @check("gpu.driver", probes=("gpu_query",))
    def driver(view: NodeView) -> Outcome:
        '''Every GPU runs the driver the spec pins (guest.nvidia_driver).

        Fix: install the pinned driver (rackcert configure, role nvidia_driver) and reboot.
        '''
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from rackcert.results import CheckResult, Severity, Status
from validation.expect import NodeExpect
from validation.parsers import ParseError
from validation.probes import ProbeOutput


class Unavailable(Exception):
    """What a check needs is not there (a tool, a file): the check fails with this reason."""


@dataclass(frozen=True)
class Outcome:
    status: Status
    observed: str = ""
    expected: str = ""
    reason: str = ""


def passed(observed: object, expected: object = "") -> Outcome:
    return Outcome(Status.passed, str(observed), str(expected))


def failed(observed: object, expected: object, reason: str) -> Outcome:
    return Outcome(Status.failed, str(observed), str(expected), reason)


def skipped(reason: str, expected: object = "") -> Outcome:
    return Outcome(Status.skipped, "", str(expected), reason)


@dataclass
class NodeView:
    """One node as the checks see it: what it answered, and what it must be."""

    expect: NodeExpect
    outputs: dict[str, ProbeOutput] = field(default_factory=dict)

    def text(self, probe: str) -> str:
        """The probe's output; raise Unavailable when the tool is missing or it failed."""
        out = self.outputs.get(probe)
        if out is None:
            raise Unavailable(f"probe {probe} was not run")
        if not out.ok:
            raise Unavailable(out.why())
        return out.text


@dataclass(frozen=True)
class CheckDef:
    id: str
    func: Callable[[NodeView], Outcome]
    probes: tuple[str, ...]
    severity: Severity
    summary: str
    fix: str

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


REGISTRY: dict[str, CheckDef] = {}
MODULES = ("node", "gpu", "nic", "container", "storage", "os", "ssh")


def check(
    check_id: str, *, probes: tuple[str, ...], severity: Severity = Severity.error
) -> Callable[[Callable[[NodeView], Outcome]], Callable[[NodeView], Outcome]]:
    """Register a check under a stable id; the docstring gives the summary and the fix."""

    def register(func: Callable[[NodeView], Outcome]) -> Callable[[NodeView], Outcome]:
        doc = inspect.getdoc(func) or ""
        lines = [ln.strip() for ln in doc.splitlines()]
        fix = next((ln[4:].strip() for ln in lines if ln.startswith("Fix:")), "")
        if check_id in REGISTRY or not lines or not fix:
            raise ValueError(f"check {check_id}: duplicate id, or docstring without summary/Fix:")
        REGISTRY[check_id] = CheckDef(check_id, func, probes, severity, lines[0], fix)
        return func

    return register


def load_all() -> dict[str, CheckDef]:
    """Import every check module once; returns the registry in a stable order."""
    for name in MODULES:
        importlib.import_module(f"validation.checks.{name}")
    return REGISTRY


def matches(check_id: str, pattern: str) -> bool:
    """`gpu.driver` matches `gpu.driver`, `gpu`, `gpu.*` and `gpu.d*`."""
    stem = pattern.rstrip(".*")
    return (
        fnmatch.fnmatchcase(check_id, pattern)
        or check_id == stem
        or check_id.startswith(stem + ".")
    )


def select(patterns: list[str] | None) -> list[CheckDef]:
    """Checks whose id matches one of the patterns (`gpu.driver`, `gpu.*`, `gpu`); all if none."""
    checks = list(load_all().values())
    if not patterns:
        return checks
    unknown = [p for p in patterns if not any(matches(c.id, p) for c in checks)]
    if unknown:
        from rackcert.errors import InputError

        raise InputError(
            f"unknown check id {', '.join(unknown)}; known: {', '.join(c.id for c in checks)}"
        )
    return [c for c in checks if any(matches(c.id, p) for p in patterns)]


def result(defn: CheckDef, node: str, outcome: Outcome) -> CheckResult:
    fix = defn.fix if outcome.status in (Status.failed, Status.error) else ""
    return CheckResult(
        id=defn.id,
        node=node,
        severity=defn.severity,
        status=outcome.status,
        observed=outcome.observed,
        expected=outcome.expected,
        fix=fix,
        reason=outcome.reason,
    )


def run_check(defn: CheckDef, view: NodeView) -> CheckResult:
    """Run one check on one node; never raises."""
    try:
        outcome = defn.func(view)
    except Unavailable as exc:
        outcome = Outcome(Status.failed, reason=str(exc))
    except ParseError as exc:
        outcome = Outcome(Status.error, reason=f"unexpected output: {exc}")
    except Exception as exc:  # noqa: BLE001 - a crashing check is an error result, not a crash
        outcome = Outcome(Status.error, reason=f"check crashed: {type(exc).__name__}: {exc}")
    return result(defn, view.expect.node, outcome)
