"""ssh.peers grows with n: ring neighbours + k peers, rotating, coverage bounded in runs.

The choice is a pure function of (nodes, run id, k, history); the end-to-end test runs
validate twice on five real SSH test hosts and sees the whole mesh covered in the two
runs the bound promises, with the runs since each pair was last checked recorded.
"""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from tests.test_validate_nodes import prepare, run_validate
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


@pytest.mark.slow
def test_validate_rotates_peers_on_real_hosts_and_covers_the_mesh_in_bound_runs(
    ssh_hosts, fake_gpu_tools, tmp_path
):
    spec, tools, _hosts = prepare(ssh_hosts, fake_gpu_tools, tmp_path, 5, {})
    runs = tmp_path / "runs"
    base = [str(spec), "--runs-dir", str(runs), "--tool-path", tools, "--no-facts"]
    bad = run_validate(*base, "--check", "ssh.peers", "--peers", "many")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--peers many" in bad.stderr
    for _ in range(bound(5, 1)):
        done = run_validate(*base, "--check", "ssh.peers", "--peers", "1")
        assert done.returncode == 0, done.stdout + done.stderr
    dirs = sorted(runs.glob("vtest/*/validate.json"))
    first, second = (json.loads(p.read_text())["data"]["peers"] for p in dirs)
    assert first["checked"] == 5 * 3 and first["covered"] == 15 and first["oldest"] is None
    assert {p["since"] for p in first["pairs"]} == {None}
    assert second["round"] == 2 and second["covered"] == 20 == second["mesh_pairs"]
    fresh = [p for p in second["pairs"] if p["since"] is None]
    assert len(fresh) == 5  # each node's one peer it had never checked
    history = json.loads((dirs[-1].parent / "peers.json").read_text())
    assert history["round"] == 2 and len(history["last_seen"]["node1"]) == 4
    full = run_validate(*base, "--check", "ssh.peers", "--peers", "all")
    assert full.returncode == 0, full.stderr
    mesh = json.loads(sorted(runs.glob("vtest/*/validate.json"))[-1].read_text())["data"]["peers"]
    assert mesh["mode"] == "all" and mesh["checked"] == 20
    assert [r["round"] for r in (first, second, mesh)] == [1, 2, 3]
    assert all(a < b for a, b in pairwise(p.parent.name for p in dirs))
    # The report shows how much of the mesh is covered (from validate's record only).
    from rackcert.core.runs import RunDir
    from rackcert.report.assemble import assemble
    from rackcert.report.html import render_html

    record = assemble(RunDir.open(dirs[-1].parent))
    assert record.ssh_mesh is not None and record.ssh_mesh.covered == 20
    html = render_html(record)
    assert "SSH mesh" in html and "20 of 20 (100.0%)" in html
