"""Whether a node may go back into service: the new versions observed, nothing worse.

Compared with the same node before the roll (its baseline): no check that passed before
fails now; no figure falls below its own rule, nor below the rack's median rule (the
median of the nodes' baselines times certification.median_fraction_min). A check that
failed before and fails now (in the lab: a check that needs hardware the lab lacks) is
not a finding: the roll judges change, not the rack.

    findings = judge(before, after, wanted={"nvidia_driver": "535.154.05"}, medians={...})
"""

from __future__ import annotations

import statistics

from rackcert.core.matrix import version_prefix
from rackcert.upgrade.ports import Certificate

PASSED = "pass"  # rackcert.core.results.Status.passed


def version_matches(observed: str | None, wanted: str) -> bool:
    """Observed is the wanted version, or of it (a branch 535 or 11.4 names a prefix)."""
    if not observed:
        return False
    return observed.strip() == wanted or version_prefix(observed, wanted)


def rack_medians(baselines: dict[str, Certificate]) -> dict[str, float]:
    """Per figure, the median over the nodes' baselines."""
    values: dict[str, list[float]] = {}
    for cert in baselines.values():
        for name, value in cert.figures.items():
            values.setdefault(name, []).append(value)
    return {name: statistics.median(v) for name, v in values.items()}


def judge(
    before: Certificate,
    after: Certificate,
    *,
    wanted: dict[str, str],
    medians: dict[str, float],
    median_fraction: float,
    changing: frozenset[str] | None = None,
) -> list[str]:
    """Each reason the node may not resume, one line each; empty: it may.

    `changing`: the components this roll moves (None: every wanted one). One it leaves alone
    that no check observed before the roll either (in the lab: CUDA without nvcc, OFED
    without ofed_info) is not the roll's to prove; one it moves must be observed."""
    out: list[str] = []
    for component, version in sorted(wanted.items()):
        seen = after.versions.get(component)
        if version_matches(seen, version):
            continue
        moved = changing is None or component in changing
        if not seen and not moved and not before.versions.get(component):
            continue
        out.append(f"{component} {seen or 'not observed'}, wanted {version}")
    for check, status in sorted(after.checks.items()):
        if before.checks.get(check) == PASSED and status != PASSED:
            out.append(f"{check} {status}, passed before the roll")
    for check, status in sorted(before.checks.items()):
        if status == PASSED and check not in after.checks:
            out.append(f"{check} not run after the roll, passed before")
    for name, value in sorted(after.figures.items()):
        floor = after.floors.get(name, before.floors.get(name))
        if floor is not None and value < floor:
            out.append(f"{name} {value:g} below its rule {floor:g}")
        median = medians.get(name)
        if median is not None and value < median_fraction * median:
            out.append(
                f"{name} {value:g} below the rack's median rule"
                f" ({median_fraction:g} x median {median:g})"
            )
    for name in sorted(before.figures.keys() - after.figures.keys()):
        out.append(f"{name} not measured after the roll")
    return out
