"""Discovery round trips and seconds, rackcert vs a naive per-object pyVmomi walk.

Builds twins of 4, 16, 64 and 256 R750xa hosts (4 x A100, one dual-port
ConnectX-6 each, one VM per host) and reads the same facts both ways:

- rackcert: provision.discovery.discover (ContainerView + one RetrievePropertiesEx,
  followed through its pages: every page is a round trip, counted as such);
- naive: list the view, then read each property of each host and VM through
  pyVmomi's lazy accessors (one RetrieveProperties per property read), plus one
  QueryOptions per host for the ATS option, as hand-written scripts do.

    .venv/bin/python benchmarks/discovery.py            # 4 16 64 256
    .venv/bin/python benchmarks/discovery.py 4 16 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provision.discovery import discover  # noqa: E402
from provision.roundtrips import count_round_trips  # noqa: E402
from provision.session import connect  # noqa: E402
from rackcert.lab import twin  # noqa: E402
from rackcert.paths import REPO_ROOT  # noqa: E402
from rackcert.spec_loader import load_spec  # noqa: E402


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


def measure(count: int, workdir: Path) -> dict[str, Any]:
    loaded = load_spec(REPO_ROOT / "inventories" / "r750xa-4node.yaml").spec
    files = twin.TwinFiles.in_dir(workdir / f"n{count}")
    desc = twin.synthetic_description(count, loaded, files)
    desc["tls"] = True
    started = twin.start(desc, files)
    try:
        spec = loaded.model_copy(deep=True)
        vc = spec.vcenter
        vc.host, vc.port, vc.protocol = "127.0.0.1", started.port, "https"
        vc.password_env, vc.password_file = None, str(files.password_file)
        vc.tls.ca_file, vc.tls.thumbprint = str(files.cert_file), None
        with connect(spec) as si:
            inventory = discover(si)
            assert len(inventory.hosts) == count, (len(inventory.hosts), count)
            t0 = time.perf_counter()
            with count_round_trips(si) as naive:
                seen = naive_walk(si)
            naive_s = time.perf_counter() - t0
            assert seen == count
        return {
            "hosts": count,
            "rackcert_round_trips": inventory.round_trips,
            "rackcert_pages": inventory.pages,
            "objects": len(inventory.hosts) + len(inventory.vms),
            "rackcert_seconds": inventory.seconds,
            "naive_round_trips": naive.calls,
            "naive_seconds": round(naive_s, 4),
        }
    finally:
        started.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=[4, 16, 64, 256])
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args(argv)
    twin.build()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rackcert-bench-") as tmp:
        for count in args.counts:
            rows.append(measure(count, Path(tmp)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'hosts':>6} {'objects':>7} | {'pages':>5} {'rackcert trips':>14} {'seconds':>8} |"
        f" {'naive trips':>11} {'seconds':>8}"
    )
    for r in rows:
        print(
            f"{r['hosts']:>6} {r['objects']:>7} | {r['rackcert_pages']:>5}"
            f" {r['rackcert_round_trips']:>14} {r['rackcert_seconds']:>8.3f} |"
            f" {r['naive_round_trips']:>11} {r['naive_seconds']:>8.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
