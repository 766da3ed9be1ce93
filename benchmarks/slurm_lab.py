"""The lab's Slurm: bring-up to idle nodes, and a 2-node srun bench beside the same over SSH.

Two SSH test hosts (rackcert.lab.sshhosts), the lab's munged and slurmctld
(rackcert.lab.slurm), one slurmd started in each node the way the slurm_node role starts it
where there is no systemd (`slurmd -f <conf>` inside the node). Figures:

- controller: SlurmLab.start() until slurmctld accepts connections;
- to idle: from starting the slurmds until `sinfo` shows both nodes idle;
- bench: `rackcert bench --nodes 2 --gpus-per-node 1 --backend gloo --quick --skip
  resnet,storage --max-bytes 1048576` (the allreduce sweep, Gloo, one CPU rank per node),
  wall time of the CLI, with --launcher srun and with torchrun over SSH (one ssh per
  node), alternating, median of --repeat runs.

The hosts share this machine's cores; the figures are for comparing the two launchers
here, not a rack's.

    sudo .venv/bin/python benchmarks/slurm_lab.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rackcert.lab import lifetime  # noqa: E402
from rackcert.lab.slurm import NodeDef, SlurmLab, spec_block  # noqa: E402
from rackcert.lab.sshhosts.host import TestHost  # noqa: E402
from rackcert.lab.sshhosts.network import claim_subnet, release_subnet  # noqa: E402
from rackcert.lab.sshhosts.start import start_hosts, stop_hosts  # noqa: E402

LAB = ROOT / "inventories" / "lab.yaml"


def _spec(hosts: list[TestHost], lab: SlurmLab, where: Path) -> Path:
    data = yaml.safe_load(LAB.read_text())
    template = data["vms"][0]["template"]
    esx = [h["name"] for h in data["hosts"]]
    data["vms"] = [
        {"name": h.name, "template": template, "host": esx[i % len(esx)], "address": h.address}
        for i, h in enumerate(hosts)
    ]
    data["guest"]["ssh"]["key_file"] = str(hosts[0].key_file)
    data["storage"] = {}
    data["slurm"] = spec_block(lab)
    path = where / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _bench(spec: Path, hosts: list[TestHost], launcher: str, runs: Path) -> float:
    cmd = [sys.executable, "-m", "rackcert.cli", "bench", str(spec), "--launcher", launcher,
           "--backend", "gloo", "--nodes", "2", "--gpus-per-node", "1", "--quick",
           "--max-bytes", "1048576", "--skip", "resnet,storage", "--remote-python",
           sys.executable, "--remote-dir", str(ROOT), "--known-hosts", str(hosts[0].known_hosts),
           "--runs-dir", str(runs), "--json"]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    took = time.monotonic() - start
    data = json.loads(proc.stdout) if proc.stdout.strip() else {}
    points = (data.get("allreduce") or {}).get("points") or []
    if not points or not all(p["correct"] for p in points):
        raise SystemExit(f"{launcher} bench failed: {proc.stderr.strip()[-500:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rackcert-slurm-bench-"))
    subnet = claim_subnet()
    hosts = start_hosts(
        ["node1", "node2"], subnet, work / "id_ed25519", state_dir=work / "hosts", private=[]
    )
    gateway = subnet.rsplit(".", 1)[0] + ".1"
    lab = SlurmLab.for_owner(
        f"{os.getpid()}xbench",
        address=gateway,
        nodes=[NodeDef(h.name, h.address, 8, 15564) for h in hosts],
        port=16817,
    )
    try:
        start = time.monotonic()
        lab.start()
        controller = time.monotonic() - start
        start = time.monotonic()
        for h in hosts:
            out = h.exec(["/usr/sbin/slurmd", "-f", str(lab.conf)])
            if out.returncode != 0:
                raise SystemExit(f"slurmd on {h.name}: {out.stderr.strip()}")
        lab.wait_idle([h.name for h in hosts])
        idle = time.monotonic() - start
        print(f"slurmctld up:             {controller:6.2f} s")
        print(f"slurmd start to 2 idle:   {idle:6.2f} s")
        print(f"lab up to idle (both):    {controller + idle:6.2f} s")
        spec = _spec(hosts, lab, work)
        times: dict[str, list[float]] = {"srun": [], "torchrun": []}
        for _ in range(args.repeat):
            for launcher in times:
                times[launcher].append(_bench(spec, hosts, launcher, work / "runs"))
        for launcher, values in times.items():
            print(
                f"2-node bench, {launcher:8s}: median {statistics.median(values):6.1f} s"
                f" (runs: {', '.join(f'{v:.1f}' for v in values)})"
            )
    finally:
        lab.remove()
        stop_hosts(hosts)
        release_subnet(subnet)


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/slurm_lab.py", main))
