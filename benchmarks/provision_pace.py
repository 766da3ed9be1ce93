"""Rack pace: how long a new rack's provision takes, in a real rack's time.

Provisions twins of 16 hosts x 2 VMs and 64 hosts x 4 VMs (Dell R750xa, 4 x A100 each),
twice each: with `--parallelism 1` (provision's order before lanes: one host, then the
next, one vCenter task at a time) and with the defaults (a new rack's hosts all at once,
10 tasks in flight). The twin's clock runs a real rack's task durations times `--scale`
(twin/clock.go: a host reboot 9 minutes, a clone 20 s + disk at 400 MB/s, guest
boot 90 s), so a measured wall time divided by the scale is the modelled real time. That
figure is the apply's span in provision.json (first action's start to the last one's end;
discovery and planning, seconds at any size, are left out); it includes this controller's
own overheads (its polls, pyVmomi, the twin's CPU on a shared machine) scaled up by the
same factor, so it is an upper bound of what the clock alone gives.

Also printed: one host's chain (a 1-host rack of the same VMs per host, defaults), the
ratio of the defaults to it (goal: a new rack within 1.3x of one host's chain), and this
controller's CPU seconds and peak memory for each run (each run in its own process).

The VMs' guests are stood in for by their VMware Tools alone: when a VM powers on, a
thread here reports its address over the twin's Tools channel, which the twin holds until
the VM's modelled guest boot is over (a real guest's vmtoolsd cannot report earlier).

    .venv/bin/python benchmarks/provision_pace.py                 # 16x2 and 64x4
    .venv/bin/python benchmarks/provision_pace.py --sizes 16x2 --json pace.json
    .venv/bin/python benchmarks/provision_pace.py --scale 0.005   # slower, less overhead
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rackcert.lab import lifetime  # noqa: E402


class ToolsStandIn:
    """Each powered-on VM's Tools report its spec address (the twin holds them until the
    guest has booted): the benchmark's stand-in for booting guests."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.stop = threading.Event()
        self.reported: set[str] = set()

    def run(self) -> None:
        from pyVmomi import vim

        from provision.session import connect

        with connect(self.spec) as si:
            content = si.RetrieveContent()
            view = content.viewManager.CreateContainerView(
                content.rootFolder, [vim.VirtualMachine], True
            )
            while not self.stop.wait(0.05):
                for vm in view.view:
                    name = vm.name
                    if name in self.reported or self.spec_vm(name) is None:
                        continue
                    if str(vm.runtime.powerState) == "poweredOn":
                        self.reported.add(name)
                        uuid = vm.config.uuid
                        threading.Thread(target=self.report, args=(name, uuid), daemon=True).start()

    def spec_vm(self, name: str) -> Any:
        return next((v for v in self.spec.vms if v.name == name), None)

    def report(self, name: str, uuid: str) -> None:
        from rackcert.lab.guest_agent import tools_rpc

        address = self.spec_vm(name).address
        for command in ("tools.set.version 12352", f"SetGuestInfo  1 {name}",
                        f"SetGuestInfo  2 {address}"):  # fmt: skip
            tools_rpc(self.spec, uuid, command, timeout=600)


def one_run(hosts: int, vms_per_host: int, parallelism: int, scale: float) -> dict[str, Any]:
    """Provision one twin in this process; the figures for it."""
    from provision.pace import Pace
    from provision.stage import run as provision
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import load_spec
    from tests.pace_helpers import rack_spec
    from tests.plugins.vcsim import TwinFactory

    base = Path(tempfile.mkdtemp(prefix="rackcert-pace-"))
    factory = TwinFactory(base)
    try:
        spec_path = rack_spec(base / "rack.yaml", hosts, vms_per_host)

        def boot_timeout(data: dict[str, Any]) -> None:
            data["network"]["management"]["boot_timeout_s"] = 600

        lab = factory(spec_path, desc={"clock": {"scale": scale}}, edit=boot_timeout)
        loaded = load_spec(lab.spec_path)
        tools = ToolsStandIn(loaded.spec)
        thread = threading.Thread(target=tools.run, daemon=True)
        thread.start()
        run_dir = RunDir.create(
            base / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text
        )
        # Polls at a fixed share of the clock, so their granularity is the same modelled time
        # at any scale (2 s between task polls at most on a real rack: here 20 x scale).
        pace = Pace(parallelism=parallelism, poll_s=max(0.01, 10 * scale))
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        started = time.monotonic()
        error = ""
        try:
            provision(loaded, run_dir, yes=True, pace=pace)
        except Exception as exc:  # noqa: BLE001 - reported in the table, not raised
            error = str(exc)[:200]
        wall = time.monotonic() - started
        record = json.loads((run_dir.path / "provision.json").read_text())["data"]
        done = len(record["done"])
        stamps = [(_t(a["started_at"]), _t(a["ended_at"])) for a in record["done"]]
        span = max(e for _, e in stamps) - min(s for s, _ in stamps) if stamps else 0.0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        tools.stop.set()
        thread.join(timeout=10)
        return {
            "hosts": hosts,
            "vms": hosts * vms_per_host,
            "parallelism": parallelism,
            "scale": scale,
            "wall_s": round(wall, 2),
            "apply_wall_s": round(span, 2),
            "modelled_s": round(span / scale),
            "controller_cpu_s": round(
                (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime), 2
            ),
            "peak_rss_mb": round(cpu1.ru_maxrss / 1024, 1),
            "actions_done": done,
            "error": error,
        }
    finally:
        factory.stop_all()


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.rstrip("Z")).timestamp()


