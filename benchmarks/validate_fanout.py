"""Fan-out benchmark: `rackcert validate` on 1, 16 and 64 SSH test hosts, controller vs hosts.

Goals (issue "Fleet scale"): the controller spends at most 0.05 s of CPU per node, and
16 hosts take at most 2x the wall time of one, with all checks and the default peers
(ring neighbours + 2, validation.peer_choice). Each point is the end-to-end CLI run
(interpreter start, one probe script per node over SSH, the pytest suite, facts.json,
records) against real sshd test hosts in network namespaces (rackcert.lab.sshhosts),
median of --repeat runs after one unmeasured run per size (first contact enrols the
host keys: a one-off per rack, not what every validate after an upgrade pays); the
repeats take turns between the sizes, and the least CPU of the repeats is printed too.

Two CPU figures, kept apart:
- controller: rackcert's own processes (CLI, pytest, the ssh clients), the children
  this script waits for;
- hosts: every sshd session on the test hosts (the probe scripts, the peers' ssh
  logins), read from each host's sshd (its children's CPU, /proc/PID/stat). On a real
  rack that runs on the nodes' own CPUs; here it shares this machine's cores with the
  controller, which is why the wall-time ratio here is an upper bound of a real rack's.

"per node" is the controller's marginal cost: (cpu(n) - cpu(1)) / (n - 1). The
projection to 256 and 1,024 nodes fits cpu = fixed + per_node x n by least squares on
the measured sizes, and checks itself: fitted on all but the largest size, how far
does it miss the largest one?

Like the lab, the hosts have no GPU tools (GPU checks fail "nvidia-smi not found");
`--fake-gpu` puts the test suite's fake nvidia-smi on their PATH.

    sudo .venv/bin/python benchmarks/validate_fanout.py                 # 1 16 64
    sudo .venv/bin/python benchmarks/validate_fanout.py --sizes 1 16 --repeat 3 --peers all
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

from rackcert.lab import lifetime  # noqa: E402
from rackcert.lab.sshhosts.host import TestHost  # noqa: E402
from rackcert.lab.sshhosts.network import claim_subnet, release_subnet  # noqa: E402
from rackcert.lab.sshhosts.start import start_hosts, stop_hosts  # noqa: E402

FAKE_SMI = ROOT / "tests" / "support" / "fakes" / "fake-nvidia-smi"
TICK = os.sysconf("SC_CLK_TCK")
PROJECT = (256, 1024)


def write_spec(path: Path, hosts: list[TestHost]) -> Path:
    vms = "\n".join(
        f"  - {{name: {h.name}, template: t1, host: esx{i // 8}, address: {h.address},"
        f" ssh_port: {h.port}}}"
        for i, h in enumerate(hosts)
    )
    gpus = "\n".join(
        f'      - {{pci: "0000:{0x10 + i:02x}:00.0", model: NVIDIA H200, memory_gb: 141}}'
        for i in range(8)
    )
    esx = "\n".join(
        f"  - {{name: esx{i}, address: esx{i}.invalid, profile: p}}"
        for i in range((len(hosts) + 7) // 8)
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
{esx}
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


def hosts_cpu(hosts: list[TestHost]) -> float:
    """CPU seconds of every finished sshd session on these hosts (their sshd's children)."""
    total = 0
    for h in hosts:
        try:
            pid = int((h.runtime_dir / "sshd.pid").read_text().strip())
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        total += int(fields[13]) + int(fields[14])  # cutime, cstime (stat fields 16, 17)
    return total / TICK


def one_run(spec: Path, runs: Path, extra: list[str]) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "rackcert.cli", "validate", str(spec), "--runs-dir", str(runs)]
    start = time.monotonic()
    done = subprocess.run(cmd + extra, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.monotonic() - start
    records = sorted(runs.glob("*/*/validate.json"))
    if not records:
        raise SystemExit(f"validate wrote no record: {done.stderr.strip()[-300:]}")
    return wall, json.loads(records[-1].read_text())["data"]


def measure(sizes, hosts, work, extra, repeat) -> list[dict]:
    """Each size's figures. The repeats take turns between the sizes (1, 16, 64, 1, 16, ...),
    so that a burst of other work on a shared machine weighs on every size alike."""
    specs = {size: write_spec(work / f"fanout{size}.yaml", hosts[:size]) for size in sizes}
    for size in sizes:
        one_run(specs[size], work / f"runs{size}", extra)  # first contact: keys enrolled
    got: dict[int, dict[str, list]] = {size: {"wall": [], "cpu": [], "hosts": []} for size in sizes}
    data: dict[int, dict] = {}
    for _ in range(repeat):
        for size in sizes:
            before, h_before = resource.getrusage(resource.RUSAGE_CHILDREN), hosts_cpu(hosts)
            wall, data[size] = one_run(specs[size], work / f"runs{size}", extra)
            after, h_after = resource.getrusage(resource.RUSAGE_CHILDREN), hosts_cpu(hosts)
            reached = sum(bool(n["reachable"]) for n in data[size]["nodes"].values())
            if reached != size:
                raise SystemExit(f"{size} hosts: only {reached} reached")
            got[size]["wall"].append(wall)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            got[size]["cpu"].append(cpu)
            got[size]["hosts"].append(h_after - h_before)
    rows = []
    for size in sizes:
        cpus, peers = got[size]["cpu"], (data[size].get("peers") or {}).get("checked", 0)
        rows.append(
            {
                "hosts": size,
                "wall_s": round(statistics.median(got[size]["wall"]), 3),
                "controller_cpu_s": round(statistics.median(cpus), 3),
                # Other work on a shared machine only ever adds CPU time (contended caches):
                # the least of the repeats is the closest to what the controller needs.
                "controller_cpu_min_s": round(min(cpus), 3),
                "hosts_cpu_s": round(statistics.median(got[size]["hosts"]), 3),
                "logins": size + peers,
                "peer_logins": peers,
                "results": len(data[size]["results"]),
            }
        )
    return rows


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares cpu = fixed + per_node x n."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--repeat", type=int, default=1, help="measured runs per point (median)")
    parser.add_argument("--no-facts", action="store_true", help="pass --no-facts to validate")
    parser.add_argument("--peers", help="pass --peers to validate (all, or a number)")
    parser.add_argument("--fake-gpu", action="store_true", help="fake nvidia-smi on the hosts")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes))

    work = Path(tempfile.mkdtemp(prefix="rackcert-fanout-"))
    subnet = claim_subnet()
    hosts: list[TestHost] = []
    try:
        names = [f"node{i + 1}" for i in range(max(sizes))]
        hosts = start_hosts(names, subnet, work / "id_ed25519", state_dir=work / "h")
        for h in hosts:  # SSH trust between peers: the key every host already authorizes
            ssh_dir = h.path("/root/.ssh")
            ssh_dir.mkdir(parents=True, exist_ok=True)
            (ssh_dir / "id_ed25519").write_bytes(h.key_file.read_bytes())
            (ssh_dir / "id_ed25519").chmod(0o600)
        extra = ["--no-facts"] if args.no_facts else []
        extra += ["--peers", args.peers] if args.peers else []
        if args.fake_gpu:
            tools = work / "tools"
            tools.mkdir()
            (tools / "nvidia-smi").symlink_to(FAKE_SMI)
            extra += ["--tool-path", str(tools)]
        rows = measure(sizes, hosts, work, extra, args.repeat)
    finally:
        stop_hosts(hosts)
        release_subnet(subnet)

    report(rows, args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def report(rows: list[dict], args: argparse.Namespace) -> None:
    base = rows[0]
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.1f} on {os.cpu_count()} CPUs (shared machine)")
    print(
        f"{'hosts':>5} {'wall s':>7} {'ratio':>6} {'ctrl cpu s':>10} {'ctrl/node s':>11}"
        f" {'hosts cpu s':>11} {'hosts/node s':>12} {'logins':>6}"
    )
    for r in rows:
        r["ratio"] = round(r["wall_s"] / base["wall_s"], 2)
        extra_nodes = r["hosts"] - base["hosts"]
        per = (r["controller_cpu_s"] - base["controller_cpu_s"]) / extra_nodes if extra_nodes else 0
        r["controller_cpu_per_node_s"] = round(per, 4)
        r["hosts_cpu_per_node_s"] = round(r["hosts_cpu_s"] / r["hosts"], 4)
        print(
            f"{r['hosts']:>5} {r['wall_s']:>7.2f} {r['ratio']:>6.2f} {r['controller_cpu_s']:>10.2f}"
            f" {per if extra_nodes else float('nan'):>11.3f} {r['hosts_cpu_s']:>11.2f}"
            f" {r['hosts_cpu_per_node_s']:>12.3f} {r['logins']:>6}"
        )
    cores = os.cpu_count() or 1
    for r in rows:
        # The test hosts run on this machine's cores: the wall time cannot go below the
        # CPU of controller and hosts together spread over the cores.
        floor = (r["controller_cpu_s"] + r["hosts_cpu_s"]) / cores
        print(f"  {r['hosts']:>4} hosts: (controller + hosts CPU) / {cores} cores = {floor:.2f} s")
    if len(rows) >= 2 and args.repeat > 1:
        least = []
        for r in rows[1:]:
            extra = r["hosts"] - base["hosts"]
            per = (r["controller_cpu_min_s"] - base["controller_cpu_min_s"]) / extra
            r["controller_cpu_per_node_min_s"] = round(per, 4)
            least.append(f"{r['hosts']} hosts {per:.3f} s")
        print("controller CPU per node from the least of the repeats: " + ", ".join(least))
    points = [(r["hosts"], r["controller_cpu_s"]) for r in rows]
    if len(points) >= 2:
        fixed, per_node = fit(points)
        print(f"controller CPU fit: {fixed:.2f} s + {per_node:.4f} s x nodes (goal <= 0.05 s/node)")
        for n in PROJECT:
            logins = n * (1 + 4) if not args.peers else None
            more = f", {logins} logins per run" if logins else ""
            print(
                f"  projected at {n:>5} nodes: {fixed + per_node * n:7.1f} s controller CPU{more}"
            )
        if len(points) >= 3:
            f2, p2 = fit(points[:-1])
            n_last, measured = points[-1]
            guess = f2 + p2 * n_last
            print(
                f"  check: fitted on {', '.join(str(x) for x, _ in points[:-1])} hosts it"
                f" predicts {guess:.2f} s at {n_last}, measured {measured:.2f} s"
                f" ({100 * (guess - measured) / measured:+.0f}%)"
            )
    for r in rows[1:]:
        if r["hosts"] == 16:
            verdict = "within" if r["ratio"] <= 2 else "NOT within"
            print(f"wall 16 hosts / 1 host: {r['ratio']:.2f} ({verdict} the 2x goal)")


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/validate_fanout.py", main))
