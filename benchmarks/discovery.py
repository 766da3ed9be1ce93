"""Discovery round trips and seconds, rackcert vs a naive per-object pyVmomi walk.

Builds twins of 4, 16, 64 and 256 R750xa hosts (4 x A100, one dual-port
ConnectX-6 each, one VM per host, or --vms-per-host) and reads the same facts both ways:

- rackcert: provision.discovery.discover (ContainerView + one RetrievePropertiesEx,
  followed through its pages: every page is a round trip, counted as such);
- naive: list the view, then read each property of each host and VM through
  pyVmomi's lazy accessors (one RetrieveProperties per property read), plus one
  QueryOptions per host for the ATS option, as hand-written scripts do.

    .venv/bin/python benchmarks/discovery.py            # 4 16 64 256
    .venv/bin/python benchmarks/discovery.py 4 16 --json
    .venv/bin/python benchmarks/discovery.py 2500       # vCenter 7.0's maximum, 4 VMs per host
    .venv/bin/python benchmarks/discovery.py 2500 --repeat 5   # five discoveries, one twin

At vCenter's configuration maximum (2,500 hosts per vCenter, vSphere 7.0
configuration maximums) the goal is at most 10 s with round trips of 4 + pages
(about, view, retrieve + continues, destroy view). Each page's XML is parsed as it
streams in and each object converted to rackcert's models as it closes, then dropped
(provision.soapstream): the controller holds the models and one object's XML.

Per size: wall seconds, the controller's CPU (this process, during discovery) and the
twin's (its /proc stat, same interval), "RSS MB" this process's peak resident memory
during the discovery (VmHWM, reset just before it), "RSS+ MB" that peak above the
resident memory before it, "held MB" what the finished inventory's models take
(tracemalloc): RSS+ close to held MB is the pages streamed, not held. `--trace-memory`
also traces a second discovery's Python peak (tracemalloc slows it down). The naive
walk is skipped above 256 hosts (--naive-max).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provision.discovery import discover  # noqa: E402
from provision.roundtrips import count_round_trips  # noqa: E402
from provision.session import connect  # noqa: E402
from rackcert.core.paths import REPO_ROOT  # noqa: E402
from rackcert.core.spec_loader import load_spec  # noqa: E402
from rackcert.lab import lifetime, twin  # noqa: E402


def naive_walk(si: Any) -> int:
    """Read the same host and VM facts one property at a time; returns hosts seen."""
    from pyVmomi import vim

    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(
        content.rootFolder, [vim.HostSystem, vim.VirtualMachine], True
    )
    hosts = 0
    for obj in view.view:
        if isinstance(obj, vim.HostSystem):
            hosts += 1
            _ = (obj.name, obj.summary.hardware, obj.summary.rebootRequired)
            _ = (obj.config.product, obj.config.pciPassthruInfo)
            _ = (obj.hardware.pciDevice, obj.hardware.numaInfo, obj.hardware.systemInfo)
            _ = (obj.runtime.connectionState, obj.runtime.inMaintenanceMode)
            obj.configManager.advancedOption.QueryOptions("VMkernel.Boot.atsSupport")
        else:
            _ = (obj.name, obj.runtime.host, obj.runtime.powerState)
            _ = (obj.config.firmware, obj.config.hardware.device, obj.config.extraConfig)
            _ = obj.config.memoryReservationLockedToMax
    view.DestroyView()
    return hosts


def _traced_peak_mb(si: Any) -> float:
    """Peak Python memory of a second discovery, traced (tracemalloc slows it down, so the
    timed discovery runs without it): the inventory's models plus one page in flight."""
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    inventory = discover(si)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del inventory
    return peak / 1024 / 1024


