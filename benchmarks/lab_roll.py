"""A roll of the host image on the four-node lab, exactly as docs/lab.md's "Try a roll" runs it.

From a clean lab (its files removed, nothing of it running), through the CLI only:

1. `rackcert lab up inventories/lab4.yaml --slurm`: the twin of four ESXi 7.0 U3c hosts whose
   vLCM depot carries ESXi 7.0 U3d and a newer nmlx5 (rackcert/lab/depot.py), the guest agent
   (a VM keeps its disk and host key across a power cycle) and the lab's Slurm;
2. certify: `rackcert bootstrap` of the spec with its slurm block (the lab's verdict is FAIL:
   no GPU, no OFED on a CPU machine);
3. a job stream: `sbatch -N2 --wrap "srun sleep 1"` every --interval seconds, through the roll;
4. `rackcert upgrade SPEC --plan`, then the roll with `--max-unavailable 1` from the certified
   run (with `--allow-uncertified-start` where this rackcert has it: the lab's start is FAIL);
5. the jobs drained out, Broadcom's vSphere Automation SDK (`vmware-vcenter`, the judges'
   environment) scans the cluster: each host's base image and nmlx5 as vLCM reads them;
6. `rackcert lab down` (unless --keep).

Printed: the wall time of each stage, per node (its first roll step to its resume) and for the
roll; the jobs submitted and ended (Slurm's jobcomp log) and how each ended; the most nodes out
at once in sinfo sampled every 0.5 s; whether every host reads the new image through the SDK.
Exit 0 when no job was lost, no more than --max-unavailable nodes were ever out, every node was
resumed and every host reads the new image; 1 otherwise.

Uses the default lab's fixed addresses: run it under `flock /tmp/rackcert-lab.lock` where
others use the lab. Needs root (network namespaces), as the lab does.

    flock /tmp/rackcert-lab.lock .venv/bin/python benchmarks/lab_roll.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rackcert.core.paths import REPO_ROOT  # noqa: E402
from rackcert.core.spec_loader import load_spec  # noqa: E402
from rackcert.lab.depot import ESXI_NEXT, NMLX5, NMLX5_NEXT, NMLX5_NEXT_SHORT  # noqa: E402
from rackcert.lab.slurm import SlurmLab, lab_owner  # noqa: E402

SPEC = REPO_ROOT / "inventories" / "lab4.yaml"
JUDGES = Path(os.environ.get("RACKCERT_JUDGES_VENV", "/opt/rackcert-lab/judges"))
OUT_STATES = ("drain", "drng", "down", "fail", "maint", "boot", "unk", "npc")
LOST = ("CANCELLED", "NODE_FAIL", "FAILED", "TIMEOUT", "PREEMPTED", "BOOT_FAIL", "DEADLINE")


def cli(*args: str, timeout: float = 1800) -> tuple[subprocess.CompletedProcess[str], float]:
    """One rackcert command as a user types it; its completed process and wall seconds."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    return proc, time.monotonic() - start


def must(proc: subprocess.CompletedProcess[str], what: str, ok: tuple[int, ...] = (0,)) -> None:
    if proc.returncode not in ok:
        sys.exit(
            f"lab_roll: {what} exited {proc.returncode}:\n"
            + proc.stdout[-3000:]
            + proc.stderr[-3000:]
        )


class Stream:
    """2-node jobs submitted every `interval` s, and sinfo's nodes out sampled every 0.5 s,
    each in a thread of its own. Any error of either is kept and reported, never swallowed."""

    def __init__(self, slurm: SlurmLab, interval: float):
        self.slurm, self.interval = slurm, interval
        self.stop = threading.Event()
        self.jobs: list[str] = []
        self.errors: list[str] = []
        self.most_out: tuple[int, set[str], float] = (0, set(), 0.0)
        self.samples = 0
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._jobs, self._sample)]

    def __enter__(self) -> Stream:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def submit(self) -> None:
        out = self.slurm.client(
            "sbatch", "--parsable", "--output=/dev/null", "-N2", "--wrap", "srun sleep 1",
            timeout=30,
        )  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"sbatch exited {out.returncode}: {out.stderr.strip()}")
        self.jobs.append(out.stdout.strip().split(";")[0])

    def _jobs(self) -> None:
        while not self.stop.is_set():
            try:
                self.submit()
            except Exception as exc:  # noqa: BLE001 - kept and reported, the stream goes on
                self.errors.append(f"sbatch: {exc}")
            self.stop.wait(self.interval)

    def _sample(self) -> None:
        start = time.monotonic()
        while not self.stop.is_set():
            try:
                out = self.slurm.client("sinfo", "-h", "-N", "-o", "%N %t", timeout=10).stdout
                states = dict(
                    line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2
                )
                # Out as the roll counts it: drained, down, failing, in maintenance, or not
                # responding (sinfo's `*` suffix).
                down = {
                    n
                    for n, s in states.items()
                    if s.endswith("*") or s.rstrip("*~#!%$@^-").startswith(OUT_STATES)
                }
                self.samples += 1
                if len(down) > self.most_out[0]:
                    self.most_out = (len(down), down, time.monotonic() - start)
            except Exception as exc:  # noqa: BLE001 - kept and reported
                self.errors.append(f"sinfo: {exc}")
            self.stop.wait(0.5)


