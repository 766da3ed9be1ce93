"""Capture and rehearsal times against a twin of N R750xa hosts (default 4 and 64).

For each size it starts a twin standing for the real vCenter (N hosts of the
r750xa-4node profile, 4 x A100 and a dual-port ConnectX-6 each, one powered-off VM
per host outside the spec), writes a spec for those hosts with one 1-GPU VM each,
and measures:

- discovery: provision.discovery.discover, median of --repeat runs;
- capture: provision.capture.capture (the same retrieval with more properties, plus
  QueryConfigTarget where a VM holds a fixed passthrough device), median, and its
  ratio to discovery (the issue's bound: at most 2x);
- rehearse: rackcert.rehearse.rehearse end to end (capture, twin from the capture,
  plan, apply with every host's maintenance mode and reboot, clones, power-on, read
  back, second plan), with its parts.

    .venv/bin/python benchmarks/rehearse.py              # 4 64
    .venv/bin/python benchmarks/rehearse.py 4 --repeat 5 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provision.capture import capture  # noqa: E402
from provision.discovery import discover  # noqa: E402
from provision.session import connect  # noqa: E402
from rackcert.core.paths import REPO_ROOT  # noqa: E402
from rackcert.core.runs import RunDir  # noqa: E402
from rackcert.core.spec_loader import load_spec  # noqa: E402
from rackcert.lab import lifetime, twin  # noqa: E402
from rackcert.rehearse import rehearse  # noqa: E402

BASE = REPO_ROOT / "inventories" / "r750xa-4node.yaml"


def bench_spec(count: int, started: twin.Twin, files: twin.TwinFiles, workdir: Path) -> Path:
    """r750xa-4node.yaml for the twin's N hosts, one 1-GPU VM per host."""
    data = yaml.safe_load(BASE.read_text())
    data["metadata"]["name"] = f"bench-{count}"
    profile = data["hardware_profiles"][0]["name"]
    data["hosts"] = [
        {"name": f"esx{i:03d}", "address": f"esx{i:03d}.bench.internal", "profile": profile}
        | {"esxi_version": "7.0.3"}
        for i in range(count)
    ]
    data["vms"] = [
        {"name": f"node{i:03d}", "template": "dl-1gpu", "host": f"esx{i:03d}"}
        | {"address": f"10.10.{i // 200}.{11 + i % 200}"}
        for i in range(count)
    ]
    data["network"]["management"]["prefix"] = 16
    data["network"]["management"].pop("gateway", None)
    data["network"]["management"]["wait_for"] = "tools"
    vc = data["vcenter"]
    vc.update(host="127.0.0.1", port=started.port, protocol="https")
    vc.pop("password_env", None)
    vc["password_file"] = str(files.password_file)
    vc["tls"] = {"verify": True, "ca_file": str(files.cert_file)}
    key = workdir / "id_ed25519"
    if not key.is_file():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    data["guest"]["ssh"]["key_file"] = str(key)
    path = workdir / f"bench-{count}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _median(fn: Any, repeat: int) -> tuple[float, Any]:
    times, last = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), last


def measure(count: int, repeat: int, workdir: Path) -> dict[str, Any]:
    loaded = load_spec(BASE).spec
    files = twin.TwinFiles.in_dir(workdir / f"n{count}")
    desc = twin.synthetic_description(count, loaded, files)
    desc["tls"] = True
    started = twin.start(desc, files)
    try:
        spec_path = bench_spec(count, started, files, workdir)
        bench = load_spec(spec_path)
        with connect(bench.spec) as si:
            discovery_s, inventory = _median(lambda: discover(si), repeat)
            capture_s, (taken, _) = _median(lambda: capture(si), repeat)
        assert len(inventory.hosts) == count
        run = RunDir.create(workdir / "runs", bench.spec.metadata.name, bench.sha256, bench.text)
        t0 = time.perf_counter()
        record = rehearse(bench, run)
        wall = time.perf_counter() - t0
        data = record.data
        return {
            "hosts": count,
            "discovery_s": round(discovery_s, 3),
            "capture_s": round(capture_s, 3),
            "capture_vs_discovery": round(capture_s / discovery_s, 2),
            "capture_round_trips": taken.round_trips,
            "discovery_round_trips": inventory.round_trips,
            "capture_bytes": len(taken.to_json().encode()),
            "rehearse_s": round(wall, 2),
            "rehearse_parts_s": data.seconds,
            "actions": len(data.actions),
            "refusals": len(data.refusals),
            "second_plan": len(data.second_plan),
        }
    finally:
        started.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=[4, 64])
    parser.add_argument("--repeat", type=int, default=3, help="discovery/capture runs (median)")
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args(argv)
    twin.build()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rackcert-bench-") as tmp:
        for count in args.counts:
            rows.append(measure(count, args.repeat, Path(tmp)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'hosts':>5} | {'discover s':>10} {'capture s':>9} {'ratio':>5} {'trips':>5}"
        f" {'bytes':>9} | {'rehearse s':>10} {'actions':>7} {'refused':>7} {'2nd plan':>8}"
        " | rehearsal parts (s)"
    )
    for r in rows:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["rehearse_parts_s"].items())
        print(
            f"{r['hosts']:>5} | {r['discovery_s']:>10.3f} {r['capture_s']:>9.3f}"
            f" {r['capture_vs_discovery']:>5.2f} {r['capture_round_trips']:>5}"
            f" {r['capture_bytes']:>9} | {r['rehearse_s']:>10.2f} {r['actions']:>7}"
            f" {r['refusals']:>7} {r['second_plan']:>8} | {parts}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(lifetime.run_main("benchmarks/rehearse.py", main))
