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
    guest has booted): the benchmark's stand-in for booting guests.

    One PropertyCollector read of every VM's name, power state and uuid per poll, a poll
    every `poll_s` (a fixed share of the twin's clock, like the controller's own polls):
    reading each VM's properties one call at a time every 50 ms cost this process and the
    twin more CPU than provision itself, and that CPU counts in the modelled time."""

    def __init__(self, spec: Any, poll_s: float) -> None:
        self.spec = spec
        self.poll_s = poll_s
        self.stop = threading.Event()
        self.reported: set[str] = set()

    def run(self) -> None:
        from pyVmomi import vim

        from provision.session import connect
        from provision.viewspec import view_filter_spec

        with connect(self.spec) as si:
            content = si.RetrieveContent()
            view = content.viewManager.CreateContainerView(
                content.rootFolder, [vim.VirtualMachine], True
            )
            paths = {vim.VirtualMachine: ["name", "runtime.powerState", "config.uuid"]}
            spec = view_filter_spec(view, paths)
            while not self.stop.wait(self.poll_s):
                for obj in content.propertyCollector.RetrieveContents([spec]) or []:
                    props = {p.name: p.val for p in obj.propSet or []}
                    name = props.get("name")
                    if name in self.reported or self.spec_vm(name) is None:
                        continue
                    if str(props.get("runtime.powerState")) == "poweredOn":
                        self.reported.add(name)
                        uuid = props.get("config.uuid")
                        threading.Thread(target=self.report, args=(name, uuid), daemon=True).start()

    def spec_vm(self, name: Any) -> Any:
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
    from tests.support.pace_helpers import rack_spec
    from tests.support.plugins.vcsim import TwinFactory

    base = Path(tempfile.mkdtemp(prefix="rackcert-pace-"))
    factory = TwinFactory(base)
    try:
        spec_path = rack_spec(base / "rack.yaml", hosts, vms_per_host)

        def boot_timeout(data: dict[str, Any]) -> None:
            data["network"]["management"]["boot_timeout_s"] = 600

        lab = factory(spec_path, desc={"clock": {"scale": scale}}, edit=boot_timeout)
        loaded = load_spec(lab.spec_path)
        # Polls at a fixed share of the clock, so their granularity is the same modelled time
        # at any scale (2 s between task polls at most on a real rack: here 20 x scale).
        poll_s = max(0.01, 10 * scale)
        tools = ToolsStandIn(loaded.spec, poll_s)
        thread = threading.Thread(target=tools.run, daemon=True)
        thread.start()
        run_dir = RunDir.create(
            base / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text
        )
        pace = Pace(parallelism=parallelism, poll_s=poll_s)
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
        twin_cpu = process_cpu_s(lab.twin.pid)
        tools.stop.set()
        thread.join(timeout=10)
        controller_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        return {
            "hosts": hosts,
            "vms": hosts * vms_per_host,
            "parallelism": parallelism,
            "scale": scale,
            "wall_s": round(wall, 2),
            "apply_wall_s": round(span, 2),
            "modelled_s": round(span / scale),
            "controller_cpu_s": round(controller_cpu, 2),
            # This machine's CPU, scaled up as the clock is: at most that much of modelled_s
            # is this controller's (its polls, pyVmomi, the Tools stand-in) or the twin's own
            # work, not the rack's. The rack's clock alone is modelled_s less it, at least.
            "controller_modelled_s": round(controller_cpu / scale),
            "twin_cpu_s": round(twin_cpu, 2),
            "twin_modelled_s": round(twin_cpu / scale),
            "peak_rss_mb": round(cpu1.ru_maxrss / 1024, 1),
            "actions_done": done,
            "error": error,
        }
    finally:
        factory.stop_all()


def process_cpu_s(pid: int) -> float:
    """A running process's CPU seconds, user and system (proc(5): stat fields 14 and 15)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def share(result: dict[str, Any]) -> str:
    """`C + T s (P %)`: the controller's and the twin's CPU scaled up, and their share."""
    part = result["controller_modelled_s"] + result["twin_modelled_s"]
    pct = 100 * part / result["modelled_s"] if result["modelled_s"] else 0.0
    return (
        f"{hms(result['controller_modelled_s'])} + {hms(result['twin_modelled_s'])} ({pct:.0f} %)"
    )


def rack_clock_s(result: dict[str, Any]) -> int:
    """Modelled time less this machine's CPU scaled up: the rack's own clock, at least."""
    return max(
        0, result["modelled_s"] - result["controller_modelled_s"] - result["twin_modelled_s"]
    )


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
    parser.add_argument(
        "--no-sequential",
        action="store_true",
        help="skip the --parallelism 1 run (it takes hosts x one chain: long at a large scale)",
    )
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
        sequential = None if args.no_sequential else in_process(hosts, per, 1, args.scale)
        parallel = in_process(hosts, per, 10, args.scale)
        rack_chain = rack_clock_s(chain)
        row = {
            "size": size,
            "scale": args.scale,
            "one_host_chain": chain,
            "parallelism_1": sequential,
            "defaults": parallel,
            "speedup": round(sequential["modelled_s"] / parallel["modelled_s"], 2)
            if sequential
            else None,
            "ratio_to_one_host_chain": round(parallel["modelled_s"] / chain["modelled_s"], 2),
            # the same ratio with this machine's CPU (scaled up) taken out of both runs
            "ratio_less_cpu": round(rack_clock_s(parallel) / rack_chain, 2) if rack_chain else None,
        }
        rows.append(row)
        runs = [("chain", chain), ("p1", sequential), ("defaults", parallel)]
        print(
            f"{size} at scale {args.scale:g}:"
            + "".join(
                f" {name} {hms(r['modelled_s'])} (this machine's CPU scaled up: {share(r)});"
                for name, r in runs
                if r
            )
            + f" defaults / one host's chain {row['ratio_to_one_host_chain']}x"
            f" ({row['ratio_less_cpu']}x less the CPU)",
            flush=True,
        )
        for name, result in runs:
            if result and result["error"]:
                print(f"  {name}: {result['error']}", flush=True)
    print()
    print(
        "| rack | scale | one host's chain | --parallelism 1 | defaults | speedup |"
        " defaults / chain | the same less CPU | controller + twin CPU scaled up"
        " (chain; defaults) | controller CPU s (p1 / defaults) | peak RSS MB (p1 / defaults) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for row in rows:
        c, p1, d = row["one_host_chain"], row["parallelism_1"], row["defaults"]
        print(
            f"| {row['size']} | {row['scale']:g} | {hms(c['modelled_s'])} |"
            f" {hms(p1['modelled_s']) if p1 else '-'} | {hms(d['modelled_s'])} |"
            f" {str(row['speedup']) + 'x' if row['speedup'] else '-'} |"
            f" {row['ratio_to_one_host_chain']}x | {row['ratio_less_cpu']}x |"
            f" {share(c)}; {share(d)} |"
            f" {p1['controller_cpu_s'] if p1 else '-'} / {d['controller_cpu_s']} |"
            f" {p1['peak_rss_mb'] if p1 else '-'} / {d['peak_rss_mb']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/provision_pace.py", main))