def _status_mb(field: str) -> float:
    """VmRSS (resident now) or VmHWM (peak resident) of this process, from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak_rss() -> None:
    """Start VmHWM again from the current RSS (Linux 4.0+: "5" to /proc/self/clear_refs), so
    the peak is discovery's own, not the twin description's built before it."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _twin_cpu_s(pid: int) -> float:
    """User + system CPU seconds of the twin process (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(si: Any, twin_pid: int) -> tuple[Any, dict[str, float]]:
    """One discovery: its inventory, wall and CPU seconds (ours, the twin's), peak RSS."""
    load = os.getloadavg()[0]
    gc.collect()
    _reset_peak_rss()
    before, cpu, twin_cpu = _status_mb("VmRSS"), _cpu_s(), _twin_cpu_s(twin_pid)
    t0 = time.perf_counter()
    inventory = discover(si)
    wall = time.perf_counter() - t0
    cpu, twin_cpu = _cpu_s() - cpu, _twin_cpu_s(twin_pid) - twin_cpu
    rss_peak = _status_mb("VmHWM")
    return inventory, {
        "load": round(load, 2),
        "wall_seconds": round(wall, 3),
        "controller_cpu_seconds": round(cpu, 2),
        "twin_cpu_seconds": round(twin_cpu, 2),
        "peak_rss_mb": round(rss_peak, 1),
        "peak_rss_growth_mb": round(rss_peak - before, 1),
    }


def measure(
    count: int,
    workdir: Path,
    vms_per_host: int = 1,
    naive_max: int = 256,
    trace: bool = False,
    repeat: int = 1,
) -> dict[str, Any]:
    loaded = load_spec(REPO_ROOT / "inventories" / "r750xa-4node.yaml").spec
    files = twin.TwinFiles.in_dir(workdir / f"n{count}")
    desc = twin.synthetic_description(count, loaded, files, vms_per_host=vms_per_host)
    desc["tls"] = True
    t0 = time.perf_counter()
    started = twin.start(desc, files, timeout=900)
    twin_start_s = time.perf_counter() - t0
    try:
        spec = loaded.model_copy(deep=True)
        vc = spec.vcenter
        vc.host, vc.port, vc.protocol = "127.0.0.1", started.port, "https"
        vc.password_env, vc.password_file = None, str(files.password_file)
        vc.tls.ca_file, vc.tls.thumbprint = str(files.cert_file), None
        with connect(spec) as si:
            inventory, timed = _timed(si, started.pid)
            again = [_timed(si, started.pid)[1] for _ in range(repeat - 1)]
            peak = _traced_peak_mb(si) if trace else None
            assert len(inventory.hosts) == count, (len(inventory.hosts), count)
            ours = sum(v.name.startswith("vm") for v in inventory.vms)
            assert ours == count * vms_per_host, (ours, count * vms_per_host)
            naive_trips, naive_s = None, None
            if count <= naive_max:
                t0 = time.perf_counter()
                with count_round_trips(si) as naive:
                    seen = naive_walk(si)
                naive_s, naive_trips = round(time.perf_counter() - t0, 4), naive.calls
                assert seen == count
        return {
            "hosts": count,
            "vms": len(inventory.vms),
            "twin_start_seconds": round(twin_start_s, 1),
            **timed,
            "again": again,
            "rackcert_round_trips": inventory.round_trips,
            "rackcert_pages": inventory.pages,
            "objects": len(inventory.hosts) + len(inventory.vms),
            "rackcert_seconds": inventory.seconds,
            "traced_peak_mb": round(peak, 1) if peak is not None else None,
            "held_mb": round(_held_mb(inventory), 1),
            "naive_round_trips": naive_trips,
            "naive_seconds": naive_s,
        }
    finally:
        started.stop()


def _held_mb(inventory: Any) -> float:
    """Memory of the inventory's models alone: a deep copy, measured by tracemalloc."""
    import tracemalloc

    tracemalloc.start()
    copy = inventory.model_copy(deep=True)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del copy
    return held / 1024 / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=[4, 16, 64, 256])
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    parser.add_argument(
        "--vms-per-host", type=int, help="VMs on each host (default: 1, or 4 above 256 hosts)"
    )
    parser.add_argument("--naive-max", type=int, default=256, help="no naive walk above this")
    parser.add_argument(
        "--trace-memory", action="store_true", help="also trace a second discovery's peak"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="discoveries per twin (one row each; load varies)"
    )
    args = parser.parse_args(argv)
    twin.build()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rackcert-bench-") as tmp:
        for count in args.counts:
            per = args.vms_per_host or (4 if count > 256 else 1)
            rows.append(
                measure(count, Path(tmp), per, args.naive_max, args.trace_memory, args.repeat)
            )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{os.cpu_count()} CPUs; load: the 1-minute load average when each size started")
    print(
        f"{'hosts':>6} {'vms':>6} {'objects':>7} | {'pages':>5} {'trips':>5} {'wall s':>7}"
        f" {'ctl CPU s':>9} {'twin CPU s':>10} {'RSS MB':>7} {'RSS+ MB':>7} {'held MB':>7} |"
        f" {'naive trips':>11} {'seconds':>8} | {'twin start s':>12} {'load':>5}"
    )
    for r in rows:
        naive = r["naive_round_trips"]
        print(
            f"{r['hosts']:>6} {r['vms']:>6} {r['objects']:>7} | {r['rackcert_pages']:>5}"
            f" {r['rackcert_round_trips']:>5} {r['wall_seconds']:>7.2f}"
            f" {r['controller_cpu_seconds']:>9.2f} {r['twin_cpu_seconds']:>10.2f}"
            f" {r['peak_rss_mb']:>7.1f} {r['peak_rss_growth_mb']:>7.1f} {r['held_mb']:>7.1f} |"
            f" {naive if naive is not None else '-':>11}"
            f" {r['naive_seconds'] if naive is not None else '-':>8}"
            f" | {r['twin_start_seconds']:>12} {r['load']:>5.1f}"
        )
        for a in r["again"]:
            print(
                f"{'':>6} {'':>6} {'':>7} | {'':>5} {'':>5} {a['wall_seconds']:>7.2f}"
                f" {a['controller_cpu_seconds']:>9.2f} {a['twin_cpu_seconds']:>10.2f}"
                f" {a['peak_rss_mb']:>7.1f} {a['peak_rss_growth_mb']:>7.1f} {'':>7} |"
                f" {'':>11} {'':>8} | {'(again)':>12} {a['load']:>5.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/discovery.py", main))
