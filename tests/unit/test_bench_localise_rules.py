"""Localisation without hosts: schedules, the outlier rules, the parsers, the verdict."""

from __future__ import annotations

import json
from itertools import combinations

import pytest

from rackcert.core.spec import Certification
from tests.support.bench_localise_rules import RULES
from tests.support.bench_localise_rules import node_record as _node
from tests.support.paths import FIXTURES
from validation.bench import verdict
from validation.bench.localisation import findings, linkprobe, outliers, schedule


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16])
def test_round_robin_covers_every_pair_once_in_disjoint_rounds(n: int) -> None:
    names = [f"n{i}" for i in range(n)]
    rounds = schedule.rounds("round-robin", names)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [frozenset(p) for r in rounds for p in r]
    assert sorted(map(sorted, seen)) == sorted(map(sorted, map(frozenset, combinations(names, 2))))
    for r in rounds:  # a node in at most one pair per round, n/2 pairs at once
        nodes = [x for p in r for x in p]
        assert len(nodes) == len(set(nodes)) and len(r) == n // 2


def test_other_patterns() -> None:
    names = [f"n{i}" for i in range(6)]
    ring = schedule.rounds("ring", names)
    assert len(ring) == 2 and sum(len(r) for r in ring) == 6
    assert len(schedule.rounds("all-pairs", names)) == 15
    batches = schedule.rounds("k-batch", names, k=2)
    assert max(len(r) for r in batches) == 2 and sum(len(r) for r in batches) == 15
    with pytest.raises(ValueError, match="pattern 'star'"):
        schedule.rounds("star", names)


def _links(slow: dict[frozenset[str], float], n: int = 4, good: float = 0.19) -> list[dict]:
    names = [f"n{i}" for i in range(1, n + 1)]
    return [
        {"a": a, "b": b, "gbps": slow.get(frozenset((a, b)), good)}
        for a, b in combinations(names, 2)
    ]


def _judge(**record: object) -> list[str]:
    found, _numbers = findings.judge({"rules": RULES, **record})
    return [f.check_id for f in found]


def test_a_node_whose_every_link_is_slow_is_named_not_its_links() -> None:
    bad = {frozenset(("n2", x)): 0.09 for x in ("n1", "n3", "n4")}
    assert _judge(links=_links(bad)) == ["bench.node[n2]"]


def test_one_slow_pair_is_named_as_that_link() -> None:
    ids = _judge(links=_links({frozenset(("n1", "n3")): 0.09}))
    assert ids == ["bench.link[n1<->n3]"]


def test_absolute_threshold_alone_names_a_link() -> None:
    # 0.15 Gb/s is 0.79x the rack's 0.19 (the median rule holds) but under 0.8 x 0.2 Gb/s
    found, _ = findings.judge({"rules": RULES, "links": _links({frozenset(("n1", "n2")): 0.15})})
    assert [f.check_id for f in found] == ["bench.link[n1<->n2]"]
    assert "below 0.16 Gb/s" in found[0].observed


def test_clean_and_evenly_slow_racks() -> None:
    assert _judge(links=_links({})) == []
    # every link under the line rate: every link named, no single node blamed
    ids = _judge(links=_links({}, good=0.1))
    assert len(ids) == 6 and all(i.startswith("bench.link[") for i in ids)


def test_finding_message_reads_as_the_issue_asks() -> None:
    found, _ = findings.judge({"rules": RULES, "links": _links({frozenset(("n2", "n4")): 0.078})})
    msg = found[0].to_dict()["message"]
    assert msg.startswith("bench.link[n2<->n4]: 0.078 Gb/s, 0.41x rack median 0.19 Gb/s")


def test_slow_compute_and_failed_probe_name_their_nodes() -> None:
    nodes = [_node("n1", 15.0), _node("n2", 14.6), _node("n3", 4.1), _node("n4", 15.3)]
    assert _judge(nodes=nodes) == ["bench.compute[n3]"]
    nodes[1] = {"node": "n2", "error": "ssh: connect to host n2 port 22: No route to host"}
    assert _judge(nodes=nodes) == ["bench.node[n2]", "bench.compute[n3]"]


