"""ssh.peers grows with n: ring neighbours + k peers, rotating, coverage bounded in runs.

The choice is a pure function of (nodes, run id, k, history); the end-to-end test runs
validate twice on five real SSH test hosts and sees the whole mesh covered in the two
runs the bound promises, with the runs since each pair was last checked recorded.
"""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from tests.support.validate_nodes import prepare, run_validate
from validation.peer_choice import bound


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
