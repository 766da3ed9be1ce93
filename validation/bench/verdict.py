"""Judge bench figures against the spec's certification thresholds.

One small function per threshold, each returning a VerdictCheck (pass, fail or skip with
the reason it could not be judged). The report shows these; it never re-derives them.
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


def _check(
    id_: str, ok: bool | None, observed: str, expected: str, reason: str = ""
) -> VerdictCheck:
    status = Status.skipped if ok is None else (Status.passed if ok else Status.failed)
    return VerdictCheck(id=id_, status=status, observed=observed, expected=expected, reason=reason)


def allreduce_correct(ar: AllreduceResult | None) -> VerdictCheck:
    """Every size's reduced values equal the expected sums."""
    if ar is None or not ar.points:
        return _check("allreduce.correct", None, "", "all sizes correct", "allreduce not run")
    wrong = [p.size_bytes for p in ar.points if not p.correct]
    observed = "all correct" if not wrong else f"wrong sums at sizes {wrong[:5]}"
    return _check("allreduce.correct", not wrong, observed, "all sizes correct")


def allreduce_busbw(
    ar: AllreduceResult | None, cert: Certification, judge_link: bool
) -> VerdictCheck:
    """busbw at the largest sizes against the link the launch crossed (ar.link): the spec's
    expected busbw for that link when it states one, else the fraction of its line rate.
    A launch whose GPUs talk through SYS says so in what was observed."""
    expected = f">= {cert.allreduce_busbw_fraction_min:g} of line rate"
    if ar is None or not ar.points:
        return _check("allreduce.busbw_fraction", None, "", expected, "allreduce not run")
    if ar.world_size < 2:
        return _check(
            "allreduce.busbw_fraction",
            None,
            "world size 1",
            expected,
            "one rank moves no bytes over a link (busbw = 0 by nccl-tests' definition)",
        )
    where = f" over {ar.link} ({ar.link_detail})" if ar.link and ar.link_detail else ""
    if ar.sys_crossing:
        where += f"; through SYS, across sockets: {', '.join(ar.sys_crossing)}"
    if ar.expected_busbw_gbps is not None and ar.busbw_largest_gbps is not None:
        return _check(
            "allreduce.busbw_fraction",
            ar.busbw_largest_gbps >= ar.expected_busbw_gbps,
            f"{ar.busbw_largest_gbps:.3g} GB/s busbw{where}",
            f">= {ar.expected_busbw_gbps:g} GB/s ({ar.link_source})",
        )
    if ar.busbw_fraction is None:
        why = "no line rate in the spec"
        if ar.link is not None:
            why = _no_figure(ar.link)
        return _check("allreduce.busbw_fraction", None, where.lstrip("; "), expected, why)
    observed = f"{ar.busbw_fraction:.3g} of {ar.line_rate_gbps:g} Gb/s{where}"
    if ar.link_source:
        expected += f" ({ar.link_source})"
    if not judge_link:
        return _check(
            "allreduce.busbw_fraction",
            None,
            observed,
            expected,
            "local run: the ranks talk inside this machine (GPU interconnect or loopback),"
            " not over the spec's network link (give --line-rate-gbps to judge it)",
        )
    return _check(
        "allreduce.busbw_fraction",
        ar.busbw_fraction >= cert.allreduce_busbw_fraction_min,
        observed,
        expected,
    )


def _no_figure(link: str) -> str:
    if link == "loopback":
        return "the ranks talk over this machine's loopback (CPU ranks): no link to judge"
    if link == "sys":
        return (
            "the GPUs talk through SYS (across sockets): no shipped figure for that path;"
            " state one in certification.links (topology: sys) with its source"
        )
    return (
        f"no figure for a {link} link with these GPUs: state one in certification.links"
        " with its source (or give --line-rate-gbps)"
    )


def scaling_efficiency(sc: ScalingResult | None, cert: Certification) -> VerdictCheck:
    """Every multi-unit point's efficiency against N x the baseline >= the spec's minimum."""
    expected = f">= {cert.scaling_efficiency_min:g}"
    if sc is None or not sc.points:
        return _check("resnet50.scaling_efficiency", None, "", expected, "ResNet50 not run")
    multi = [p for p in sc.points if p.gpus > min(q.gpus for q in sc.points)]
    if not multi:
        return _check(
            "resnet50.scaling_efficiency",
            None,
            "one point",
            expected,
            "only one scale measured; nothing to compare against",
        )
    worst = min(multi, key=lambda p: p.efficiency)
    observed = f"{worst.efficiency:.3f} at {worst.gpus} GPUs ({worst.nodes} node(s))"
    return _check(
        "resnet50.scaling_efficiency",
        worst.efficiency >= cert.scaling_efficiency_min,
        observed,
        expected,
    )


