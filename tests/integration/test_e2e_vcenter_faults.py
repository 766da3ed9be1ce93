"""vCenter going away in the middle of provision: one line, record intact, re-run completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from rackcert.core.paths import REPO_ROOT


def _provision(spec_path, runs, *, wait=True):
    cmd = [sys.executable, "-m", "rackcert.cli", "provision", str(spec_path), "--yes",
           "--runs-dir", str(runs)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    return proc.communicate(timeout=600) + (proc.returncode,) if wait else proc


def test_vcsim_killed_mid_provision(rack_twin):
    # Every VM creation takes 3 s, so the kill lands while provision is creating VMs.
    lab = rack_twin(
        "inventories/lab.yaml", faults={"slow": [{"method": "CloneVM_Task", "ms": 3000}]}
    )
    runs = lab.runs_dir
    proc = _provision(lab.spec_path, runs, wait=False)
    deadline = time.monotonic() + 120
    record = None
    while time.monotonic() < deadline:
        found = sorted(runs.glob("lab/*/provision.json"))
        if found:
            record = json.loads(found[-1].read_text())
            if any(d.get("kind", "").startswith("host.reboot") for d in _done(record)):
                break
        time.sleep(0.2)
    assert record is not None, "provision never recorded progress"
    os.kill(lab.twin.pid, signal.SIGKILL)
    out, err, code = proc.communicate(timeout=300) + (None,)
    assert proc.returncode not in (0, None)
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), err
    assert "Traceback" not in err + out
    final = json.loads(sorted(runs.glob("lab/*/provision.json"))[-1].read_text())
    assert final["status"] in ("failed", "partial")
    assert len(_done(final)) >= len(_done(record))  # nothing recorded before is lost

    # vCenter is back (a fresh twin of the same rack): a re-run completes the job.
    again = rack_twin("inventories/lab.yaml", guests=True)  # guests boot: provision completes
    out, err, code = _provision(again.spec_path, again.runs_dir)
    assert code == 0, err
    last = json.loads(sorted(again.runs_dir.glob("lab/*/provision.json"))[-1].read_text())
    assert last["status"] == "ok"
    replan = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "plan", str(again.spec_path), "--json",
         "--runs-dir", str(again.runs_dir)],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    assert json.loads(replan.stdout)["actions"] == []


def _done(record):
    return (record.get("data") or {}).get("done") or []
