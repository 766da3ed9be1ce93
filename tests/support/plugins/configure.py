"""Fixtures for the configure tests: a rack spec whose VMs are real SSH test hosts.

    loaded = spec_for_hosts(hosts, tmp_path, sources=fake_vendor_repo.sources)

starts from inventories/lab.yaml (the lab's real shape) and points its VMs at the
given hosts (names, addresses, ports, client key) and its bind export at a
directory the hosts share.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.paths import REPO_ROOT
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import LoadedSpec, load_spec
from rackcert.lab.sshhosts.host import TestHost
from tests.support.spec_helpers import gateway_on_subnet_of

LAB_SPEC = Path(__file__).resolve().parents[3] / "inventories" / "lab.yaml"


def spec_for_hosts(
    hosts: list[TestHost],
    directory: Path,
    *,
    sources: dict[str, dict[str, str]] | None = None,
    export: Path | None = None,
    guest: dict[str, Any] | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> LoadedSpec:
    """Write and load a spec like lab.yaml whose VMs are `hosts` (`edit` changes the data
    before it is loaded)."""
    data = yaml.safe_load(LAB_SPEC.read_text())
    template = data["vms"][0]["template"]
    esx = [h["name"] for h in data["hosts"]]
    data["vms"] = [
        {
            "name": h.name,
            "template": template,
            "host": esx[i % len(esx)],
            "address": h.address,
            "ssh_port": h.port,
        }
        for i, h in enumerate(hosts)
    ]
    data["guest"]["ssh"]["key_file"] = str(hosts[0].key_file)
    gateway_on_subnet_of(data, hosts[0].address)
    if sources:
        data["guest"]["sources"] = sources
    data["guest"].update(guest or {})
    if export is not None:
        data["storage"]["nfs"]["export"] = str(export)
    if edit is not None:
        edit(data)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def air_gap(hosts: list[TestHost]) -> None:
    """Drop the distribution's package lists on the hosts (their own /var overlay only).

    The nodes can reach no mirror anyway (their network is the test bridge); with the
    lists gone, apt's cache holds just the vendor source, as on an air-gapped site,
    and rebuilding it after the source is added takes a moment instead of ~10 s.
    """
    for h in hosts:
        out = h.exec(["sh", "-c", "rm -f /var/lib/apt/lists/*_dists_* /var/cache/apt/*.bin"])
        assert out.returncode == 0, out.stderr


def bench_two_hosts(
    loaded: LoadedSpec,
    run: RunDir,
    first: TestHost,
    *args: str,
    timeout: float,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`rackcert bench` on two SSH test hosts of one rank each, as a subprocess: the quick
    sizes, the first host's known_hosts and the run directory, then the test's own `args`
    (launcher, backend, skips, --json); `env` adds to this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "bench", str(loaded.path), "--nodes", "2",
         "--gpus-per-node", "1", "--quick", "--max-bytes", "1048576",
         "--known-hosts", str(first.known_hosts), "--run", str(run.path), *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
    )  # fmt: skip