def images_per_gpu(sc: ScalingResult | None, cert: Certification) -> VerdictCheck:
    """The slowest point's images/s per GPU >= the spec's minimum (0 or absent: not judged)."""
    floor = cert.resnet50_images_per_gpu_min
    expected = f">= {floor:g} images/s per GPU" if floor else "a threshold"
    if sc is None or not sc.points:
        return _check("resnet50.images_per_gpu", None, "", expected, "ResNet50 not run")
    worst = min(sc.points, key=lambda p: p.images_per_sec_per_gpu)
    observed = f"{worst.images_per_sec_per_gpu:.1f} at {worst.gpus} GPUs"
    if not floor:
        return _check(
            "resnet50.images_per_gpu",
            None,
            observed,
            expected,
            "no threshold: certification.resnet50_images_per_gpu_min is 0 or absent",
        )
    return _check(
        "resnet50.images_per_gpu", worst.images_per_sec_per_gpu >= floor, observed, expected
    )


def training_sane(raw: list[dict[str, Any]]) -> VerdictCheck:
    """The training loss stayed finite on every rank of every launch (no NaN from AMP)."""
    if not raw:
        return _check("resnet50.loss_finite", None, "", "finite loss", "ResNet50 not run")
    bad = [r.get("world_size") for r in raw if not r.get("loss_finite", False)]
    observed = "finite" if not bad else f"non-finite loss at world sizes {bad}"
    return _check("resnet50.loss_finite", not bad, observed, "finite loss")


def storage_ok(storage: dict[str, Any] | None) -> VerdictCheck:
    """The random-read benchmark read data without errors."""
    if not storage or storage.get("skipped"):
        reason = (storage or {}).get("reason", "storage benchmark not run")
        return _check("storage.read", None, "", "reads without errors", reason)
    nodes = storage.get("nodes") or [storage]
    errors = sum(n.get("errors", 0) for n in nodes)
    reads = sum(n.get("reads", 0) for n in nodes)
    return _check(
        "storage.read",
        errors == 0 and reads > 0,
        f"{reads} reads, {errors} errors",
        "reads without errors",
    )


def localise_checks(localise: dict[str, Any] | None) -> list[VerdictCheck]:
    """One failed check per finding of localisation (validation.bench.localisation.stages), e.g.
    `bench.link[lab-node2<->lab-node5]`; one passed `bench.localise` when it named nothing."""
    if not localise:
        return []
    found = localise.get("findings") or []
    if found:
        return [_check(f["id"], False, f["observed"], f["expected"]) for f in found]
    links, nodes = len(localise.get("links") or []), len(localise.get("nodes") or [])
    units = sum(len(n.get("units") or []) for n in localise.get("nodes") or [])
    if not links and not units:
        return [_check("bench.localise", None, "", "every figure measured", "nothing measured")]
    observed = f"{nodes} node(s), {units} unit(s), {links} link(s) judged: nothing named"
    return [_check("bench.localise", True, observed, "no slow node, GPU or link")]


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
    """FAIL when a check failed; INCOMPLETE when a required check, or every check, was not
    judged; PASS otherwise. reasons lists the failed checks, not_judged the skipped ones."""
    need = set(required)
    checks = [
        allreduce_correct(allreduce),
        allreduce_busbw(allreduce, cert, judge_link),
        scaling_efficiency(scaling, cert),
        images_per_gpu(scaling, cert),
        training_sane(resnet_raw),
        storage_ok(storage),
        *localise_checks(localise),
    ]
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


def rejudge(spec: Spec, data: dict[str, Any]) -> Verdict:
    """Judge the figures a bench.json recorded (its `data`) again, against `spec`.

    The same inputs `run_bench` judges: the allreduce and ResNet50 results, each launch's
    raw ResNet50 answer (loss finite), storage, and whether the link could be judged
    (`judge_link`; records older than that field: an ssh run could, a local one not).
    """
    ar = AllreduceResult.model_validate(data["allreduce"]) if data.get("allreduce") else None
    sc = ScalingResult.model_validate(data["resnet50"]) if data.get("resnet50") else None
    raw = [ln["resnet"] for ln in data.get("launches") or [] if ln.get("resnet")]
    judge_link = bool(data.get("judge_link", data.get("mode") != "local"))
    localise = data.get("localise")
    if localise:  # judged again from its recorded figures, with this code's rules
        from validation.bench.localisation import findings

        found, numbers = findings.judge(localise)
        localise = {**localise, "numbers": numbers, "findings": [f.to_dict() for f in found]}
    return judge(
        spec.certification,
        ar,
        sc,
        raw,
        data.get("storage"),
        judge_link=judge_link,
        required=spec.required_checks(),
        localise=localise,
    )
