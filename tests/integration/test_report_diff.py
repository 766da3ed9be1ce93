"""`rackcert report diff`: versions, settings, flipped checks, figures beyond spread; exit code."""

from __future__ import annotations

import json
import subprocess
import sys

from rackcert.cli import main


def test_driver_upgrade_and_10_percent_slower_resnet_is_a_regression(built_pair, capsys):
    _root, run_a, run_b = built_pair
    rc = main(["report", "diff", str(run_a.path), str(run_b.path)])
    captured = capsys.readouterr()
    assert rc == 1
    out = captured.out
    assert "versions changed" in out
    assert "mn-node2 nvidia_driver: 470.82.01 -> 470.103.01" in out
    assert "worse resnet50 images/s at 4 nodes: 10,675.09 -> 9,607.58 (-10.0%" in out
    assert "REGRESSION" in out
    assert "regressions from r750xa-4node/" in captured.err


def test_diff_json_names_each_change(built_pair, capsys):
    _root, run_a, run_b = built_pair
    assert main(["report", "diff", str(run_a.path), str(run_b.path), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["regressed"] is True and d["verdict"] == {"before": "PASS", "after": "FAIL"}
    drivers = {
        (c["scope"], c["before"], c["after"]) for c in d["versions"] if c["key"] == "nvidia_driver"
    }
    assert ("mn-node1", "470.82.01", "470.103.01") in drivers
    moved = {m["figure"]: m for m in d["figures"] if m["moved"]}
    assert set(moved) == {f"resnet50 images/s at {n} nodes" for n in (1, 2, 4)}
    assert all(m["worse"] for m in moved.values())
    # efficiency and allreduce did not move: not reported as moved
    assert not any(m["figure"].startswith("allreduce") and m["moved"] for m in d["figures"])
    assert any(r.startswith("resnet50 images/s at 4 nodes") for r in d["regressions"])
    assert "verdict PASS -> FAIL" in d["regressions"]


def test_fixed_check_and_faster_run_exit_zero(report_runs):
    broken = report_runs(fail={"net.mtu@mn-node1": "1500"}, resnet_scale=0.95)
    fixed = report_runs()
    cmd = [
        sys.executable,
        "-m",
        "rackcert.cli",
        "report",
        "diff",
        str(broken.path),
        str(fixed.path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fixed     mn-node1 net.mtu: fail -> pass" in done.stdout
    assert "better resnet50 images/s at 4 nodes" in done.stdout
    assert "no regression" in done.stdout
