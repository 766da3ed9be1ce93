"""A node carried from one certified driver to the next and back, for real, on an SSH test host.

The host gets a FAKE GPU (a PCI device of vendor 0x10de in a sysfs stand-in), the FAKE
nvidia-smi, and the FAKE reboot (tests/support/fakes/fake-reboot): the module a "boot" loads is the
one installed then, so an installed driver shows in nvidia-smi only after a reboot, as on a
real node. The fake vendor repository's driver branches 535 and 550 Conflict as the real
packages do (tests/support/plugins/fake_vendor_repo.py). One test walks the journey in order, each
step judged on the host's real dpkg database, its apt holds and the record:

535.161.08 installed, rebooted into and held; a rerun changes nothing; `apt-get upgrade`
leaves the held driver although the repository has 535.183.01; 550.54.15 with the reboot
skipped purges 535, holds 550 and leaves the reason on the node, and a rerun says it is
still pending; the next run reboots into 550 (the interrupted upgrade finished); then the
versions recorded before the branch change (`versions_from`) take the node back to 535.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from rackcert.lab.sshhosts.host import TestHost
from tests.support.configure_versions import FAKES, LAB_VARS, STATE
from tests.support.configure_versions import fake_gpu_node as _fake_gpu_node
from tests.support.configure_versions import smi_driver as _smi_driver
from tests.support.plugins.configure import air_gap, spec_for_hosts
from tests.support.plugins.fake_vendor_repo import DRIVER, FAKE_PACKAGES, KERNEL


def _dpkg(host: TestHost) -> dict[str, tuple[str, str]]:
    """name -> (version, want) of every installed fake driver package."""
    out = host.exec(
        ["dpkg-query", "-W", "-f=${db:Status-Status} ${db:Status-Want} ${Package} ${Version}\n"]
    )
    rows = [ln.split() for ln in out.stdout.splitlines()]
    return {
        r[2]: (r[3], r[1])
        for r in rows
        if r[0] == "installed"
        and "nvidia-kernel" in r[2]
        or r[0] == "installed"
        and "cuda-drivers" in r[2]
    }


def _run(loaded, runs: Path, **kw):
    run = RunDir.create(runs, "lab", loaded.sha256, loaded.text)
    extravars = {**LAB_VARS, **kw.pop("extravars", {})}
    rec = configure(loaded, run, tags=["nvidia_driver"], extravars=extravars, **kw)
    assert rec.status == "ok", rec.error
    return rec, run


def _spec(host, fake_vendor_repo, tmp_path, version: str):
    branch = version.split(".")[0]
    sources = {
        "nvidia_driver": {
            "path": str(fake_vendor_repo.path),
            "package": DRIVER.format(branch=branch),
        }
    }
    return spec_for_hosts(
        [host], tmp_path / version, sources=sources, guest={"nvidia_driver": version}
    )


def test_driver_535_to_550_and_back(ssh_hosts, fake_vendor_repo, tmp_path):
    (node,) = ssh_hosts(["node1"])
    air_gap([node])
    _fake_gpu_node(node)
    runs = tmp_path / "runs"
    d535 = {
        DRIVER.format(branch="535"): ("535.161.08-1", "hold"),
        KERNEL.format(branch="535"): ("535.161.08-1", "hold"),
    }
    d550 = {
        DRIVER.format(branch="550"): ("550.54.15-1", "hold"),
        KERNEL.format(branch="550"): ("550.54.15-1", "hold"),
    }
    s535 = _spec(node, fake_vendor_repo, tmp_path, "535.161.08")
    s550 = _spec(node, fake_vendor_repo, tmp_path, "550.54.15")

    # First install: the pinned version (not the newer 535.183.01), held, rebooted into.
    first, _ = _run(s535, runs)
    host = first.data.hosts["node1"]
    assert _dpkg(node) == d535
    assert _smi_driver(node) == "535.161.08"
    assert "nvidia_driver : Reboot into the installed driver" in host.changed_tasks, (
        host.changed_tasks
    )
    assert not node.path("/var/lib/rackcert/reboot-required").read_text().strip()

    # A rerun at the same version changes nothing.
    again, _ = _run(s535, runs)
    assert again.data.hosts["node1"].changed == 0, again.data.hosts["node1"].changed_tasks

    # A stray upgrade cannot move the held driver, though the repository has a newer one.
    upg = node.exec(["apt-get", "-s", "upgrade"])
    assert "535.183.01" not in upg.stdout, upg.stdout
    listed = node.exec(["apt-cache", "policy", DRIVER.format(branch="535")]).stdout
    assert "535.183.01-1" in listed  # the decoy is there to be taken
    up = node.exec(["apt-get", "-y", "upgrade"], timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr
    assert _dpkg(node) == d535

    # Branch change with the reboot skipped: 535 purged (no rc leftovers), 550 held, the
    # reason on the node, and the loaded module still 535.
    skipped, run3 = _run(s550, runs, extravars={"nvidia_driver_skip_reboot": True})
    assert _dpkg(node) == d550
    assert (
        "rc" not in node.exec(["dpkg", "-l", DRIVER.format(branch="535")]).stdout.split()[-5:][0:1]
    )
    assert _smi_driver(node) == "535.161.08"
    reason = node.path("/var/lib/rackcert/reboot-required").read_text()
    assert reason.startswith(
        "nvidia_driver: the loaded module is 535.161.08, the installed driver 550.54.15"
    ), reason
    before = skipped.data.hosts["node1"].outcomes["rackcert_facts_versions"]
    assert (
        before["nvidia_driver"] == "535.161.08" and before["nvidia_driver_loaded"] == "535.161.08"
    )
    assert before["nvidia_driver_package"] == DRIVER.format(branch="535")
    # Still pending: the rerun with the skip says so as a change, never "ok".
    pending, _ = _run(s550, runs, extravars={"nvidia_driver_skip_reboot": True})
    assert (
        "nvidia_driver : Say that the reboot is pending"
        in pending.data.hosts["node1"].changed_tasks
    )

    # The next run without the skip reboots: the upgrade left half-done is finished.
    done, _ = _run(s550, runs)
    assert (
        "nvidia_driver : Reboot into the installed driver" in done.data.hosts["node1"].changed_tasks
    )
    assert _smi_driver(node) == "550.54.15"
    assert "nvidia_driver" not in node.path("/var/lib/rackcert/reboot-required").read_text()
    assert done.data.hosts["node1"].outcomes["rackcert_facts_versions"]["reboot_required"]

    # Back to what the node ran before the branch change, from that run's record.
    back, _ = _run(s550, runs, limit="node1", versions_from=run3.path)
    assert back.data.hosts["node1"].changed > 0
    assert _dpkg(node) == d535
    assert _smi_driver(node) == "535.161.08"


def _fake_ofed_node(host: TestHost) -> None:
    """ofed_info reporting the installed FAKE OFED, modprobe/dkms logging their calls, and the
    vendor's uninstaller, on the host's own /usr."""
    local = host.path("/usr/local")
    shutil.copy(FAKES / "fake-ofed-tools", local / "bin/ofed_info")
    (local / "bin/fake-ofed.env").write_text(f"OFED_PACKAGE={FAKE_PACKAGES['ofed'][0]}\n")
    (local / "sbin").mkdir(exist_ok=True)
    for name in ("modprobe", "dkms"):
        shutil.copy(FAKES / "fake-kmod", local / "sbin" / name)
    shutil.copy(FAKES / "fake-ofed-uninstall", host.path("/usr/sbin/ofed_uninstall.sh"))


def test_ofed_changes_around_a_loaded_peermem(ssh_hosts, fake_vendor_repo, tmp_path):
    (node,) = ssh_hosts(["node1"])
    air_gap([node])
    _fake_ofed_node(node)
    runs = tmp_path / "runs"
    name = FAKE_PACKAGES["ofed"][0]
    sources = {"ofed": {"path": str(fake_vendor_repo.path), "package": name}}
    extravars = {"ofed_sysfs_module_dir": f"{STATE}/sys-module"}

    def spec(version: str):
        return spec_for_hosts([node], tmp_path / version, sources=sources, guest={"ofed": version})

    def run(version: str):
        run = RunDir.create(runs, "lab", spec(version).sha256, spec(version).text)
        rec = configure(spec(version), run, tags=["ofed"], extravars=extravars)
        assert rec.status == "ok", rec.error
        return rec.data.hosts["node1"]

    run("5.4-3.1.0.0")
    assert node.exec(["ofed_info", "-s"]).stdout == "MLNX_OFED_LINUX-5.4-3.1.0.0:\n"
    assert node.exec(["modprobe", "nvidia_peermem"]).returncode == 0  # GPUDirect RDMA in use
    calls = node.path(f"{STATE}/calls")
    calls.write_text("")

    host = run("5.8-1.0.1.1")
    # NVIDIA's order: peermem out, the MLNX_OFED uninstalled, the new one in, DKMS rebuilt
    # against it, peermem back (openibd restarts between, where systemd and a NIC are).
    assert calls.read_text().splitlines() == [
        "modprobe -r nvidia_peermem",
        "ofed_uninstall.sh --force",
        "dkms autoinstall",
        "modprobe nvidia_peermem",
    ]
    assert node.exec(["ofed_info", "-s"]).stdout == "MLNX_OFED_LINUX-5.8-1.0.1.1:\n"
    held = node.exec(["apt-mark", "showhold"]).stdout.split()
    assert held == [name], held
    assert node.path(f"{STATE}/sys-module/nvidia_peermem").is_dir()
    assert host.changed > 0

    again = run("5.8-1.0.1.1")
    assert again.changed == 0, again.changed_tasks


def test_vgpu_guest_driver_from_a_run_file_checked_against_the_host_manager(ssh_hosts, tmp_path):
    (node,) = ssh_hosts(["node1"])
    _fake_gpu_node(node)
    version = "550.127.05"
    run_file = tmp_path / f"NVIDIA-Linux-x86_64-{version}-grid.run"
    run_file.write_text((FAKES / "fake-grid-run").read_text().replace("@VERSION@", version))
    digest = hashlib.sha256(run_file.read_bytes()).hexdigest()
    sources = {"nvidia_driver": {"path": str(run_file), "sha256": digest}}
    loaded = spec_for_hosts([node], tmp_path, sources=sources, guest={"nvidia_driver": version})
    runs = tmp_path / "runs"

    def run(manager: str):
        run = RunDir.create(runs, "lab", loaded.sha256, loaded.text)
        return configure(
            loaded, run, tags=["nvidia_driver"], extravars=LAB_VARS,
            host_vars={"node1": {"nvidia_driver_vgpu_manager": manager}},
        )  # fmt: skip

    # vGPU 16's manager (R535) cannot host an R550 guest: refused before anything is copied.
    refused = run("535.154.02-1OEM.702.0.0.17630552")
    assert refused.status == "failed"
    message = refused.data.hosts["node1"].failures[0].message
    assert (
        "guest driver 550.127.05 (R550) is of a newer branch than the host's vGPU manager"
        in message
    )
    assert not node.path("/var/lib/rackcert/nvidia_driver.run-version").exists()
    assert _smi_driver(node) == "rc=9"  # no driver loaded

    # vGPU 17's manager (R550): installed from the checked file, rebooted into.
    done = run("550.127.06-1OEM.800.1.0.20613240")
    assert done.status == "ok", done.error
    assert _smi_driver(node) == version
    assert node.path(f"{STATE}/calls").read_text().splitlines() == ["grid.run --silent"]
    again = run("550.127.06-1OEM.800.1.0.20613240")
    assert again.data.hosts["node1"].changed == 0, again.data.hosts["node1"].changed_tasks
