"""`rackcert burnin`: the acceptance run of a new rack (validation.bench.burnin.stage), its
judge (.judge), NCCL's transport read from its own log (.nccl), and the record it writes.

    record = run_into(loaded, rundir, opts, progress=print)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rackcert.core.errors import InputError
from rackcert.core.runs import RunDir, utc_now
from rackcert.core.spec import Spec
from rackcert.core.stage_records import BurninRecord
from rackcert.core.untrusted import cap_strings
from validation.bench.burnin.stage import BurninOptions, plan, run_burnin
from validation.bench.transport import Node

__all__ = ["BurninOptions", "nodes_for", "pairs_line_rate", "plan", "run_into"]


def nodes_for(spec: Spec, vms: list[str] | None, bench: Any) -> list[Node]:
    """The nodes a burn-in loads: the named VMs, else every VM of the first template."""
    from validation.bench import targets

    if not spec.vms:
        raise InputError("the spec has no vms: nothing to burn in")
    chosen = targets.select_vms(spec, vms) if vms else [
        v for v in spec.vms if v.template == spec.vms[0].template
    ]  # fmt: skip
    return targets.nodes_of(spec, tuple(chosen), bench)


def pairs_line_rate(spec: Spec, nodes: int) -> tuple[float | None, str]:
    """The line rate the pair rounds' links are judged against, and where it comes from.

    From three nodes up, none: a link is judged against the rack's median (the node loads
    share the nodes' CPUs and PCIe with the NICs during a burn-in; `rackcert bench` judges
    the line rate on an idle rack). Two nodes have one link, whose median is the link itself,
    so a slow cable would never be named: there the link is held to
    `certification.link_bandwidth_fraction_min` x the line rate, localisation's absolute rule
    (validation.bench.localisation.findings.rules), with the line rate bench uses
    (certification.line_rate_gbps, else the spec's slowest NIC port). The rack allreduce is
    paused while the pairs run, so the link is the pair's alone.
    """
    from validation.bench.localisation.stages import line_rate

    if nodes != 2:
        return None, ""
    return line_rate(spec, None)


def run_into(
    spec: Spec,
    run: RunDir,
    nodes: list[Node],
    opts: BurninOptions,
    progress: Callable[[str], None] = lambda _m: None,
) -> BurninRecord:
    """Run, judge, write burnin.json (typed); the record written."""
    started = utc_now()
    log = run.artifacts("burnin") / "burnin.log"
    raw = run_burnin(nodes, opts, log=log, progress=progress)
    series = raw.pop("series_zlib_b64")
    where = str(run.artifacts("burnin").relative_to(run.path))
    data = cap_strings(raw, where=where)  # the nodes' words, cut as every record's are
    data["series_zlib_b64"] = series
    record = run.write_stage("burnin", data, started_at=started)
    assert isinstance(record, BurninRecord)
    return record
