"""The check registry: one small function per check, with a stable id and a scope.

A check judges; it never gathers. Its scope says what it judges and what it
receives:
- `node`: a guest, over SSH. It declares the fact classes it reads
  (validation.facts) and receives a `NodeView`: those facts' typed values
  (`view.fact(GpuQuery)`) and its `NodeExpect`; the check suite runs these on
  every node.
- `host`, `vm`: an ESXi host or a VM as provision's recorded discovery saw it
  (`validation.checks.hypervisor`: `HostCtx`, `VmCtx`); run by
  `validation.hypervisor_results` in the validate process, never over SSH.
- `rack`: the rack as a whole (is a discovery on record at all).
It returns an `Outcome`. Its docstring's first line says what is expected; a
line starting with `Fix:` is the one-line hint shown when it fails.
`run_check` (a node) and `run_on` (any scope) turn the outcome into a
`rackcert.core.results.CheckResult` and turn a crash into status `error`, so one
broken check never hides the others.

    @check("gpu.driver", facts=(GpuQuery,))
    def driver(view: NodeView) -> Outcome:
        '''Every GPU runs the driver the spec pins (guest.nvidia_driver).

        Fix: install the pinned driver (rackcert configure, role nvidia_driver) and reboot.
        '''
        seen = {g["driver_version"] for g in view.fact(GpuQuery)}
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyinfra.api import FactBase

from rackcert.core.results import CheckResult, Severity, Status
from validation.expect import NodeExpect
from validation.facts import key_of
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
    """One node as the checks see it: what it answered, and what it must be.

    Each fact is parsed once, the first time a check (or facts.json) asks for it.
    """

    expect: NodeExpect
    outputs: dict[str, ProbeOutput] = field(default_factory=dict)
    _parsed: dict[str, Any] = field(default_factory=dict, repr=False)

    def output(self, fact: type[FactBase]) -> ProbeOutput | None:
        """The raw answer of a fact's command (None when it was not gathered)."""
        return self.outputs.get(key_of(fact))

    def fact(self, fact: type[FactBase], *, any_status: bool = False) -> Any:
        """The fact's typed value; Unavailable when its tool is missing or its command
        failed (`any_status`: parse whatever a present tool printed, whatever its exit
        status); ParseError when the output has a shape the parser does not know."""
        out = self.output(fact)
        if out is None:
            raise Unavailable(f"fact {key_of(fact)} was not gathered")
        if out.missing or (out.rc != 0 and not any_status):
            raise Unavailable(out.why())
        return self.parsed(fact)

    def parsed(self, fact: type[FactBase]) -> Any:
        """`process` over the output, once per node (a ParseError is kept and raised again)."""
        key = key_of(fact)
        if key not in self._parsed:
            out = self.outputs.get(key)
            try:
                self._parsed[key] = fact().process(out.text.splitlines() if out else [])
            except ParseError as exc:
                self._parsed[key] = exc
        value = self._parsed[key]
        if isinstance(value, ParseError):
            raise value
        return value


# What a check judges: a guest over SSH, an ESXi host or a VM in the recorded discovery,
# or the rack as a whole. Listed in the order `validate --list` shows them.
SCOPES = ("node", "host", "vm", "rack")
GUEST = ("node",)
HYPERVISOR = ("host", "vm", "rack")

CheckFunc = Callable[[Any], Outcome]


@dataclass(frozen=True)
class CheckDef:
    id: str
    func: CheckFunc
    facts: tuple[type[FactBase], ...]
    severity: Severity
    summary: str
    fix: str
    scope: str = "node"

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


REGISTRY: dict[str, CheckDef] = {}
MODULES = (
    "node",
    "gpu",
    "hgx",
    "vgpu",
    "nic",
    "container",
    "storage",
    "os",
    "ssh",
    "firewall",
    "hypervisor",
)


def check(
    check_id: str,
    *,
    facts: tuple[type[FactBase], ...] = (),
    scope: str = "node",
    severity: Severity = Severity.error,
) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check under a stable id; the docstring gives the summary and the fix.

    A `node` check names the fact classes it reads (validation.facts); a hypervisor
    check (`host`, `vm`, `rack`) reads the recorded discovery and names none.
    """

    def register(func: CheckFunc) -> CheckFunc:
        doc = inspect.getdoc(func) or ""
        lines = [ln.strip() for ln in doc.splitlines()]
        fix = next((ln[4:].strip() for ln in lines if ln.startswith("Fix:")), "")
        if check_id in REGISTRY or not lines or not fix:
            raise ValueError(f"check {check_id}: duplicate id, or docstring without summary/Fix:")
        if scope not in SCOPES or (scope == "node") != bool(facts):
            raise ValueError(f"check {check_id}: scope {scope!r} with facts {facts!r}")
        REGISTRY[check_id] = CheckDef(check_id, func, tuple(facts), severity, lines[0], fix, scope)
        return func

    return register


def load_all() -> dict[str, CheckDef]:
    """Import every check module once; returns the registry in a stable order."""
    for name in MODULES:
        importlib.import_module(f"validation.checks.{name}")
    return REGISTRY


def listed() -> list[CheckDef]:
    """Every check, guest checks first, then by scope: what `validate --list` shows."""
    return sorted(load_all().values(), key=lambda d: SCOPES.index(d.scope))


def ids(scopes: tuple[str, ...] = SCOPES) -> list[str]:
    """The ids of the checks of these scopes."""
    return [d.id for d in load_all().values() if d.scope in scopes]


def matches(check_id: str, pattern: str) -> bool:
    """`gpu.driver` matches `gpu.driver`, `gpu`, `gpu.*` and `gpu.d*`."""
    stem = pattern.rstrip(".*")
    return (
        fnmatch.fnmatchcase(check_id, pattern)
        or check_id == stem
        or check_id.startswith(stem + ".")
    )


def select(patterns: list[str] | None, scopes: tuple[str, ...] = GUEST) -> list[CheckDef]:
    """Checks of these scopes (the guest checks unless told) whose id matches one of the
    patterns (`gpu.driver`, `gpu.*`, `gpu`); all of them if none."""
    checks = [d for d in load_all().values() if d.scope in scopes]
    if not patterns:
        return checks
    unknown = [p for p in patterns if not any(matches(c.id, p) for c in checks)]
    if unknown:
        from rackcert.core.errors import InputError

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


def run_on(defn: CheckDef, node: str, subject: Any) -> CheckResult:
    """Run one check on what its scope judges (a NodeView, HostCtx, VmCtx...); never raises."""
    try:
        outcome = defn.func(subject)
    except Unavailable as exc:
        outcome = Outcome(Status.failed, reason=str(exc))
    except ParseError as exc:
        outcome = Outcome(Status.error, reason=f"unexpected output: {exc}")
    except Exception as exc:  # noqa: BLE001 - a crashing check is an error result, not a crash
        outcome = Outcome(Status.error, reason=f"check crashed: {type(exc).__name__}: {exc}")
    return result(defn, node, outcome)


def run_check(defn: CheckDef, view: NodeView) -> CheckResult:
    """Run one guest check on one node; never raises."""
    return run_on(defn, view.expect.node, view)


def facts_of(defs: list[CheckDef]) -> list[type[FactBase]]:
    """The fact classes these checks read, each once, in a stable order."""
    out: dict[str, type[FactBase]] = {}
    for d in defs:
        for cls in d.facts:
            out.setdefault(key_of(cls), cls)
    return list(out.values())
