"""Whether a node may go back into service: the resume rule, one finding per broken branch.

The node's own before (its validate and per-node stage, measured on it once drained and
idle, before its host went down) against its after. It resumes only when every branch holds:

1. evidence: the before and the after were measured (some check passed before; the per-node
   stage gave figures before; checks ran after). What could not be measured is a finding,
   never a pass;
2. versions: the new versions are observed (a component the roll leaves alone and no check
   observed before either, in the lab CUDA without nvcc, is not the roll's to prove);
3. checks: every check that passed before passes after. A check that failed before and
   fails after (the lab's explained failures: no GPU, no OFED) is not a finding: the roll
   judges change, not the rack;
4. figures: every figure measured before is measured after, at least `median_fraction` x
   its own before, and at least `median_fraction` x the rack's median where the start run
   localised (`medians`). Where before and after each carry a reference for the figure
   (the same probe on the controller at the same barrier, kept only where it reported the
   node's boot_id: the node's CPUs are the controller's machine's, the lab), the own-before
   rule compares the node's share, figure / reference, instead of the figure;
5. rules: no figure below a rule the spec gives (`floors`, rackcert.upgrade.rules).

    findings = judge(before, after, wanted={"nvidia_driver": "535.154.05"}, medians={...},
                     median_fraction=0.7, floors={"node_allreduce.busbw_gb_s": 150.0})
"""

from __future__ import annotations

import statistics

from rackcert.core.matrix import version_prefix
from rackcert.upgrade.ports import Certificate

PASSED = "pass"  # rackcert.core.results.Status.passed


# On a machine the controller shares (the lab: every node a network namespace of one
# machine), a node's figures are that machine's at the moment, not the node's: its copy
# rate read 0.64 and 1.06 GB/s in one roll, its GEMM's share of a reference read at the same
# barrier swung 0.64-1.15 under the test suite's load, its Gloo allreduce's 0.66-1.80. So
# there the own-before rule sets them aside, as localisation sets aside a shared CPU's
# reading (validation/bench/localisation/colocated.py): each must still be measured after,
# and the median and the spec's rules still hold it. A rack's node never shares the
# controller's machine (its boot_id differs), so there every figure is compared with its
# before. The reference stays in the record and the report, for the reader.
# Checks a node passes only a while after it boots: chrony marks the clock synchronised once
# its first samples are in (with `iburst`, four requests 2 s apart, then a step: seconds to a
# minute; chrony.conf(5), "iburst"), and the roll measures its after as soon as SSH answers.
# A node that failed one of these only is measured again until the settle time is up; still
# failing then, it is a finding like any other.
SETTLING = frozenset({"time.sync"})


def only_settling(findings: list[str]) -> bool:
    """Every finding is a settling check that passed before and fails after (nothing else)."""
    return bool(findings) and all(
        f.endswith(", passed before the roll") and f.split(" ", 1)[0] in SETTLING for f in findings
    )


def set_aside(before: Certificate, after: Certificate) -> list[str]:
    """The figures the own-before rule leaves out for this node: those read on a machine the
    controller shares, before and after (each side kept a reference for it)."""
    return sorted(set(before.reference) & set(after.reference))


def version_matches(observed: str | None, wanted: str) -> bool:
    """Observed is the wanted version, or of it (a branch 535 or 11.4 names a prefix)."""
    if not observed:
        return False
    return observed.strip() == wanted or version_prefix(observed, wanted)


def rack_medians(baselines: dict[str, Certificate]) -> dict[str, float]:
    """Per figure, the median over the nodes' figures in the start run (where it localised)."""
    values: dict[str, list[float]] = {}
    for cert in baselines.values():
        for name, value in cert.figures.items():
            values.setdefault(name, []).append(value)
    return {name: statistics.median(v) for name, v in values.items()}


def unmeasured_before(before: Certificate) -> list[str]:
    """What the node's before lacks to be judged against (empty: it is evidence)."""
    out = []
    if not any(status == PASSED for status in before.checks.values()):
        out.append("no check passed before the roll (nothing to hold the node to)")
    if not before.figures:
        out.append("the per-node stage measured no figure before the roll")
    return out


def _versions(
    before: Certificate, after: Certificate, wanted: dict[str, str], changing: frozenset[str] | None
) -> list[str]:
    out = []
    for component, version in sorted(wanted.items()):
        seen = after.versions.get(component)
        if version_matches(seen, version):
            continue
        moved = changing is None or component in changing
        if not seen and not moved and not before.versions.get(component):
            continue
        out.append(f"{component} {seen or 'not observed'}, wanted {version}")
    return out


def _checks(before: Certificate, after: Certificate) -> list[str]:
    out = []
    for check, status in sorted(before.checks.items()):
        if status != PASSED:
            continue
        now = after.checks.get(check)
        if now is None:
            out.append(f"{check} not run after the roll, passed before")
        elif now != PASSED:
            out.append(f"{check} {now}, passed before the roll")
    return out


def _own(name: str, value: float, own: float, fraction: float, aside: set[str]) -> list[str]:
    """The figure against its own before, unless it is its shared machine's (set_aside)."""
    if name in aside or value >= fraction * own:
        return []
    return [f"{name} {value:g} below {fraction:g} x its before {own:g}"]


def _figures(
    before: Certificate,
    after: Certificate,
    medians: dict[str, float],
    fraction: float,
    floors: dict[str, float],
) -> list[str]:
    out = []
    aside = set(set_aside(before, after))
    for name in sorted(before.figures.keys() | after.figures.keys()):
        value = after.figures.get(name)
        if value is None:
            out.append(f"{name} not measured after the roll (measured before)")
            continue
        own = before.figures.get(name)
        if own is not None:
            out += _own(name, value, own, fraction, aside)
        median = medians.get(name)
        if median is not None and value < fraction * median:
            out.append(
                f"{name} {value:g} below the rack's median rule ({fraction:g} x median {median:g})"
            )
        floor = floors.get(name, after.floors.get(name, before.floors.get(name)))
        if floor is not None and value < floor:
            out.append(f"{name} {value:g} below its rule {floor:g}")
    return out


def judge(
    before: Certificate,
    after: Certificate,
    *,
    wanted: dict[str, str],
    medians: dict[str, float],
    median_fraction: float,
    changing: frozenset[str] | None = None,
    floors: dict[str, float] | None = None,
) -> list[str]:
    """Each reason the node may not resume, one line each; empty: it may.

    `changing`: the components this roll moves (None: every wanted one). `floors`: the
    spec's rule per figure name (absolute minimums)."""
    out = unmeasured_before(before)
    if not after.checks:
        out.append("no check ran after the roll")
    out += _versions(before, after, wanted, changing)
    out += _checks(before, after)
    out += _figures(before, after, medians, median_fraction, floors or {})
    return out
