"""Package sources as vendors ship them, installed for real on SSH test hosts.

Three hosts, two `rackcert configure` runs through the CLI, side by side (each costs tens
of seconds on two cores, so one test checks them section by section):

- node1 takes OFED from an MLNX_OFED-like .tgz, the driver from an .iso, CUDA from a
  repository directory and the container toolkit from a repository signed by a test key
  (repo_url + key_file); `guest.ansible_vars` moves where tarballs are unpacked, and the
  operator's `--extra-vars` (@file and k=v) name two of the packages.
- future runs "Ubuntu 26.04": site.yml refuses the version, not only unknown families.
- node2 gets the same signed repository with the wrong key: apt refuses it, and the run
  fails with one line that says so.

The kernel here has no iso9660 driver, so the ISO path exercised is the fallback that
unpacks the image with bsdtar (the loop mount is tried first and fails).
"""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tests.support.plugins.configure import air_gap, spec_for_hosts
from tests.support.plugins.vendor_sources import OFED_TOP

FUTURE_OS = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="26.04"\nVERSION_CODENAME=zesty\n'


def _configure(spec, runs, *extra) -> subprocess.Popen:
    """Started, not waited for: the two runs touch different hosts and go side by side."""
    return subprocess.Popen(
        [sys.executable, "-m", "rackcert.cli", "configure", str(spec), "--runs-dir", str(runs)]
        + list(extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _sources(vs, key):
    names = {c: s["package"] for c, s in vs.repo.sources.items()}
    return {
        "ofed": {"path": str(vs.tarball), "package": names["ofed"]},
        "nvidia_driver": {"path": str(vs.iso), "package": names["nvidia_driver"]},
        # No package: the operator's --extra-vars name these two.
        "cuda": {"path": str(vs.repo.path)},
        "container_toolkit": {"repo_url": f"file://{vs.signed}", "key_file": str(key)},
    }


def test_tarball_iso_directory_and_signed_sources_install(ssh_hosts, vendor_sources, tmp_path):
    vs = vendor_sources
    node1, future, node2 = ssh_hosts(["node1", "future", "node2"])
    air_gap([node1, future, node2])
    release = future.path("/etc/os-release")
    release.unlink()
    release.write_text(FUTURE_OS)
    guest = {"ansible_vars": {"vendor_package_sources_dir": "/opt/site-sources"}}
    good = spec_for_hosts(
        [node1, future], tmp_path / "good", sources=_sources(vs, vs.key), guest=guest
    )
    wrong = spec_for_hosts([node2], tmp_path / "wrong", sources=_sources(vs, vs.wrong_key))
    extra = tmp_path / "extra.yml"
    extra.write_text(yaml.safe_dump({"cuda_package": "rackcert-fake-cuda-toolkit-11-4"}))
    toolkit = "container_toolkit_package=rackcert-fake-nvidia-container-toolkit"
    runs = tmp_path / "runs"
    # A value no role reads: it must reach no file of the run (ansible-runner keeps its own
    # command line in env/cmdline and ansible/<ident>/command).
    note = "rackcert_operator_note=opnote-7f3a91"
    first = _configure(
        good.path, runs, "--tags", "vendor", "-e", f"@{extra}", "-e", toolkit, "-e", note
    )
    refused = _configure(wrong.path, runs, "--tags", "container_toolkit", "--extra-vars", toolkit)
    first, refused = _wait(first), _wait(refused)

    _node1_installed_every_kind(first, node1, runs)
    _unknown_version_refused(first, runs)
    _wrong_key_fails_with_one_line(refused, node2, vs)


def _version(host, package):
    out = host.exec(["dpkg-query", "-W", "-f=${Version}", package])
    return out.stdout if out.returncode == 0 else None


def _record(runs, vm):
    for path in sorted(runs.rglob("configure.json")):
        data = json.loads(path.read_text())
        if vm in data["data"]["hosts"]:
            return data
    raise AssertionError(f"no configure.json names {vm}")


def _node1_installed_every_kind(proc, node1, runs):
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    record = _record(runs, "node1")
    assert record["data"]["hosts"]["node1"]["status"] == "changed", out[-3000:]
    assert _version(node1, "rackcert-fake-mlnx-ofed-all") == "5.4-3.1.0.0-1"  # from the .tgz
    assert _version(node1, "rackcert-fake-cuda-drivers-470") == "470.82.01-1"  # from the .iso
    assert _version(node1, "rackcert-fake-cuda-toolkit-11-4") == "11.4.4-1"  # directory, -e @file
    assert _version(node1, "rackcert-fake-nvidia-container-toolkit") == "1.14.3-1"  # signed, k=v
    # guest.ansible_vars reached the role: the tarball was unpacked where the spec said.
    debs = node1.path(f"/opt/site-sources/ofed/{OFED_TOP}/DEBS")
    assert (debs / "Packages").is_file()
    sources = node1.path("/etc/apt/sources.list.d/rackcert-ofed.sources").read_text()
    assert f"URIs: file:/opt/site-sources/ofed/{OFED_TOP}/DEBS\n" in sources
    assert "Trusted: yes" in sources  # the operator's own unsigned copy
    # The signed repository is checked with its own key, not trusted.
    signed = node1.path("/etc/apt/sources.list.d/rackcert-container-toolkit.sources")
    text = signed.read_text()
    assert "Signed-By: /etc/apt/keyrings/rackcert-container_toolkit.asc" in text
    assert "Trusted" not in text
    # The record keeps which extra vars were given, never their values.
    assert record["data"]["extra_vars"][1] == "container_toolkit_package=..."
    assert "rackcert-fake-nvidia-container-toolkit" not in json.dumps(record["data"]["extra_vars"])
    kept = [p for p in runs.rglob("*") if p.is_file() and b"opnote-7f3a91" in p.read_bytes()]
    assert not kept, kept
    for cmdfile in runs.rglob("ansible/*/command"):
        assert "rackcert-fake-nvidia-container-toolkit" not in cmdfile.read_text()


def _unknown_version_refused(proc, runs):
    assert proc.returncode == 1
    host = _record(runs, "future")["data"]["hosts"]["future"]
    assert host["status"] == "failed"
    assert "unsupported distribution Ubuntu 26.04" in host["failures"][0]["message"]


def _wrong_key_fails_with_one_line(proc, node2, vs):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1, proc.stderr
    line = " ".join(proc.stderr.split())
    assert f"container_toolkit: apt refused file://{vs.signed}" in line
    assert f"does not verify with the key given ({vs.wrong_key})" in line
    assert "NO_PUBKEY" in line
    assert _version(node2, "rackcert-fake-nvidia-container-toolkit") is None