def test_a_slow_rank_of_a_scaling_run_is_named() -> None:
    ranks = [
        {
            "label": "2 node(s), 4 GPU(s): resnet",
            "ranks": [
                {"rank": i, "host": h, "bus_id": None, "images_per_sec": v}
                for i, (h, v) in enumerate([("n1", 40.0), ("n1", 41.0), ("n2", 18.0), ("n2", 40.5)])
            ],
        }
    ]
    assert _judge(ranks=ranks) == ["bench.rank[n2 rank2]"]


def test_iperf3_direction_is_the_median_of_its_intervals() -> None:
    """Real iperf3 3.12 output, `-t 2 -i 0.5 --bidir -J` over loopback: four intervals."""
    got = linkprobe.parse_iperf3(
        (FIXTURES / "iperf3" / "bidir-intervals-loopback.json").read_text()
    )
    assert got["intervals"] == 4
    assert got["forward_gbps"] == pytest.approx((10.41 + 12.1) / 2, abs=0.01)
    assert got["reverse_gbps"] == pytest.approx((8.3 + 9.12) / 2, abs=0.01)
    assert got["gbps"] == got["reverse_gbps"]


def test_iperf3_bidir_json_is_read_both_ways() -> None:
    got = linkprobe.parse_iperf3((FIXTURES / "iperf3" / "bidir-loopback.json").read_text())
    assert got["gbps"] == min(got["forward_gbps"], got["reverse_gbps"]) > 0
    assert got["rtt_min_us"] and got["rtt_min_us"] > 0
    with pytest.raises(linkprobe.LinkProbeError, match="Connection refused"):
        linkprobe.parse_iperf3(
            '{"start": {}, "end": {}, "error": "unable to connect to server: Connection refused"}'
        )


def test_verdict_has_one_failed_check_per_finding_and_rejudges_them() -> None:
    loc = {"rules": RULES, "links": _links({frozenset(("n1", "n3")): 0.05}), "nodes": []}
    found, _ = findings.judge(loc)
    loc["findings"] = [f.to_dict() for f in found]
    v = verdict.judge(Certification(), None, None, [], None, judge_link=False, localise=loc)
    failed = [c for c in v.checks if c.status.value == "fail"]
    assert v.verdict == "FAIL" and [c.id for c in failed] == ["bench.link[n1<->n3]"]
    clean = {"rules": RULES, "links": _links({}), "nodes": [], "findings": []}
    checks = verdict.localise_checks(clean)
    assert [(c.id, c.status.value) for c in checks] == [("bench.localise", "pass")]


def test_mad_and_reference_are_recorded() -> None:
    _f, numbers = outliers.judge_links(
        {("a", "b"): 1.0, ("a", "c"): 1.2, ("b", "c"): 1.1}, outliers.Rule("bandwidth", "Gb/s", 0.7)
    )
    assert numbers["median"] == 1.1 and numbers["mad"] == pytest.approx(0.1)
    assert numbers["reference"] == pytest.approx(1.2)  # each node's best: 1.2, 1.1, 1.2


def _with_allreduce(links: list[dict], slow: dict[frozenset[str], float], good: float = 0.011):
    for p in links:
        busbw = slow.get(frozenset((p["a"], p["b"])), good)
        p["allreduce"] = {"busbw_gb_s": busbw, "correct": True, "error": None}
    return links