def ended(slurm: SlurmLab) -> dict[str, str]:
    """JobId -> JobState of every job that ended, from jobcomp/filetxt's log."""
    try:
        text = slurm.jobcomp_log.read_text()
    except FileNotFoundError:
        return {}
    return dict(re.findall(r"\bJobId=(\d+)\b.*?\bJobState=(\S+)", text))


def sdk_scan(spec: Any, workdir: Path) -> dict[str, Any]:
    """The cluster's compliance as Broadcom's SDK reads it (tests/support/vlcm_sdk_judge.py)."""
    python = JUDGES / "bin" / "python"
    if not python.is_file():
        sys.exit(f"lab_roll: the vSphere judges are not installed ({JUDGES}): run .ci/setup")
    request = workdir / "sdk-request.json"
    vc = spec.vcenter
    request.write_text(json.dumps({
        "server": f"{vc.host}:{vc.port}", "user": vc.user,
        "password_file": str(Path(vc.password_file).expanduser()),
        "ca_file": str(Path(vc.tls.ca_file).expanduser()),
        "cluster": vc.cluster or "cluster0", "steps": [{"op": "scan"}],
    }))  # fmt: skip
    proc = subprocess.run(
        [str(python), str(REPO_ROOT / "tests" / "support" / "vlcm_sdk_judge.py"), str(request)],
        capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(workdir)},
    )  # fmt: skip
    must(proc, "the SDK's scan")
    scan: dict[str, Any] = json.loads(proc.stdout)[0]
    return scan


