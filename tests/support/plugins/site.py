"""Fixture: two SSH test hosts configured by site.yml, twice (the second run through the CLI).

    def test_x(configured_site):
        site = configured_site      # .hosts, .loaded, .first, .cli, .run1, .run2, .runs

Session-scoped, shared by tests/integration/test_configure_site.py (which judges both runs and what
they left on the hosts) and tests/integration/test_bench_nodes.py (which benches on the nodes as
configured): one unit of work under xdist (tests/support/plugins/schedule.py's TOGETHER), so one
worker runs the two configure runs once. A site.yml run on two fresh hosts costs a minute
on two cores; before, the bench module configured a pair of its own (ssh_trust and
dl_runtime, ~25 s loaded). What the bench tests change they put back (node2's host key);
the rest (runs under /tmp on the nodes) configure's checks never read.

FAKE vendor packages come from a local apt repo (tests/support/plugins/fake_vendor_repo.py); the
hosts share one bind-mounted export; one node carries the one-line apt source an earlier
rackcert wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import LoadedSpec
from rackcert.core.stage_records import ConfigureRecord
from rackcert.lab.sshhosts.host import TestHost
from tests.support.plugins.configure import air_gap, spec_for_hosts

SECRET = "s3cr3t-Seeded-Become-7781"
ENV_SECRET = "env-Only-Secret-4417"
LEGACY = "/etc/apt/sources.list.d/rackcert-cuda.list"


@dataclass
class ConfiguredSite:
    hosts: list[TestHost]
    loaded: LoadedSpec
    first: ConfigureRecord  # the first run, in process
    cli: subprocess.CompletedProcess[str]  # the second run, through the CLI
    run1: Path
    run2: Path
    runs: Path  # the runs directory (its lab/known_hosts holds the enrolled host keys)

    def run(self) -> RunDir:
        """A new run beside the two configure runs (the rack's known_hosts is shared)."""
        return RunDir.create(self.runs, "lab", self.loaded.sha256, self.loaded.text)


@pytest.fixture(scope="session")
def configured_site(
    ssh_hosts_session, fake_vendor_repo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredSite]:
    work = tmp_path_factory.mktemp("site")
    export = work / "export"
    hosts = ssh_hosts_session(["node1", "node2"], shared=[export])
    air_gap(hosts)
    # node1 carries the one-line apt source an earlier rackcert wrote: vendor_package
    # removes it (where rackcert_facts saw it), node2 has none to remove.
    hosts[0].path(LEGACY).write_text("deb [trusted=yes] file:/opt/rackcert/gone ./\n")
    loaded = spec_for_hosts(hosts, work, sources=fake_vendor_repo.sources, export=export)
    runs = work / "runs"
    # A secret only the environment holds: ansible-runner copies the environment into
    # its `command` artifact, and REDACTOR has never heard of this value.
    os.environ["RACKCERT_TEST_UNRELATED_PASSWORD"] = ENV_SECRET
    try:
        run1 = RunDir.create(runs, "lab", loaded.sha256, loaded.text)
        first = configure(loaded, run1, become_password=SECRET)
        # The second run goes through the CLI, as an operator would run it.
        env = dict(os.environ, RC_TEST_BECOME=SECRET)
        cli = subprocess.run(
            [sys.executable, "-m", "rackcert.cli", "configure", str(loaded.path)]
            + ["--runs-dir", str(runs), "--become-password-env", "RC_TEST_BECOME"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        os.environ.pop("RACKCERT_TEST_UNRELATED_PASSWORD", None)
    run2 = [p for p in (runs / "lab").iterdir() if p.is_dir() and p != run1.path][0]
    yield ConfiguredSite(hosts, loaded, first, cli, run1.path, run2, runs)
