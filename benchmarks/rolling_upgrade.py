"""Rolling upgrade pace: a 16-host x 2-VM rack rolled on the twin's clock.

The rack is the Dell R750xa design (tests/pace_helpers.rack_spec) on the rack twin, its
host image and guest driver both moving. Each host carries one VM of each of two Slurm
partitions (gpu-a, gpu-b), so `--max-unavailable 1` (one node out per partition) takes
one host at a time, 2 two hosts, 4 four. The roll is rackcert's own (rackcert.upgrade)
through the real Hypervisor port (rackcert.rollout.VSphereHypervisor, pyVmomi against the
twin): maintenance with rackcert's mark, the reboot the twin models (twin/clock.go: 60 s
connected, then 480 s down for a PowerEdge R750xa's POST), exit, power-on. The parts
the twin does not model are timed stand-ins on the same clock, declared here:

    drain wait (the last job on the node ends)   600 s   DRAIN_S
    host image apply (vLCM stage + install)      600 s   IMAGE_S
    guest layer (driver install + VM reboot)     900 s   GUEST_S
    the node's validate + per-node localisation  300 s   VALIDATE_S

Every duration runs at `--scale` (default 0.002: a modelled hour is 7.2 s), so wall time
divided by the scale is the modelled real time; this controller's own overheads (the
record's fsynced writes after every transition, pyVmomi, the twin's CPU) are scaled up by
the same factor, so the figures are an upper bound of the clock alone.

The roll's record is written ahead of every step (upgrade.json, fsynced; group-committed,
rackcert/upgrade/record.py), a few hundred writes a roll. On a shared disk one fsync took
12-44 ms here, and the clock scales each 500 times: 30 ms a write made a 4-host wave 1.25x
one host's chain on its own. So by default the records go to memory (`--records`, /dev/shm),
where the same writes cost nothing; the table still prints their count and time, and
`--records disk` measures this machine's disk instead.

Printed per budget: the modelled wall time, node-hours out of service (drain to resume,
summed over nodes), the ratio of the wall time to waves x one host's chain (one host
rolled alone, measured first; goal <= 1.1) and this controller's CPU seconds.

    .venv/bin/python benchmarks/rolling_upgrade.py
    .venv/bin/python benchmarks/rolling_upgrade.py --budgets 1 4 --json roll.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DRAIN_S, IMAGE_S, GUEST_S, VALIDATE_S = 600.0, 600.0, 900.0, 300.0
DEFAULT_RECORDS = "/dev/shm" if Path("/dev/shm").is_dir() else "disk"


class ModelSlurm:
    """A node drained while a job runs stays DRAINING for DRAIN_S modelled seconds."""

    kind = "slurm"

    def __init__(self, nodes: dict[str, str], scale: float):
        self.part = nodes
        self.scale = scale
        self.drained: dict[str, tuple[str, float]] = {}
        self.lock = threading.Lock()

    def nodes(self, names: list[str]) -> dict[str, Any]:
        from rackcert.upgrade.ports import NodeState

        now = time.monotonic()
        out = {}
        with self.lock:
            for n in names:
                reason, free_at = self.drained.get(n, ("", 0.0))
                busy = bool(reason) and now < free_at
                out[n] = NodeState(n, "MIXED" if busy else "IDLE", bool(reason),
                                   int(busy), reason, (self.part[n],))  # fmt: skip
        return out

    def drain(self, node: str, reason: str) -> None:
        with self.lock:
            free_at = self.drained.get(node, ("", time.monotonic() + DRAIN_S * self.scale))[1]
            self.drained[node] = (reason, free_at)

    def resume(self, node: str) -> None:
        with self.lock:
            self.drained.pop(node, None)

    set_reason = drain


class Timed:
    """The host image, the guest layer and the certifier as timed stand-ins."""

    def __init__(self, scale: float, versions: dict[str, str], image: dict[str, str]):
        self.scale = scale
        self.versions: dict[str, dict[str, str]] = {}
        self.base = versions
        self.images: dict[str, dict[str, str]] = {}
        self.image = image

    # HostImage
    def current(self, host: str) -> dict[str, str]:
        return dict(self.images.get(host, self.image))

    def apply(self, target: str, versions: dict[str, str]) -> None:
        if target.startswith("esx"):
            time.sleep(IMAGE_S * self.scale)
            self.images[target] = dict(versions)
        else:
            time.sleep(GUEST_S * self.scale)
            self.versions[target] = dict(versions)

    # Certifier
    def baseline(self, nodes: list[str]) -> dict[str, Any]:
        from rackcert.upgrade.ports import Certificate

        return {
            n: Certificate(versions=dict(self.base), checks={"gpu.count": "pass"}) for n in nodes
        }

    def certify(self, node: str, versions: dict[str, str]) -> Any:
        from rackcert.upgrade.ports import Certificate

        time.sleep(VALIDATE_S * self.scale)
        return Certificate(versions=dict(self.versions.get(node, self.base)),
                           checks={"gpu.count": "pass"})  # fmt: skip


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def one_roll(hosts: int, budget: str, scale: float, records: Path | None = None) -> dict[str, Any]:
    """Roll one twin of `hosts` x 2 VMs with this budget; the figures. The roll's record
    (upgrade.json) goes under `records` (default: beside the twin's files)."""
    import yaml

    from provision.vsphere_ops import set_poll_cap
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import load_spec, parse_spec
    from rackcert.rollout import VSphereHypervisor
    from rackcert.upgrade.budget import Budget
    from rackcert.upgrade.layers import guest_versions, host_versions
    from rackcert.upgrade.machine import Ports, Roll, Timing
    from rackcert.upgrade.plan import PlanOptions, build_plan
    from tests.support.pace_helpers import rack_spec
    from tests.support.plugins.vcsim import TwinFactory

    base = Path(tempfile.mkdtemp(prefix="rackcert-roll-"))
    factory = TwinFactory(base)
    made: list[Path] = []  # record directories in memory
    try:
        spec_path = rack_spec(base / "rack.yaml", hosts, 2)
        spec0 = load_spec(spec_path).spec
        addr = {h.name: h.address for h in spec0.hosts}
        vms = [{"name": v.name, "host": addr[v.host], "cpus": 2, "memory_mb": 2048}
               for v in spec0.vms]  # fmt: skip
        lab = factory(spec_path, vms=vms, desc={"clock": {"scale": scale}})
        loaded = load_spec(lab.spec_path)
        before = loaded.spec
        data = yaml.safe_load(loaded.text)
        data["guest"]["nvidia_driver"] = "470.141.03"
        for h in data["hosts"]:
            h["esxi_version"] = "7.0.3u"
        after = parse_spec(yaml.safe_dump(data, sort_keys=False), "new.yaml")
        parts = {v.name: ("gpu-a" if v.name.endswith("-0") else "gpu-b") for v in before.vms}
        slurm = ModelSlurm(parts, scale)
        hv = VSphereHypervisor(before, wait_guest=False)
        for v in before.vms:
            hv.power_on(v.name)
        states = slurm.nodes(list(parts))
        plan = build_plan(
            before, after.spec, PlanOptions(Budget.parse(budget), allow_uncertified=True),
            certified_run="certified", reference=None, matrix_where="-", states=states,
        )  # fmt: skip
        assert not plan.blocking(), plan.blocking()
        timed = Timed(scale, guest_versions(before), host_versions(before, before.hosts[0].name))
        ports = Ports(slurm, hv, timed, timed, timed)  # type: ignore[arg-type]
        if records:
            runs = Path(tempfile.mkdtemp(prefix="rackcert-roll-", dir=records))
            made.append(runs)
        else:
            runs = base
        run = RunDir.create(runs / "runs", before.metadata.name, after.sha256, after.text)
        set_poll_cap(max(0.005, 10 * scale))  # task polls at 10 modelled s, as provision_pace
        timing = Timing(shutdown_timeout=300 * scale, reboot_timeout=3600 * scale,
                        poll=max(0.005, 10 * scale))  # fmt: skip
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        started = time.monotonic()
        roll = Roll(plan, run, ports, timing)
        out = roll.run()
        wall = time.monotonic() - started
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        assert out.status == "done", out.stopped_because
        assert all(n.state == "resumed" for n in out.nodes), [n.state for n in out.nodes]
        out_s = 0.0
        for node in out.nodes:
            start = _t(next(s.started_at for s in node.steps if s.step == "drain"))
            end = _t(next(s.ended_at for s in node.steps if s.step == "resume"))
            out_s += end - start
        return {
            "hosts": hosts,
            "vms": len(before.vms),
            "max_unavailable": budget,
            "waves": len(plan.waves),
            "scale": scale,
            "wall_s": round(wall, 2),
            "modelled_h": round(wall / scale / 3600, 2),
            "node_hours_out": round(out_s / scale / 3600, 1),
            "controller_cpu_s": round(cpu, 2),
            # The record's durable writes (upgrade.json, fsynced, group-committed): this
            # machine's disk, waited on by the roll's threads, scaled up like its CPU.
            "record_writes": roll.rec.writes,
            "record_write_s": round(roll.rec.write_s, 2),
            # This controller's own time (CPU + record writes) as a share of the wall time:
            # that part of the modelled time is this machine's, not the rack's.
            "controller_share": round((cpu + roll.rec.write_s) / wall, 3),
        }
    finally:
        factory.stop_all()
        for path in [*made, base]:  # the twin's files and the records: nothing left behind
            shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--budgets", nargs="+", default=["1", "2", "4"])
    parser.add_argument("--scale", type=float, default=0.002)
    parser.add_argument(
        "--records",
        default=DEFAULT_RECORDS,
        help="where the roll writes upgrade.json: a directory (default %(default)s, memory:"
        " every fsync is free), or `disk` (the temporary directory: this machine's disk,"
        " whose fsync latency the clock scales up with the rest)",
    )
    parser.add_argument("--json", type=Path, help="Also write the figures here")
    args = parser.parse_args(argv)
    records = None if args.records == "disk" else Path(args.records)
    chain = one_roll(1, "1", args.scale, records)
    chain_h = chain["modelled_h"]
    print(
        f"one host's chain (1 host x 2 VMs): {chain_h:.2f} h modelled ({chain['wall_s']} s;"
        f" controller CPU {chain['controller_cpu_s']} s, {chain['record_writes']} record writes"
        f" {chain['record_write_s']} s, share {100 * chain['controller_share']:.0f} %)"
    )
    rows = []
    print(
        f"{'budget':>6} {'waves':>5} {'wall (h)':>9} {'node-h out':>10} {'ratio':>6} {'cpu s':>6}"
        f" {'writes':>6} {'write s':>7} {'share':>6}"
    )
    for budget in args.budgets:
        row = one_roll(args.hosts, budget, args.scale, records)
        row["ratio"] = round(row["modelled_h"] / (row["waves"] * chain_h), 3)
        rows.append(row)
        print(
            f"{budget:>6} {row['waves']:>5} {row['modelled_h']:>9.2f}"
            f" {row['node_hours_out']:>10.1f} {row['ratio']:>6.3f} {row['controller_cpu_s']:>6.2f}"
            f" {row['record_writes']:>6} {row['record_write_s']:>7.2f}"
            f" {100 * row['controller_share']:>5.0f}%"
        )
    if args.json:
        args.json.write_text(json.dumps({"chain": chain, "rolls": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