def test_a_pairs_allreduce_is_judged_like_its_bandwidth() -> None:
    """Bandwidth fine, the collective slow on one pair: that link, said as its allreduce."""
    links = _with_allreduce(_links({}), {frozenset(("n1", "n3")): 0.004})
    found, numbers = findings.judge({"rules": RULES, "links": links})
    assert [f.check_id for f in found] == ["bench.link[n1<->n3]"]
    assert found[0].observed.startswith("two-node allreduce busbw 0.004 GB/s, 0.36x rack median")
    assert numbers["link_allreduce"]["reference"] == pytest.approx(0.011)
    # slow in both: one finding for the link, both reasons
    both = _with_allreduce(
        _links({frozenset(("n1", "n3")): 0.09}), {frozenset(("n1", "n3")): 0.004}
    )
    (f,) = findings.judge({"rules": RULES, "links": both})[0]
    assert f.check_id == "bench.link[n1<->n3]" and "; two-node allreduce busbw" in f.observed
    # every allreduce of one node slow: the node, as for bandwidth
    node = {frozenset(("n2", x)): 0.004 for x in ("n1", "n3", "n4")}
    assert _judge(links=_with_allreduce(_links({}), node)) == ["bench.node[n2]"]
    # a pair whose allreduce failed while the others ran counts as 0; none ran: not judged
    failed = _with_allreduce(_links({}), {})
    failed[0]["allreduce"] = {"error": "pair allreduce: timed out"}
    assert _judge(links=failed) == [f"bench.link[{failed[0]['a']}<->{failed[0]['b']}]"]
    none = [dict(p, allreduce={"error": "torch does not import"}) for p in _links({})]
    assert _judge(links=none) == []
    # a record from before the rule existed is judged as it was
    old = {k: v for k, v in RULES.items() if k != "link_allreduce"}
    assert findings.judge({"rules": old, "links": links})[0] == []


def test_pair_allreduce_parses_rank0_and_says_why_not() -> None:
    from validation.bench.node import pair_allreduce

    fig = {"rank": 0, "busbw_gb_s": 0.01, "correct": True}
    assert pair_allreduce.row_figures("noise\n" + json.dumps(fig))["error"] is None
    bad = pair_allreduce.row_figures("error: torch does not import: No module named 'torch'")
    assert bad["error"] == "pair allreduce: error: torch does not import: No module named 'torch'"
    wrong = pair_allreduce.row_figures(json.dumps({**fig, "correct": False}))
    assert wrong["error"] == "wrong allreduce result"
    # a node's answer is untrusted: only rank 0's fields, figures as numbers, names cut
    hostile = {**fig, "busbw_gb_s": "9e9", "extra": "x" * 10_000}
    assert pair_allreduce.row_figures(json.dumps(hostile))["error"] == (
        "pair allreduce: no busbw_gb_s figure in rank 0's answer"
    )
    odd = pair_allreduce.row_figures(json.dumps({**fig, "backend": "g" * 500, "extra": 1}))
    assert "extra" not in odd and len(odd["backend"]) == 64 and odd["busbw_gb_s"] == 0.01


# -- confirmation of suspects (validation.bench.localisation.confirm) -------------------------
def _record(links: list[dict], nodes: list[dict] | None = None) -> dict:
    rec = {"rules": RULES, "links": links, "nodes": nodes or []}
    rec["findings"] = [f.to_dict() for f in findings.judge(rec)[0]]
    return rec


def _rejudge(rec: dict) -> list[dict]:
    return [f.to_dict() for f in findings.judge(rec)[0]]


def _cpu(node: str, gflops: float) -> dict:
    return {"node": node, "error": None, "units": [{"unit": "cpu", "gemm_gflops": gflops}]}


def test_confirm_keeps_a_link_slow_twice_and_clears_a_moment() -> None:
    from validation.bench.localisation import confirm

    n13, n24 = frozenset(("n1", "n3")), frozenset(("n2", "n4"))
    rec = _record(_links({n13: 0.09, n24: 0.1}))
    assert [f["id"] for f in rec["findings"]] == ["bench.link[n1<->n3]", "bench.link[n2<->n4]"]
    asked: list = []

    def again(rounds: list) -> list[dict]:  # n1<->n3 slow again, n2<->n4 fine this time
        asked.append(rounds)
        return [{"a": a, "b": b, "gbps": 0.095 if {a, b} == set(n13) else 0.19}
                for r in rounds for a, b in r]  # fmt: skip

    first = json.loads(json.dumps(rec))
    confirmed = confirm.confirm(rec, again, lambda: pytest.fail("no node finding"), _rejudge)
    assert rec == first and "confirm" not in rec  # a new record: the first one untouched
    rec = confirmed
    assert asked == [[[("n1", "n3"), ("n2", "n4")]]]  # disjoint: one round, both at once
    assert [f["id"] for f in rec["findings"]] == ["bench.link[n1<->n3]"]
    c = rec["confirm"]
    assert c["tried"] == ["bench.link[n1<->n3]", "bench.link[n2<->n4]"]
    assert c["cleared"] == ["bench.link[n2<->n4]"] and c["nodes_again"] is False
    row = next(p for p in rec["links"] if {p["a"], p["b"]} == set(n13))
    assert (row["first_gbps"], row["confirm_gbps"], row["gbps"]) == (0.09, 0.095, 0.095)
    assert _rejudge(rec) == rec["findings"]  # the verdict judges the record to the same


