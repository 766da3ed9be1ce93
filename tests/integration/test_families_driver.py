"""The vendor stack carried forward and back on Ubuntu 22.04/24.04 and RHEL 9 stand-ins,
through each family's real package manager (tests/integration/test_configure_versions.py walks
Debian).

One play per step runs three roles that do not interfere (nvidia_driver, cuda,
container_toolkit): the driver 535 -> 550 -> back, the container toolkit's four packages
1.14.3 -> 1.15.0 -> back, CUDA 12.4 installed once.

The hosts are test hosts with the family's identity and package databases
(rackcert.lab.hostfamily: Debian underneath, apt or dnf/rpm for packages); the repositories
are FAKE, shaped like NVIDIA's (tests/support/plugins/fake_family_repos.py). Each step is judged on
the host's own package database, its holds and the run record:

- first install of 535.161.08, held (EL: `dnf module enable nvidia-driver:535-dkms`, then the
  packages locked by `dnf versionlock`; Ubuntu: `cuda-drivers-535` and its
  nvidia-driver-535-open, nvidia-dkms-535, libnvidia-compute-535 held by apt-mark);
- `dnf -y upgrade` / `apt-get -y upgrade` moves nothing, though 535.183.01 is in the repository;
- 550.54.15: EL switches the stream (`dnf module switch-to nvidia-driver:550-dkms
  --allowerasing`); Ubuntu purges every 535 package (no `rc` left) before 550 is installed;
- the rollback to the versions recorded before the change (`versions_from`) brings 535 back;
- the record's facts read the versions back at each step, and the family the node was found to
  be (its facts and package manager, never the spec's guest.os);
- a spec whose guest.os is another family than the node's is refused, naming both, before any
  role runs (EL only: one host start saved).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from rackcert.lab.sshhosts.host import TestHost
from tests.support.configure_versions import FAKES, LAB_VARS
from tests.support.configure_versions import fake_gpu_node as _fake_gpu_node
from tests.support.configure_versions import smi_driver as _smi_driver
from tests.support.plugins.configure import air_gap, spec_for_hosts
from tests.support.plugins.fake_family_repos import FamilyRepos

# The role's own pattern of branch packages (Ubuntu's real names) is what runs here.
VARS = {k: v for k, v in LAB_VARS.items() if k != "nvidia_driver_branch_packages"}
UBUNTU_BRANCH = ("cuda-drivers-{b}", "nvidia-driver-{b}-open", "nvidia-dkms-{b}",
                 "libnvidia-compute-{b}")  # fmt: skip
EL_PACKAGES = ("cuda-drivers", "nvidia-driver", "nvidia-driver-cuda", "kmod-nvidia-latest-dkms")
TOOLKIT = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
           "libnvidia-container1")  # fmt: skip
FOUND = {"rhel-9": "RedHat 9.4 (RedHat family, dnf)",
         "ubuntu-22.04": "Ubuntu 22.04 (Debian family, apt)",
         "ubuntu-24.04": "Ubuntu 24.04 (Debian family, apt)"}  # fmt: skip


def _sources(family: str, repos: FamilyRepos, branch: str) -> dict[str, dict[str, str]]:
    if family == "rhel-9":
        cuda = str(repos.el / "cuda-rhel9-x86_64")
        return {"nvidia_driver": {"path": cuda, "package": "cuda-drivers"},
                "cuda": {"path": cuda}, "container_toolkit": {"path": cuda}}  # fmt: skip
    distro = "ubuntu" + family.split("-")[1].replace(".", "")
    return {
        "nvidia_driver": {"path": str(repos.deb(distro, "cuda")),
                          "package": f"cuda-drivers-{branch}"},
        "cuda": {"path": str(repos.deb(distro, "cuda"))},
        "container_toolkit": {"path": str(repos.deb(distro, "nvidia-container-toolkit"))},
    }  # fmt: skip


def _versions(node: TestHost, family: str, names: tuple[str, ...]) -> dict[str, str]:
    """name -> installed version (no revision or release) of `names`, from the package db."""
    if family == "rhel-9":
        out = node.exec(["rpm", "-q", "--qf", "%{NAME} %{VERSION}\\n", *names])
    else:
        out = node.exec(["dpkg-query", "-W", "-f=${Package} ${Version}\\n", *names])
    rows = [ln.split() for ln in out.stdout.splitlines() if len(ln.split()) == 2]
    return {n: v.split("-")[0] for n, v in rows if v}


def _installed(node: TestHost, family: str) -> dict[str, str]:
    """name -> version of the driver's packages, from the family's own package database."""
    if family == "rhel-9":
        out = node.exec(["rpm", "-qa", "--qf", "%{NAME} %{VERSION}\\n"])
        rows = [ln.split() for ln in out.stdout.splitlines()]
        return {n: v for n, v in rows if n in EL_PACKAGES or n.startswith("kmod-nvidia")}
    out = node.exec(["dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Package}|${Version}\n"])
    rows = [ln.split("|") for ln in out.stdout.splitlines()]
    return {
        # Status-Abbrev: want, status, error; "i" status is installed (held or not), "c" is
        # a purge left undone (config-files).
        n: (v.split("-")[0] if s[1:2] == "i" else f"{s.strip()} {v}")
        for s, n, v in rows
        if any(
            n.startswith(p.split("{")[0]) and n.split("-")[-1] in {"535", "550", "open"}
            for p in UBUNTU_BRANCH
        )  # fmt: skip
    }


def _want(family: str, version: str) -> dict[str, str]:
    if family == "rhel-9":
        return dict.fromkeys(EL_PACKAGES, version)
    b = version.split(".")[0]
    return {p.format(b=b): version for p in UBUNTU_BRANCH}


def _held(node: TestHost, family: str) -> set[str]:
    if family == "rhel-9":
        out = node.exec(["dnf", "-q", "versionlock", "list"])
        return {ln.rsplit("-", 2)[0].removesuffix("-0") for ln in out.stdout.split() if ":" in ln}
    return set(node.exec(["apt-mark", "showhold"]).stdout.split())


def _stream(node: TestHost) -> str:
    try:
        text = node.path("/etc/dnf/modules.d/nvidia-driver.module").read_text()
    except FileNotFoundError:
        return ""
    state = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)
    return f"{state.get('stream', '')} {state.get('state', '')}"


@pytest.mark.parametrize("family", ["rhel-9", "ubuntu-22.04", "ubuntu-24.04"])
def test_driver_journey_on_family(family, family_hosts, fake_family_repos, tmp_path: Path):
    t0 = time.monotonic()
    (node,) = family_hosts(family)
    air_gap([node])
    _fake_gpu_node(node)
    shutil.copy(FAKES / "fake-nvidia-ctk", node.path("/usr/local/bin/nvidia-ctk"))
    runs = tmp_path / "runs"
    el = family == "rhel-9"

    def spec(version: str, toolkit: str, os: str = family):
        branch = version.split(".")[0]
        sources = _sources(family, fake_family_repos, branch)
        guest = {"nvidia_driver": version, "os": os, "cuda": "12.4", "container_toolkit": toolkit}
        return spec_for_hosts([node], tmp_path / f"{version}-{toolkit}-{os}", sources=sources,
                              guest=guest)  # fmt: skip

    def configure_(version: str, toolkit: str, os: str = family, **kw):
        loaded = spec(version, toolkit, os)
        rd = RunDir.create(runs, "lab", loaded.sha256, loaded.text)
        tags = ["nvidia_driver", "cuda", "container_toolkit"]
        return configure(loaded, rd, tags=tags, extravars=VARS, **kw), rd

    def run(version: str, toolkit: str, **kw):
        rec, rd = configure_(version, toolkit, **kw)
        assert rec.status == "ok", rec.error
        return rec.data.hosts["node1"], rd

    if el:  # the spec says Ubuntu, the node is EL: a finding, and no Ubuntu task runs
        wrong, _ = configure_("535.161.08", "1.14.3", os="ubuntu-22.04")
        assert wrong.status == "failed"
        message = wrong.data.hosts["node1"].failures[0].message
        assert message.startswith(
            "guest.os: the spec says ubuntu-22.04, node1 reports RedHat 9.4 (RedHat family, dnf)"
        ), message
        assert node.exec(["rpm", "-qa"]).stdout.split() == ["redhat-release-9.4-0.5.el9.x86_64"]

    # First install: the pinned version, not the repository's newer 535.183.01; held.
    first, _ = run("535.161.08", "1.14.3")
    assert first.outcomes["rackcert_facts_versions"]["os"] == FOUND[family]
    assert _versions(node, family, TOOLKIT) == dict.fromkeys(TOOLKIT, "1.14.3")
    assert _versions(node, family, ("cuda-toolkit-12-4",)) == {"cuda-toolkit-12-4": "12.4.1"}
    assert _held(node, family) >= set(TOOLKIT)
    assert _installed(node, family) == _want(family, "535.161.08")
    assert _held(node, family) >= set(_want(family, "535.161.08")), _held(node, family)
    assert "# driver 535.161.08" in node.path("/etc/cdi/nvidia.yaml").read_text()
    assert _smi_driver(node) == "535.161.08"
    if el:
        assert _stream(node) == "535-dkms enabled"
    t_first = time.monotonic() - t0

    # A stray upgrade moves nothing held.
    upgrade = ["dnf", "-y", "upgrade"] if el else ["apt-get", "-y", "upgrade"]
    up = node.exec(upgrade, timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr
    assert _installed(node, family) == _want(family, "535.161.08")
    assert _versions(node, family, TOOLKIT) == dict.fromkeys(TOOLKIT, "1.14.3")

    # The branch change, its reboot taken; the toolkit's four packages move together.
    changed, run_before = run("550.54.15", "1.15.0")
    assert _versions(node, family, TOOLKIT) == dict.fromkeys(TOOLKIT, "1.15.0")
    assert "# driver 550.54.15" in node.path("/etc/cdi/nvidia.yaml").read_text()
    assert _installed(node, family) == _want(family, "550.54.15"), _installed(node, family)
    assert _smi_driver(node) == "550.54.15"
    before = changed.outcomes["rackcert_facts_versions"]
    assert before["nvidia_driver"] == "535.161.08"
    assert before["nvidia_driver_package"] == ("cuda-drivers" if el else "cuda-drivers-535")
    assert before["container_toolkit"] == "1.14.3"
    if el:
        assert _stream(node) == "550-dkms enabled"
        assert "dnf module switch-to" in " ".join(changed.changed_tasks) or changed.changed > 0
    assert _held(node, family) >= set(_want(family, "550.54.15"))
    assert not _held(node, family) & set(_want(family, "535.161.08")) - set(
        _want(family, "550.54.15")
    )

    # Back to what the node ran before the change, from that run's record.
    back, _ = run("550.54.15", "1.15.0", limit="node1", versions_from=run_before.path)
    assert back.changed > 0
    assert _installed(node, family) == _want(family, "535.161.08"), _installed(node, family)
    assert _smi_driver(node) == "535.161.08"
    assert _versions(node, family, TOOLKIT) == dict.fromkeys(TOOLKIT, "1.14.3")
    if el:
        assert _stream(node) == "535-dkms enabled"
    again, _ = run("535.161.08", "1.14.3")
    assert again.outcomes["rackcert_facts_versions"]["nvidia_driver"] == "535.161.08"
    assert again.changed == 0, again.changed_tasks
    print(f"{family}: first install {t_first:.1f} s, journey {time.monotonic() - t0:.1f} s")
