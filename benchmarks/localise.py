"""Localisation in the lab: how long it takes, and whether it names the planted culprit.

N SSH test hosts (rackcert.lab.sshhosts), every link shaped to the lab's line rate
(100 Mbit/s, inventories/lab.yaml), localisation run as `rackcert bench --localise` runs
it (validation.bench.localisation.stages: round-robin pairs, iperf3 both ways, the per-node probe).
Figures:

- wall time of a clean run (per-node stage + link rounds), the link rounds' time and its
  ratio to one pair's time (round-robin: n-1 rounds, so the ratio should be ~n-1, not
  the n(n-1)/2 pairs);
- for each severity (0.25, 0.5, 0.8 of the line rate, and of a node's CPU share), over
  --runs runs: how often the culprit alone was named (`exact`), and how often it was
  named at all (`named`), for three planted faults:
  - node: tbf on one host's link, both directions (the verdict must name the node);
  - link: an htb class with a u32 filter between two hosts (that link only);
  - compute: a cgroup v1 CPU quota on one host at the severity x the CPU share its probe
    got in the clean runs (that node's compute). A CPU unit is judged per second of the
    node's own time (validation.bench.node.probe.OwnTime: the wall clock less its waits
    behind other processes), where the others run at a core's speed, so a quota of
    severity x share reads below the severity (about 0.33x at 0.5 with half a core each);
- false findings over the clean runs (any finding in a clean run is a false one).

The hosts share this machine's cores with whatever else runs; say how loaded it was
(`load` in the output) beside the figures.

    sudo .venv/bin/python benchmarks/localise.py --hosts 4 --runs 20 --json loc4.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rackcert.core.ssh_target import SshTarget  # noqa: E402
from rackcert.lab import lifetime, linkshape  # noqa: E402
from rackcert.lab.sshhosts.host import TestHost  # noqa: E402
from rackcert.lab.sshhosts.network import claim_subnet, release_subnet  # noqa: E402
from rackcert.lab.sshhosts.start import start_hosts, stop_hosts  # noqa: E402
from validation.bench.localisation.stages import LocaliseOptions, localise  # noqa: E402
from validation.bench.transport import Node  # noqa: E402

LINE_MBIT = 100.0
SEVERITIES = (0.25, 0.5, 0.8)


def nodes_of(hosts: list[TestHost]) -> list[Node]:
    return [
        Node(
            h.name,
            SshTarget(
                host=h.address,
                port=h.port,
                identity_file=str(h.key_file),
                known_hosts=str(h.known_hosts),
            ),
        )
        for h in hosts
    ]


CONFIRM = True  # --no-confirm: judge the first measurement only (as before confirmation)


def run(hosts: list[TestHost], stages: set[str], pair_s: int) -> dict[str, Any]:
    opts = LocaliseOptions(
        confirm=CONFIRM,
        line_rate_gbps=LINE_MBIT / 1000,
        line_rate_source="the lab's declared line rate",
        pair_seconds=pair_s,
        node_allreduce=False,
        engine="numpy",
        stages=stages,
        timeout_s=300,
    )
    return localise(nodes_of(hosts), opts)


@contextlib.contextmanager
def planted(kind: str, hosts: list[TestHost], sev: float, share: float) -> Iterator[str]:
    """Plant one fault; yields the finding id that names its culprit."""
    victim, other = hosts[1], hosts[-1]
    if kind == "node":
        linkshape.shape_host(victim, LINE_MBIT * sev)
        try:
            yield f"bench.node[{victim.name}]"
        finally:
            linkshape.shape_host(victim, LINE_MBIT)
    elif kind == "link":
        linkshape.shape_link(victim, other, LINE_MBIT * sev, line=LINE_MBIT)
        try:
            yield f"bench.link[{'<->'.join(sorted((victim.name, other.name)))}]"
        finally:
            for h in (victim, other):
                linkshape.unshape(h)
                linkshape.shape_host(h, LINE_MBIT)
    else:
        with linkshape.cpu_quota(victim, sev * share):
            yield f"bench.compute[{victim.name}]"


def _first(rec: dict[str, Any]) -> list[str]:
    """The finding ids of the first measurement (before any confirmation)."""
    return list((rec.get("confirm") or {}).get("first") or [f["id"] for f in rec["findings"]])


def _id_sorted(found: str) -> str:
    """bench.link[a<->b] with a, b in the order the schedule wrote them: compare as sets."""
    if found.startswith("bench.link["):
        a, b = found[len("bench.link[") : -1].split("<->")
        return f"bench.link[{'<->'.join(sorted((a, b)))}]"
    return found


FAULTS = {"node": {"links"}, "link": {"links"}, "compute": {"nodes"}}  # kind: stages it needs


def bench(
    n: int,
    runs: int,
    clean_runs: int,
    pair_s: int,
    severities: tuple[float, ...] = SEVERITIES,
    kinds: tuple[str, ...] = tuple(FAULTS),
) -> dict[str, Any]:
    subnet = claim_subnet()
    work = Path(tempfile.mkdtemp(prefix="localise-bench-"))
    hosts = start_hosts(
        [f"node{i + 1:02d}" for i in range(n)], subnet, work / "id_ed25519", state_dir=work / "h"
    )
    out: dict[str, Any] = {
        "hosts": n,
        "runs": runs,
        "clean_runs": clean_runs,
        "pair_seconds": pair_s,
        "line_mbit": LINE_MBIT,
    }
    try:
        linkshape.shape_hosts(hosts, LINE_MBIT / 1000)
        clean, shares = [], []
        for _ in range(clean_runs):
            rec = run(hosts, {"nodes", "links"}, pair_s)
            clean.append(rec)
            shares += [u["cpu_share"] for x in rec["nodes"] for u in x["units"] if "cpu_share" in u]
        t = [r["timing"] for r in clean]
        share = statistics.median(shares)
        out["clean"] = {
            "wall_s": statistics.median(x["total_s"] for x in t),
            "node_stage_s": statistics.median(x["node_stage_s"] for x in t),
            "link_stage_s": statistics.median(x["link_stage_s"] for x in t),
            "rounds": t[0]["rounds"],
            "pairs": t[0]["pairs"],
            "rounds_s": statistics.median(x["rounds_s"] for x in t),
            "pair_s": statistics.median(x["pair_s"] for x in t),
            "rounds_over_pair": statistics.median(x["rounds_over_pair"] for x in t),
            "false_findings": sum(len(r["findings"]) for r in clean),
            # before confirmation (validation.bench.localisation.confirm): what the first
            # measurement named
            "false_findings_first": sum(len(_first(r)) for r in clean),
            "confirm_s": statistics.median((x.get("confirm_s") or 0.0) for x in t),
            "runs_with_false_findings": sum(1 for r in clean if r["findings"]),
            "false": [f["message"] for r in clean for f in r["findings"]],
            "cpu_share_median": share,
        }
        faults: dict[str, Any] = {}
        for kind in kinds:
            stages = FAULTS[kind]
            for sev in severities:
                exact = named = exact_first = 0
                seen: list[
                    list[str]
                ] = []  # each run's findings, whole (a failed probe's error too)
                for _ in range(runs):
                    with planted(kind, hosts, sev, share) as culprit:
                        rec = run(hosts, stages, pair_s)
                    ids = sorted(_id_sorted(f["id"]) for f in rec["findings"])
                    seen.append([f["message"] for f in rec["findings"]])
                    named += culprit in ids
                    exact += ids == [culprit]
                    exact_first += sorted(_id_sorted(i) for i in _first(rec)) == [culprit]
                faults[f"{kind}@{sev}"] = {
                    "exact": exact,
                    "exact_first": exact_first,
                    "named": named,
                    "runs": runs,
                    "findings": seen,
                }
                print(
                    f"  {n} hosts, {kind} at {sev}x: named {named}/{runs}, alone {exact}/{runs}"
                    f" (first measurement alone: {exact_first}/{runs})",
                    flush=True,
                )
        out["faults"] = faults
    finally:
        stop_hosts(hosts)
        release_subnet(subnet)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[4], help="lab sizes, e.g. 4 8 16")
    p.add_argument("--runs", type=int, default=20, help="runs per fault and severity")
    p.add_argument("--clean-runs", type=int, default=None, help="clean runs (default: --runs)")
    p.add_argument("--pair-seconds", type=int, default=2)
    p.add_argument(
        "--severities",
        type=float,
        nargs="+",
        default=list(SEVERITIES),
        help="fractions of the line rate (and CPU share) to plant",
    )
    p.add_argument(
        "--faults",
        nargs="+",
        choices=tuple(FAULTS),
        default=list(FAULTS),
        help="which planted faults to measure (default: all three)",
    )
    p.add_argument("--json", type=Path, help="write every figure here")
    p.add_argument(
        "--no-confirm",
        action="store_true",
        help="judge each run's first measurement only (no suspect measured again)",
    )
    args = p.parse_args()
    global CONFIRM
    CONFIRM = not args.no_confirm
    if os.geteuid() != 0:
        print("error: lab hosts need root (network namespaces)", file=sys.stderr)
        return 2
    if any(n < 2 for n in args.hosts) or args.runs < 1:
        print("error: --hosts at least 2, --runs at least 1", file=sys.stderr)
        return 2
    results = []
    for n in args.hosts:
        load = os.getloadavg()[0]
        r = bench(
            n,
            args.runs,
            args.clean_runs or args.runs,
            args.pair_seconds,
            tuple(args.severities),
            tuple(args.faults),
        )
        r["load_before"] = load
        r["load_after"] = os.getloadavg()[0]
        results.append(r)
        c = r["clean"]
        print(
            f"{n} hosts: wall {c['wall_s']:.1f} s (per-node {c['node_stage_s']:.1f} s, links"
            f" {c['link_stage_s']:.1f} s); {c['rounds']} rounds of {c['pairs']} pairs"
            f" {c['rounds_s']:.1f} s = {c['rounds_over_pair']:.1f} x one pair's"
            f" {c['pair_s']:.2f} s; false findings {c['false_findings']} over"
            f" {r['clean_runs']} clean runs (first measurement: {c['false_findings_first']};"
            f" confirmation {c['confirm_s']:.1f} s median); load {load:.1f} ->"
            f" {r['load_after']:.1f}",
            flush=True,
        )
    head = " | ".join(f"{s:g}x" for s in args.severities)
    print(f"\n| hosts | fault | {head} |\n|---|---|" + "---|" * len(args.severities))
    for r in results:
        for kind in args.faults:
            cells = [f"{r['faults'][f'{kind}@{s}']['exact']}/{r['runs']}" for s in args.severities]
            print(f"| {r['hosts']} | {kind} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/localise.py", main))