def test_confirm_measures_every_link_of_a_named_node_and_reruns_the_node_stage() -> None:
    from validation.bench.localisation import confirm

    bad = {frozenset(("n2", x)): 0.09 for x in ("n1", "n3", "n4")}
    nodes = [_cpu("n1", 50.0), _cpu("n2", 51.0), _cpu("n3", 49.0), _cpu("n4", 20.0)]
    rec = _record(_links(bad), nodes)
    assert sorted(f["id"] for f in rec["findings"]) == ["bench.compute[n4]", "bench.node[n2]"]
    pairs, again_nodes, _tried = confirm.plan(rec)
    assert sorted(map(frozenset, pairs)) == sorted(bad) and again_nodes
    assert confirm.pack(pairs) == [[p] for p in pairs]  # all share n2: one per round
    second = [_cpu("n1", 48.0), _cpu("n2", 50.0), _cpu("n3", 50.0), _cpu("n4", 47.0)]
    rec = confirm.confirm(
        rec,
        lambda rounds: [{"a": a, "b": b, "gbps": 0.085} for r in rounds for a, b in r],
        lambda: second,
        _rejudge,
    )
    assert [f["id"] for f in rec["findings"]] == ["bench.node[n2]"]
    assert rec["confirm"]["cleared"] == ["bench.compute[n4]"]
    n4 = next(n for n in rec["nodes"] if n["node"] == "n4")["units"][0]
    assert n4["first"] == {"gemm_gflops": 20.0} and n4["again"] == {"gemm_gflops": 47.0}
    # the second stage on the first's scale: rack medians 49.5 then 49.0
    assert n4["gemm_gflops"] == pytest.approx(47.0 * 49.5 / 49.0)
    assert rec["confirm"]["node_scale"] == {"cpu gemm_gflops": round(49.5 / 49.0, 4)}


def test_confirm_compares_each_stage_with_its_own_rack_median() -> None:
    """Seen in the lab: the machine slowed down between the two stages. n3 read 96 against
    130-150 first, then every node read 87-90. On absolute figures the best of two kept 96
    against a median of 139 (0.69x, named); on each stage's own scale n3 is like the rest
    the second time, and cleared. A node slow in both stages stays named."""
    from validation.bench.localisation import confirm

    def stages(first: list[float], second: list[float]) -> dict:
        names = ["n1", "n2", "n3", "n4"]
        rec = _record([], [_cpu(n, g) for n, g in zip(names, first, strict=True)])
        again = [_cpu(n, g) for n, g in zip(names, second, strict=True)]
        return confirm.confirm(rec, lambda _r: [], lambda: again, _rejudge)

    drift = stages([130.0, 147.9, 96.2, 150.4], [87.3, 88.5, 89.6, 89.5])
    assert drift["confirm"]["first"] == ["bench.compute[n3]"]
    assert drift["findings"] == [] and drift["confirm"]["cleared"] == ["bench.compute[n3]"]
    slow = stages([140.0, 138.0, 45.0, 142.0], [90.0, 88.0, 30.0, 91.0])  # slow both times
    assert [f["id"] for f in slow["findings"]] == ["bench.compute[n3]"]


def test_confirm_takes_a_second_probe_that_answered() -> None:
    from validation.bench.localisation import confirm

    row = {"node": "n1", "error": "exit 255, no output", "units": []}
    confirm.merge_node(row, _cpu("n1", 50.0))
    assert row["error"] is None and row["first_error"] == "exit 255, no output"
    assert row["units"][0]["gemm_gflops"] == 50.0


def test_confirm_keeps_the_first_tries_error_beside_a_link_figure() -> None:
    from validation.bench.localisation import confirm

    row = {"a": "n1", "b": "n2", "gbps": None, "error": "iperf3: the server has terminated"}
    confirm.merge_link(row, {"a": "n1", "b": "n2", "gbps": 0.09, "error": None})
    assert row["gbps"] == 0.09 and row["error"] is None
    assert row["first_error"] == "iperf3: the server has terminated" and row["first_gbps"] is None