def in_process(hosts: int, vms_per_host: int, parallelism: int, scale: float) -> dict[str, Any]:
    """one_run in a fresh Python, so CPU and peak memory are that run's alone."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--one", f"{hosts}x{vms_per_host}",
         "--parallelism", str(parallelism), "--scale", str(scale)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate()
    except BaseException:  # a signal: the run stops its twin (SIGTERM), not left by a SIGKILL
        lifetime.stop_child(proc)
        raise
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"run {hosts}x{vms_per_host} -p {parallelism} failed: {stderr[-800:]}")
    return dict(json.loads(lines[-1]))


def hms(seconds: float) -> str:
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16x2,64x4", help="HOSTSxVMS_PER_HOST, comma-separated")
    parser.add_argument("--scale", type=float, default=0.005, help="the twin's clock scale")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--parallelism", type=int, default=10, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        hosts, per = (int(x) for x in args.one.split("x"))
        print(json.dumps(one_run(hosts, per, args.parallelism, args.scale)), flush=True)
        return
    rows = []
    for size in args.sizes.split(","):
        hosts, per = (int(x) for x in size.split("x"))
        chain = in_process(1, per, 10, args.scale)
        sequential = in_process(hosts, per, 1, args.scale)
        parallel = in_process(hosts, per, 10, args.scale)
        row = {
            "size": size,
            "one_host_chain": chain,
            "parallelism_1": sequential,
            "defaults": parallel,
            "speedup": round(sequential["modelled_s"] / parallel["modelled_s"], 2),
            "ratio_to_one_host_chain": round(parallel["modelled_s"] / chain["modelled_s"], 2),
        }
        rows.append(row)
        print(
            f"{size}: one host's chain {hms(chain['modelled_s'])};"
            f" --parallelism 1 {hms(sequential['modelled_s'])}"
            f" (CPU {sequential['controller_cpu_s']} s, peak {sequential['peak_rss_mb']} MB);"
            f" defaults {hms(parallel['modelled_s'])}"
            f" (CPU {parallel['controller_cpu_s']} s, peak {parallel['peak_rss_mb']} MB);"
            f" speedup {row['speedup']}x; defaults / one host's chain"
            f" {row['ratio_to_one_host_chain']}x",
            flush=True,
        )
        for name, result in (("chain", chain), ("p1", sequential), ("defaults", parallel)):
            if result["error"]:
                print(f"  {name}: {result['error']}", flush=True)
    header = (
        "| rack | one host's chain | --parallelism 1 | defaults | speedup | defaults / chain |"
        " controller CPU s (p1 / defaults) | peak RSS MB (p1 / defaults) |"
    )
    print()
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        p1, d = row["parallelism_1"], row["defaults"]
        print(
            f"| {row['size']} | {hms(row['one_host_chain']['modelled_s'])} |"
            f" {hms(p1['modelled_s'])} | {hms(d['modelled_s'])} | {row['speedup']}x |"
            f" {row['ratio_to_one_host_chain']}x | {p1['controller_cpu_s']} /"
            f" {d['controller_cpu_s']} | {p1['peak_rss_mb']} / {d['peak_rss_mb']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/provision_pace.py", main))