def node_times(record: dict[str, Any]) -> dict[str, float]:
    """Per node: seconds from its first step's start to its last step's end (its resume)."""
    from datetime import datetime

    def t(stamp: str) -> float:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

    out = {}
    for node in record["nodes"]:
        steps = [s for s in node.get("steps", []) if s.get("started_at")]
        if steps:
            end = max(t(s.get("ended_at") or s["started_at"]) for s in steps)
            out[node["name"]] = end - min(t(s["started_at"]) for s in steps)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, default=SPEC)
    ap.add_argument("--interval", type=float, default=3.0, help="seconds between job submissions")
    ap.add_argument("--max-unavailable", default="1")
    ap.add_argument("--keep", action="store_true", help="leave the lab up at the end")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    spec = load_spec(args.spec).spec
    if not spec.vcenter.password_file:
        sys.exit(f"lab_roll: {args.spec} has no vcenter.password_file: not a lab spec")
    workdir = Path(spec.vcenter.password_file).expanduser().parent  # the lab's files
    runs = Path(tempfile.mkdtemp(prefix="rackcert-lab-roll-"))
    stages: dict[str, float] = {}
    load_start = Path("/proc/loadavg").read_text().split()[:3]
    begin = time.monotonic()

    # A clean lab: nothing of it running, its files (password, keys, guest disks) gone.
    cli("lab", "down", str(args.spec))
    shutil.rmtree(workdir, ignore_errors=True)
    up, stages["lab up --slurm"] = cli("lab", "up", str(args.spec), "--slurm")
    must(up, "lab up --slurm")
    slurm_spec = workdir / "lab-slurm.yaml"
    slurm = SlurmLab.load(lab_owner(spec))
    assert slurm is not None, "lab up --slurm recorded no Slurm"
    try:
        certify, stages["certify (bootstrap)"] = cli(
            "bootstrap", str(slurm_spec), "--yes", "--quick",
            "--bench-skip", "allreduce,resnet,rdma,storage", "--runs-dir", str(runs),
        )  # fmt: skip
        must(certify, "certify (bootstrap)", ok=(0, 1))  # the lab's FAIL exits 1
        validated = [p.parent for p in runs.glob("*/*/validate.json")]
        if len(validated) != 1:
            sys.exit(
                f"lab_roll: certify recorded no validate stage (exit {certify.returncode}):\n"
                + certify.stdout[-3000:]
                + certify.stderr[-3000:]
            )
        certified = validated[0]
        verdict = json.loads((certified / "run.json").read_text())["verdict"]["verdict"]

        # The roll's spec: the next ESXi patch on every host and the newer nmlx5.
        data = yaml.safe_load(slurm_spec.read_text())
        for host in data["hosts"]:
            host["esxi_version"] = ESXI_NEXT
        data.setdefault("host_software", {}).setdefault("components", {})["nmlx5"] = (
            NMLX5_NEXT_SHORT
        )
        roll_spec = workdir / "lab-roll.yaml"
        roll_spec.write_text(yaml.safe_dump(data, sort_keys=False))

        helptext, _ = cli("upgrade", "--help")
        start_flag = "--allow-uncertified-start" in helptext.stdout
        common = [
            str(roll_spec), "--max-unavailable", args.max_unavailable,
            "--certified-run", str(certified), "--runs-dir", str(runs),
            *(["--allow-uncertified-start"] if start_flag else []),
        ]  # fmt: skip
        plan, stages["upgrade --plan"] = cli("upgrade", *common, "--plan")
        must(plan, "upgrade --plan")
        with Stream(slurm, args.interval) as stream:
            for _ in range(3):
                stream.submit()
            roll, stages["roll"] = cli("upgrade", *common, "--yes")
            roll_end = time.monotonic()
        # Every job submitted ends: wait for the queue to empty (a lost job ends badly).
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and set(stream.jobs) - set(ended(slurm)):
            time.sleep(1)
        stages["jobs drained after the roll"] = time.monotonic() - roll_end
        states = ended(slurm)
        scan = sdk_scan(spec, runs)
    finally:
        if not args.keep:
            cli("lab", "down", str(args.spec))
    record_path = sorted(runs.glob("*/*/upgrade.json"))[-1]
    record = json.loads(record_path.read_text())["data"]
    per_node = node_times(record)
    submitted = stream.jobs
    outcome: dict[str, int] = {}
    for job in submitted:
        outcome[states.get(job, "NOT ENDED")] = outcome.get(states.get(job, "NOT ENDED"), 0) + 1
    lost = sum(n for s, n in outcome.items() if s in LOST or s == "NOT ENDED")
    hosts = scan["hosts"]
    new_image = {
        h: c["base_current"] == ESXI_NEXT
        and c["components"].get(NMLX5, [None])[0] == NMLX5_NEXT
        and c["status"] == "COMPLIANT"
        for h, c in hosts.items()
    }
    resumed = [n["name"] for n in record["nodes"] if n["state"] == "resumed"]
    budget = int(args.max_unavailable)
    figures = {
        "stages_s": {k: round(v, 1) for k, v in stages.items()},
        "total_s": round(time.monotonic() - begin, 1),
        "certified_verdict": verdict,
        "allow_uncertified_start": start_flag,
        "roll_exit": roll.returncode,
        "roll_status": record["status"],
        "per_node_s": {k: round(v, 1) for k, v in per_node.items()},
        "resumed": resumed,
        "jobs_submitted": len(submitted),
        "jobs_ended": outcome,
        "jobs_lost": lost,
        "stream_errors": stream.errors,
        "sinfo_samples": stream.samples,
        "most_out_at_once": stream.most_out[0],
        "most_out_nodes": sorted(stream.most_out[1]),
        "new_image_through_sdk": new_image,
        "loadavg_start": load_start,
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }
    print(
        f"certify (bootstrap): verdict {verdict}; roll started from it"
        + (
            " with --allow-uncertified-start"
            if start_flag
            else " (this rackcert has no --allow-uncertified-start: --certified-run took it as is)"
        )
    )
    print(plan.stdout.rstrip())
    for name, secs in stages.items():
        print(f"{name:32s} {secs:7.1f} s")
    print(f"{'total, clean lab to lab down':32s} {figures['total_s']:7.1f} s")
    for node, secs in sorted(per_node.items()):
        print(f"  {node:30s} {secs:7.1f} s out of service (first step to resume)")
    print(
        f"roll: exit {roll.returncode}, status {record['status']},"
        f" resumed {len(resumed)}/{len(record['nodes'])}"
    )
    print(f"jobs: {len(submitted)} submitted, ended {outcome}, lost {lost}")
    print(
        f"most nodes out at once: {stream.most_out[0]} {sorted(stream.most_out[1])}"
        f" ({stream.samples} sinfo samples, every 0.5 s; --max-unavailable {budget})"
    )
    for host, ok in sorted(new_image.items()):
        c = hosts[host]
        print(
            f"  {host}: {c['status']}, base {c['base_current']}, {NMLX5}"
            f" {c['components'].get(NMLX5, [None])[0]}"
            f" ({'new image' if ok else 'NOT the new image'})"
        )
    print(f"stream errors: {stream.errors or 'none'}")
    print(
        f"load average at the start: {' '.join(load_start)},"
        f" at the end: {' '.join(figures['loadavg'])}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    good = (
        lost == 0
        and not stream.errors
        and stream.most_out[0] <= budget
        and len(resumed) == len(record["nodes"])
        and new_image
        and all(new_image.values())
    )
    if roll.returncode != 0:
        print(roll.stdout[-3000:] + roll.stderr[-3000:])
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