def _placed(node: str, gflops: float, cpu: int | None, machine: str | None = "boot-1") -> dict:
    row = _cpu(node, gflops)
    row["units"][0].update(cpu_id=cpu, machine=machine)
    return row


def test_a_slow_cpu_shared_by_the_nodes_on_it_is_the_cpus_not_a_nodes() -> None:
    """Seen in the lab (nodes share one machine's two vCPUs; one ran at half speed): node3
    and node4 read 85-86 on one CPU against 157-162 on the other, then node1 and node3 read
    84 there. node3 met the slow CPU twice; nothing was wrong with it. A node slow on its own
    beside a CPU-mate that reads well (a quota) is named; so is every slow node where the
    nodes are separate machines (a rack: no boot_id shared), or where no CPU is known."""
    from validation.bench.localisation import colocated, confirm

    def stage(*rows: tuple[str, float, int | None, str]) -> list[dict]:
        out = [_placed(n, g, c, m) for n, g, c, m in rows]
        colocated.mark(out)
        return out

    b = "boot-1"
    first = stage(("node1", 162.2, 1, b), ("node2", 157.5, 1, b), ("node3", 85.1, 0, b),
                  ("node4", 86.0, 0, b))  # fmt: skip
    found, numbers = findings.judge(_record([], first))
    assert found == []  # node3's slow reading is the CPU's: node4 beside it read as little
    assert numbers["gemm_gflops"]["shared_cpu_set_aside"] == ["node3"]
    # Through confirmation, as localise runs it (the first stage judged without the flags,
    # so node3 is tried): the second stage again puts node3 on the slow CPU with node1.
    rec = _record([], [_placed("node1", 162.2, 1), _placed("node2", 157.5, 1),
                       _placed("node3", 85.1, 0), _placed("node4", 86.0, 0)])  # fmt: skip
    assert [f["id"] for f in rec["findings"]] == ["bench.compute[node3]"]
    colocated.mark(rec["nodes"])
    second = stage(("node1", 83.7, 0, b), ("node2", 155.2, 1, b), ("node3", 84.0, 0, b),
                   ("node4", 156.6, 1, b))  # fmt: skip
    rec = confirm.confirm(rec, lambda _r: [], lambda: second, _rejudge)
    assert rec["findings"] == [] and rec["confirm"]["cleared"] == ["bench.compute[node3]"]
    # the same, but node3 alone on that CPU the second time, still slow: its own
    rec = _record([], [_placed("node1", 162.2, 1), _placed("node2", 157.5, 1),
                       _placed("node3", 85.1, 0), _placed("node4", 86.0, 0)])  # fmt: skip
    colocated.mark(rec["nodes"])
    second = stage(("node1", 150.0, 0, b), ("node2", 155.2, 1, b), ("node3", 84.0, 0, b),
                   ("node4", 156.6, 1, b))  # fmt: skip
    rec = confirm.confirm(rec, lambda _r: [], lambda: second, _rejudge)
    assert [f["id"] for f in rec["findings"]] == ["bench.compute[node3]"]

    quota = stage(("n1", 40.0, 0, b), ("n2", 140.0, 0, b), ("n3", 138.0, 1, b),
                  ("n4", 141.0, 1, b))  # fmt: skip
    assert [f["id"] for f in _rejudge(_record([], quota))] == ["bench.compute[n1]"]
    rack = stage(("a", 80.0, 0, "boot-a"), ("b", 82.0, 0, "boot-b"), ("c", 160.0, 0, "boot-c"),
                 ("d", 158.0, 0, "boot-d"))  # fmt: skip
    assert sorted(f["id"] for f in _rejudge(_record([], rack))) == [
        "bench.compute[a]", "bench.compute[b]"]  # fmt: skip
    moved = stage(("n1", 80.0, None, b), ("n2", 82.0, None, b), ("n3", 160.0, 1, b),
                  ("n4", 158.0, 1, b))  # fmt: skip
    assert len(_rejudge(_record([], moved))) == 2
