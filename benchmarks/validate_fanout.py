"""Fan-out benchmark: wall time of `rackcert validate` on 1, 4 and 16 SSH test hosts.

Goal (issue "Validation suite"): 16 hosts within 2x the time of one. Each point
is the end-to-end CLI run (interpreter start, probes over SSH, pytest checks,
pyinfra facts snapshot, records), median of --repeat runs, against real sshd
test hosts in network namespaces (rackcert.lab.sshhosts). Every VM of the spec
also checks SSH to every peer, so the 16-host run makes 16 x 15 peer SSH
connections on top of rackcert's own 16: the mesh is in the figure.

"cpu s" is the CPU time of rackcert's own processes (the controller side: CLI,
pytest, pyinfra, ssh clients), not of the test hosts' sshd and shells, which on
a real rack run on the nodes' own CPUs but here share this machine's few cores:
that is why the wall-time ratio here is an upper bound of the real one.

Like the lab, the hosts have no GPU tools (GPU checks fail "nvidia-smi not
found"); `--fake-gpu` puts the test suite's fake nvidia-smi on their PATH.

    sudo .venv/bin/python benchmarks/validate_fanout.py            # prints the table + ratio
    sudo .venv/bin/python benchmarks/validate_fanout.py --sizes 1 16 --repeat 5 --no-facts
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rackcert.lab import sshhosts  # noqa: E402

FAKE_SMI = ROOT / "tests" / "fakes" / "fake-nvidia-smi"


def write_spec(path: Path, hosts: list[sshhosts.TestHost]) -> Path:
    vms = "\n".join(
        f"  - {{name: {h.name}, template: t1, host: esx1, address: {h.address},"
        f" ssh_port: {h.port}}}"
        for h in hosts
    )
    gpus = "\n".join(
        f'      - {{pci: "0000:{0x10 + i:02x}:00.0", model: NVIDIA H200, memory_gb: 141}}'
        for i in range(len(hosts))
    )
    path.write_text(
        f"""apiVersion: rackcert/v1
kind: Rack
metadata: {{name: fanout{len(hosts)}}}
vcenter: {{host: 127.0.0.1, user: u, password_env: NOPE}}
hardware_profiles:
  - name: p
    server_model: bench
    gpus:
{gpus}
hosts:
  - {{name: esx1, address: esx1.invalid, profile: p}}
vm_templates:
  - {{name: t1, vcpus: 1, memory_gb: 1, gpus: 1, nvlink: none, nic: vmxnet3}}
vms:
{vms}
guest:
  nvidia_driver: "580"
  cuda: "13.0"
  container_runtime: none
  ssh: {{user: root, key_file: {hosts[0].key_file}}}
network: {{mtu: 1500}}
"""
    )
    return path


def one_run(spec: Path, runs: Path, extra: list[str]) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "rackcert.cli", "validate", str(spec), "--runs-dir", str(runs)]
    start = time.monotonic()
    done = subprocess.run(cmd + extra, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.monotonic() - start
    records = sorted(runs.glob("*/*/validate.json"))
    if not records:
        raise SystemExit(f"validate wrote no record: {done.stderr.strip()[-300:]}")
    data = json.loads(records[-1].read_text())["data"]
    return wall, data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeat", type=int, default=3, help="runs per point (median)")
    parser.add_argument("--no-facts", action="store_true", help="pass --no-facts to validate")
    parser.add_argument("--fake-gpu", action="store_true", help="fake nvidia-smi on the hosts")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--no-mesh-variant", action="store_true", help="only the all-checks variant"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rackcert-fanout-"))
    subnet = sshhosts.claim_subnet()
    hosts: list[sshhosts.TestHost] = []
    try:
        names = [f"node{i + 1}" for i in range(max(args.sizes))]
        hosts = sshhosts.start_hosts(names, subnet, work / "id_ed25519", state_dir=work / "h")
        for h in hosts:  # SSH trust between peers: the key every host already authorizes
            ssh_dir = h.path("/root/.ssh")
            ssh_dir.mkdir(parents=True, exist_ok=True)
            (ssh_dir / "id_ed25519").write_bytes(h.key_file.read_bytes())
            (ssh_dir / "id_ed25519").chmod(0o600)
        extra = ["--no-facts"] if args.no_facts else []
        if args.fake_gpu:
            tools = work / "tools"
            tools.mkdir()
            (tools / "nvidia-smi").symlink_to(FAKE_SMI)
            extra += ["--tool-path", str(tools)]
        variants = [("all checks", [])]
        if not args.no_mesh_variant:
            variants.append(("without ssh.peers (n x (n-1) mesh)", ["--skip", "ssh.peers"]))
        rows = []
        for label, more in variants:
            for size in args.sizes:
                spec = write_spec(work / f"fanout{size}.yaml", hosts[:size])
                walls, inner, cpu = [], [], []
                for _ in range(args.repeat):
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    wall, data = one_run(spec, work / f"runs{size}", extra + more)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    reached = sum(bool(n["reachable"]) for n in data["nodes"].values())
                    if reached != size:
                        raise SystemExit(f"{size} hosts: only {reached} reached")
                    walls.append(wall)
                    inner.append(data["summary"]["wall_seconds"])
                    cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
                rows.append(
                    {
                        "variant": label,
                        "hosts": size,
                        "wall_s": round(statistics.median(walls), 3),
                        "min_s": round(min(walls), 3),
                        "inside_s": round(statistics.median(inner), 3),
                        "controller_cpu_s": round(statistics.median(cpu), 3),
                        "results": len(data["results"]),
                    }
                )
    finally:
        sshhosts.stop_hosts(hosts)
        sshhosts.release_subnet(subnet)

    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.1f} on {os.cpu_count()} CPUs (shared machine)")
    head = f"{'variant':<36} {'hosts':>5} {'wall s':>7} {'min s':>6} {'cpu s':>6} {'ratio':>6}"
    print(head)
    for label, _ in variants:
        mine = [r for r in rows if r["variant"] == label]
        base = mine[0]["wall_s"]
        for r in mine:
            r["ratio"] = round(r["wall_s"] / base, 2)
            print(
                f"{label:<36} {r['hosts']:>5} {r['wall_s']:>7.2f} {r['min_s']:>6.2f}"
                f" {r['controller_cpu_s']:>6.2f} {r['ratio']:>6.2f}"
            )
        last = mine[-1]
        verdict = "within" if last["ratio"] <= 2 else "NOT within"
        print(
            f"ratio {last['hosts']} hosts / {mine[0]['hosts']} host ({label}): {last['ratio']:.2f}"
            f" ({verdict} the 2x goal; median of {args.repeat} runs"
            f"{', no facts' if args.no_facts else ', pyinfra facts included'})"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
