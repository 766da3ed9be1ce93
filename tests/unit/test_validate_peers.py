"""ssh.peers grows with n: ring neighbours + k peers, rotating, coverage bounded in runs.

The choice is a pure function of (nodes, run id, k, history); the end-to-end test runs
validate twice on five real SSH test hosts and sees the whole mesh covered in the two
runs the bound promises, with the runs since each pair was last checked recorded.
"""

from __future__ import annotations

import pytest

from validation.peer_choice import ALL, History, bound, choose, coverage, record, ring

NODES = [f"n{i:02d}" for i in range(16)]


def test_the_choice_is_deterministic_per_run_id_and_rotates_between_runs() -> None:
    a1 = choose(NODES, "20261203T100000Z", k=2)
    a2 = choose(NODES, "20261203T100000Z", k=2)
    b = choose(NODES, "20261203T110000Z", k=2)
    assert a1.chosen == a2.chosen and a1.seed == a2.seed
    assert a1.chosen != b.chosen  # another run, another draw
    for node, peers in a1.chosen.items():
        assert peers[:2] == ring(NODES, node) and len(set(peers)) == 4 and node not in peers
    assert len(a1.pairs()) == 16 * 4  # n x (2 + k) logins, not n x (n - 1)


@pytest.mark.parametrize(("n", "k"), [(4, 2), (5, 1), (16, 2), (64, 2), (64, 5)])
def test_every_pair_is_checked_within_the_bound_and_stays_within_it(n: int, k: int) -> None:
    nodes = [f"v{i}" for i in range(n)]
    history: History | None = None
    limit = bound(n, k)
    for run in range(limit):
        plan = choose(nodes, f"run-{run}", k=k, history=history)
        history = record(history, plan)
        cov = coverage(history, nodes)
        assert (cov["covered"] == n * (n - 1)) == (run == limit - 1), (run, cov)
    for run in range(limit, 3 * limit):  # steady state: no pair older than the bound
        plan = choose(nodes, f"run-{run}", k=k, history=history)
        assert all(s is not None and s <= limit for _n, _p, s in plan.pairs())
        history = record(history, plan)
        assert coverage(history, nodes)["oldest"] < limit


def test_all_is_the_full_mesh_and_a_later_run_reads_the_history() -> None:
    plan = choose(NODES[:5], "r1", k=ALL)
    assert plan.mode == "all" and len(plan.pairs()) == 20
    after = record(None, plan)
    nxt = choose(NODES[:5], "r2", k=1, history=History.from_dict(after.to_dict()))
    assert nxt.round == 2 and {s for _n, _p, s in nxt.pairs()} == {1}
    assert History.from_dict({"round": "x"}).round == 0  # a broken file is no history
