"""site.yml for real: two SSH test hosts, FAKE vendor packages from a local apt repo.

One first run and one second run (tests/support/plugins/site.py, shared with the bench on the
nodes, tests/integration/test_bench_nodes.py) are checked by one test, section by section. Every
check reads real state on the hosts or the real record.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter

from tests.support.plugins.fake_vendor_repo import CONTAINER_TOOLKIT
from tests.support.plugins.site import ENV_SECRET, LEGACY, SECRET, ConfiguredSite


def test_site_configures_two_hosts_then_changes_nothing(configured_site: ConfiguredSite) -> None:
    _first_run_configures_every_host(configured_site)
    _second_run_changes_nothing_and_prints_summary(configured_site)
    _vendor_packages_installed_at_the_pinned_versions(configured_site)
    _jumbo_frames_ssh_trust_and_shared_mount(configured_site)
    _dl_runtime_environment_runs(configured_site)
    _record_and_artifacts_hold_no_secret(configured_site)


def _first_run_configures_every_host(site: ConfiguredSite) -> None:
    first = site.first
    assert first.status == "ok", first.error
    # The default strategy is Mitogen's: Ansible refuses a strategy it cannot load, so a run
    # that succeeded under this name ran with Mitogen's plugin.
    assert first.data.strategy == "mitogen_linear"
    envvars = json.loads((site.run1 / first.data.artifacts / "env" / "envvars").read_text())
    assert envvars["ANSIBLE_STRATEGY"] == "mitogen_linear"
    assert sorted(first.data.hosts) == ["node1", "node2"]
    for h in first.data.hosts.values():
        assert h.failed == 0 and not h.unreachable
        assert h.changed > 5, h.changed_tasks
    removed = "vendor_package : Remove the one-line source earlier rackcert versions wrote"
    assert removed in first.data.hosts["node1"].changed_tasks
    assert removed not in first.data.hosts["node2"].changed_tasks
    assert not site.hosts[0].path(LEGACY).exists()


def _second_run_changes_nothing_and_prints_summary(site: ConfiguredSite) -> None:
    cli = site.cli
    assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-2000:]
    assert "per-host result" in cli.stdout
    assert "2 hosts: 2 ok, 0 failed, 0 unreachable; 0 changes" in " ".join(cli.stdout.split())
    record = json.loads((site.run2 / "configure.json").read_text())
    assert record["status"] == "ok"
    assert {n: h["changed"] for n, h in record["data"]["hosts"].items()} == {"node1": 0, "node2": 0}
    # Installed at the pinned versions, so the vendor sources were left alone: said, not
    # looked up or rewritten (vendor_package skips its source steps on a rerun).
    ran = Counter(
        e["event_data"].get("task")
        for path in site.run2.glob("artifacts/configure/ansible/*/job_events/*.json")
        for e in [json.loads(path.read_text())]
        if e["event"] == "runner_on_ok"
    )
    assert ran["Say when the wanted version is already there"] == 4 * 2, ran
    assert not ran["Add the package source"], ran
    assert not ran["Find the package index in the local source"], ran


def _version(host, package: str) -> str:
    out = host.exec(["dpkg-query", "-W", "-f=${Version}", package])
    assert out.returncode == 0, out.stderr
    return out.stdout


def _vendor_packages_installed_at_the_pinned_versions(site: ConfiguredSite) -> None:
    for host in site.hosts:
        # The newer decoys in the repo were not taken: the pin from the spec was.
        assert _version(host, "rackcert-fake-cuda-drivers-470") == "470.82.01-1"
        assert _version(host, "rackcert-fake-mlnx-ofed-all") == "5.4-3.1.0.0-1"
        assert _version(host, "rackcert-fake-nvidia-container-toolkit") == "1.14.3-1"
        # The toolkit's three companions at its version, though it asks for the library
        # tools only `>=` its own and the repo has 1.15.0 (NVIDIA's guide pins all four).
        for companion in CONTAINER_TOOLKIT.values():
            assert _version(host, companion) == "1.14.3-1", companion
        # Held, with the driver's and OFED's, so a stray `apt upgrade` moves none of them.
        held = host.exec(["apt-mark", "showhold"]).stdout.split()
        assert "rackcert-fake-libnvidia-container-tools" in held, held
        assert "rackcert-fake-cuda-drivers-470" in held and "rackcert-fake-mlnx-ofed-all" in held
        assert _version(host, "rackcert-fake-cuda-toolkit-11-4") == "11.4.4-1"
        assert "cuda-11.4/bin" in host.path("/etc/profile.d/rackcert-cuda.sh").read_text()
        assert (
            host.path("/etc/modules-load.d/nvidia-peermem.conf")
            .read_text()
            .strip()
            .endswith("nvidia_peermem")
        )
    # ...and the machine itself is untouched (the hosts' /usr and /var are their own).
    assert (
        subprocess.run(
            ["dpkg", "-s", "rackcert-fake-cuda-drivers-470"], capture_output=True
        ).returncode
        != 0
    )


def _jumbo_frames_ssh_trust_and_shared_mount(site: ConfiguredSite) -> None:
    h1, h2 = site.hosts
    for h in (h1, h2):
        assert h.path("/sys/class/net/eth0/mtu").read_text().strip() == "9000"
    # Keyless SSH between the nodes, by name and by address, with the cluster key.
    hop = h1.ssh(
        f"ssh -o BatchMode=yes node2 hostname && ssh -o BatchMode=yes {h1.address} hostname"
    )
    assert hop.returncode == 0, hop.stderr
    assert hop.stdout.split() == ["node2", "node1"]
    keys = {h.path("/root/.ssh/id_rackcert_cluster.pub").read_text() for h in (h1, h2)}
    assert len(keys) == 1
    # The nodes trust exactly the host keys the controller enrolled (no ssh-keyscan of
    # their own): every key in a node's known_hosts is one from the rack's known_hosts.
    rack = {tuple(ln.split()[1:3]) for ln in (site.run1.parent / "known_hosts").open()}
    node = h1.path("/root/.ssh/known_hosts").read_text().splitlines()
    trusted = {tuple(ln.split()[1:3]) for ln in node if ln and not ln.startswith("#")}
    assert trusted and trusted <= rack
    # The bind-mounted "export" is one directory seen by both nodes.
    wrote = h1.ssh("echo from-node1 > /mnt/rackcert-data/probe && findmnt -n /mnt/rackcert-data")
    assert wrote.returncode == 0, wrote.stderr
    assert h2.ssh("cat /mnt/rackcert-data/probe").stdout == "from-node1\n"
    assert "/mnt/rackcert-data none bind" in h2.path("/etc/fstab").read_text()


def _dl_runtime_environment_runs(site: ConfiguredSite) -> None:
    for h in site.hosts:
        out = h.ssh("/opt/rackcert/venv/bin/python -c 'import sys; print(sys.prefix)'")
        assert out.stdout.strip() == "/opt/rackcert/venv", out.stderr
        # The bench's compile cache (validation/bench/node/compilecache.py): the SSH user's alone.
        cache = "/opt/rackcert/venv/var/cache/rackcert/compile"
        out = h.ssh(f"stat -c '%a %U' {cache}")
        assert out.stdout.split() == ["700", h.user], out.stdout + out.stderr


def _record_and_artifacts_hold_no_secret(site: ConfiguredSite) -> None:
    record = json.loads((site.run1 / "configure.json").read_text())
    assert record["stage"] == "configure"
    for host in record["data"]["hosts"].values():
        assert set(host) >= {"ok", "changed", "failed", "unreachable", "failures", "status"}
    events = list((site.run1 / "artifacts/configure/ansible").glob("*/job_events/*.json"))
    assert len(events) > 50
    # The cluster's private key went from node1 to node2 through Ansible, under no_log.
    key = site.hosts[0].path("/root/.ssh/id_rackcert_cluster").read_text().splitlines()[2]
    for run in (site.run1, site.run2):
        for path in run.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert SECRET.encode() not in data, path
                assert ENV_SECRET.encode() not in data, path
                assert key.encode() not in data, path
