"""Judge bench figures against the spec's certification thresholds.

Each benchmark's checks are its unit's (validation.bench.units: one small function per
threshold, each returning a VerdictCheck: pass, fail or skip with the reason it could not
be judged); this module combines them. The report shows these; it never re-derives them.
A skip is "not judged", never a pass: the verdict is FAIL when a check failed, INCOMPLETE
when a check the spec requires (certification.required, by default what the rack can
judge) was not judged or when nothing at all was judged, PASS only otherwise.

Localisation's findings (validation.bench.localisation.stages) are one failed check each.
`rejudge(spec, data)` judges a recorded bench.json's figures again with this code (what
tools/rejudge_bench.py does to committed evidence), so a verdict is always this function's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rackcert.core.results import AllreduceResult, ScalingResult, Status, Verdict, VerdictCheck
from rackcert.core.spec import Certification, Spec
from rackcert.core.stage_records import BenchData
from validation.bench import units
from validation.bench.units.allreduce import allreduce_busbw, allreduce_correct
from validation.bench.units.base import check
from validation.bench.units.resnet import images_per_gpu, scaling_efficiency, training_sane
from validation.bench.units.storage import storage_ok

__all__ = [  # the units' checks, judged here by name too (tests, tools/rejudge_bench.py)
    "allreduce_busbw",
    "allreduce_correct",
    "images_per_gpu",
    "scaling_efficiency",
    "storage_ok",
    "training_sane",
]


def localise_checks(localise: dict[str, Any] | None) -> list[VerdictCheck]:
    """One failed check per finding of localisation (validation.bench.localisation.stages), e.g.
    `bench.link[lab-node2<->lab-node5]`; one passed `bench.localise` when it named nothing."""
    if not localise:
        return []
    found = localise.get("findings") or []
    if found:
        return [check(f["id"], False, f["observed"], f["expected"]) for f in found]
    links, nodes = len(localise.get("links") or []), len(localise.get("nodes") or [])
    units = sum(len(n.get("units") or []) for n in localise.get("nodes") or [])
    if not links and not units:
        return [check("bench.localise", None, "", "every figure measured", "nothing measured")]
    observed = f"{nodes} node(s), {units} unit(s), {links} link(s) judged: nothing named"
    return [check("bench.localise", True, observed, "no slow node, GPU or link")]


def judge_data(
    cert: Certification,
    data: dict[str, Any],
    *,
    required: Iterable[str] = (),
) -> Verdict:
    """The verdict over a bench record's data: every unit's checks (validation.bench.units),
    in UNITS' order, then localisation's, combined."""
    checks = [c for u in units.UNITS for c in u.checks(data, cert)]
    return combine([*checks, *localise_checks(data.get("localise"))], required)


def combine(checks: list[VerdictCheck], required: Iterable[str] = ()) -> Verdict:
    """FAIL when a check failed; INCOMPLETE when a required check, or every check, was not
    judged; PASS otherwise. reasons lists the failed checks, not_judged the skipped ones."""
    need = set(required)
    for c in checks:
        c.required = c.id in need
    failed = [c for c in checks if c.status is Status.failed]
    skipped = [c for c in checks if c.status is Status.skipped]
    not_judged = [
        f"{c.id}{' (required)' if c.required else ''}: {c.reason or 'not judged'}" for c in skipped
    ]
    if failed:
        word = "FAIL"
    elif any(c.required for c in skipped) or len(skipped) == len(checks):
        word = "INCOMPLETE"
    else:
        word = "PASS"
    return Verdict(
        verdict=word,
        passed=word == "PASS",
        reasons=[f"{c.id}: {c.observed} (expected {c.expected})" for c in failed],
        not_judged=not_judged,
        required=[c.id for c in checks if c.required],
        checks=checks,
    )


def judge(
    cert: Certification,
    allreduce: AllreduceResult | None,
    scaling: ScalingResult | None,
    resnet_raw: list[dict[str, Any]],
    storage: dict[str, Any] | None,
    *,
    judge_link: bool,
    required: Iterable[str] = (),
    localise: dict[str, Any] | None = None,
) -> Verdict:
    """judge_data over these figures, given one by one (a record's data built from them)."""
    data: dict[str, Any] = {
        "allreduce": allreduce.model_dump() if allreduce else None,
        "resnet50": scaling.model_dump() if scaling else None,
        "launches": [{"resnet": r} for r in resnet_raw],
        "storage": storage,
        "judge_link": judge_link,
        "localise": localise,
    }
    return judge_data(cert, data, required=required)


def judge_bench(spec: Spec, data: BenchData) -> Verdict:
    """The verdict over a typed bench record, against `spec` (the units' checks read the
    shape bench.json holds, so a recorded run is judged alike: they get its JSON view)."""
    view = data.model_dump(mode="json")
    return judge_data(spec.certification, view, required=spec.required_checks())


def rejudge(spec: Spec, data: dict[str, Any]) -> Verdict:
    """Judge the figures a bench.json recorded (its `data`) again, against `spec`, with this
    code's units; localisation's findings judged again from its recorded figures (records
    older than `judge_link`: an ssh run could judge the link, a local one not)."""
    localise = data.get("localise")
    if localise:
        from validation.bench.localisation import findings

        found, numbers = findings.judge(localise)
        localise = {**localise, "numbers": numbers, "findings": [f.to_dict() for f in found]}
    return judge_data(
        spec.certification, {**data, "localise": localise}, required=spec.required_checks()
    )
