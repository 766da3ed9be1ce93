"""The bench on the nodes themselves, as on a real rack: configure's dl_runtime role
installs rackcert's bench worker into the nodes' own environment (/opt/rackcert/venv,
over the node image's torch and Horovod), the test hosts see neither this checkout nor
its virtualenv, and `rackcert bench --nodes 2` launches FROM THE FIRST NODE over the SSH
trust configure set up: mpirun (Debian's openmpi-bin) with torch.distributed ranks (Gloo)
that take their rank from Open MPI's OMPI_COMM_WORLD_* variables, then Horovod across both
hosts with horovodrun.

One pair of hosts, configured once by site.yml (tests/support/plugins/site.py: the same two runs
tests/integration/test_configure_site.py judges), serves both launchers: neither bench changes what
configure set up, and a configure run costs tens of seconds on two cores. Each bench writes
its own run. The Horovod test runs last and re-keys node2 to prove the hop is strict, then
puts the key back.
Needs root (the ssh_hosts fixture), openmpi-bin and the lab DL stack
(.ci/setup.d/45-lab-dl-stack.sh)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from rackcert.core.paths import REPO_ROOT
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import LoadedSpec
from rackcert.lab.sshhosts.host import TestHost
from rackcert.lab.sshhosts.rootfs import LAB_DL_SITE
from tests.support.host_keys import rekey as _rekey
from tests.support.plugins.configure import bench_two_hosts
from tests.support.plugins.site import ConfiguredSite

SECRET = "env-Only-Vcenter-Secret-5531"


@dataclass
class Pair:
    h1: TestHost
    h2: TestHost
    loaded: LoadedSpec
    site: ConfiguredSite

    def run(self) -> RunDir:
        """A run of its own for one bench (the rack's known_hosts is shared beside it)."""
        return self.site.run()


@pytest.fixture(scope="module")
def configured_pair(configured_site: ConfiguredSite) -> Pair:
    assert shutil.which("mpirun") and (LAB_DL_SITE / "torch").is_dir(), (
        "run .ci/setup.d/45-lab-dl-stack.sh (openmpi-bin and the lab DL stack)"
    )
    assert (LAB_DL_SITE / "horovod").is_dir(), "run .ci/setup.d/45-lab-dl-stack.sh"
    site = configured_site
    assert site.first.status == "ok", site.first.error
    h1, h2 = site.hosts
    # The nodes cannot see the controller's code or packages.
    for path in (REPO_ROOT / "validation" / "bench" / "worker.py", Path(sys.prefix) / "bin"):
        assert h1.ssh(f"test -e {shlex.quote(str(path))}").returncode == 1, path
    # lab.yaml's guest: horovod, dl_system_site_packages; network.interface eth0.
    assert site.loaded.spec.guest.horovod and site.loaded.spec.network.interface == "eth0"
    return Pair(h1, h2, site.loaded, site)


def _incomplete(proc: subprocess.CompletedProcess[str]) -> dict:
    """The bench's JSON record of a run that measured but could not judge every required
    check (INCOMPLETE, exit 1): what each bench here leaves out makes it so."""
    assert proc.returncode == 1 and proc.stdout.strip(), proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["verdict"]["verdict"] == "INCOMPLETE", data["verdict"]
    return data


def test_mpirun_from_node1_across_two_hosts_reduces_right_and_is_recorded(
    configured_pair: Pair,
) -> None:
    h1, h2, loaded = configured_pair.h1, configured_pair.h2, configured_pair.loaded
    proc = bench_two_hosts(
        loaded, configured_pair.run(), h1, "--launcher", "mpirun", "--backend", "gloo",
        "--skip", "resnet,storage", "--json", "--timeout", "300", timeout=500,
    )  # fmt: skip
    # No ResNet50 measured, so the required checks are not all judged.
    data = _incomplete(proc)
    assert data["launch"] == {"engine": "torch.distributed", "collectives": "gloo",
                              "launcher": "mpirun", "controller": "mpi",
                              "launched_from": "node1", "jobs": None}, data  # fmt: skip
    (launch,) = data["launches"]
    (cmd,) = launch["commands"]
    assert cmd[-3:-1] == ["--", f"root@{h1.address}"]
    remote = shlex.split(cmd[-1])
    mpi = remote[remote.index("mpirun") :]
    assert mpi[mpi.index("-H") + 1] == f"{h1.address}:1,{h2.address}:1"
    assert "StrictHostKeyChecking=yes" in mpi[mpi.index("plm_rsh_args") + 1]
    assert mpi[mpi.index("btl_tcp_if_include") + 1] == "eth0"
    assert {r["host"] for r in launch["ranks"]} == {"node1", "node2"}
    assert data["environment"]["python_executable"] == "/opt/rackcert/venv/bin/python"
    ar = data["allreduce"]
    assert ar["backend"] == "gloo" and ar["world_size"] == 2
    assert ar["points"] and all(p["correct"] for p in ar["points"])


@contextmanager
def _rekeyed(host: TestHost) -> Iterator[None]:
    """`host` answers with a new host key inside the block; its own key is back after it."""
    key = host.runtime_dir / "ssh_host_ed25519_key"
    saved = {p: p.read_bytes() for p in (key, key.with_suffix(".pub")) if p.exists()}
    _rekey(host)
    try:
        yield
    finally:
        for path, data in saved.items():
            path.write_bytes(data)
        os.kill(int((host.runtime_dir / "sshd.pid").read_text()), signal.SIGHUP)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not host.reachable():
            time.sleep(0.2)


def test_horovod_across_two_nodes_from_node1_with_the_nodes_own_worker(
    configured_pair: Pair,
) -> None:
    h1, h2, loaded = configured_pair.h1, configured_pair.h2, configured_pair.loaded
    run = configured_pair.run()
    # configure ran no --check-build here (the image's Horovod imports and answers its three
    # facts itself; dl_runtime/tasks/horovod.yml): this is where the lab proves that
    # horovodrun's own check, through the launcher configure wrote, agrees.
    check = h1.ssh("/opt/rackcert/venv/bin/horovodrun --check-build", timeout=180)
    assert "[X] PyTorch" in check.stdout and "[X] Gloo" in check.stdout, check.stderr
    proc = bench_two_hosts(
        loaded, run, h1, "--model", "resnet18", "--skip", "storage", "--json",
        "--timeout", "400", timeout=700, env={"RACKCERT_VCENTER_PASSWORD": SECRET},
    )  # fmt: skip
    # One node count measured, so the required scaling check is not judged.
    data = _incomplete(proc)
    assert data["engine"]["name"] == "horovod"
    assert data["launch"] == {"engine": "horovod", "collectives": "horovod",
                              "launcher": "horovodrun", "controller": "gloo",
                              "launched_from": "node1", "jobs": None}  # fmt: skip
    launches = data["launches"]  # one horovodrun per configuration: the sweep, the loop
    assert [ln["tasks"] for ln in launches] == [["allreduce"], ["resnet"]]
    launch = launches[0]
    (cmd,) = launch["commands"]
    assert cmd[:2] == ["ssh", "-tt"] and cmd[-3:-1] == ["--", f"root@{h1.address}"]
    assert "StrictHostKeyChecking=yes" in cmd
    remote = shlex.split(cmd[-1])
    assert remote[remote.index("-H") + 1] == f"{h1.address}:1,{h2.address}:1"
    assert remote[remote.index("--network-interface") + 1] == "eth0"
    assert "/opt/rackcert/venv/bin/horovodrun" in remote and "env" in remote
    assert {r["host"] for r in launch["ranks"]} == {"node1", "node2"}
    env = data["environment"]
    assert env["python_executable"] == "/opt/rackcert/venv/bin/python"
    assert env["worker_module"].startswith("/opt/rackcert/venv/lib/")
    assert env["horovod"] == "0.28.1"
    ar = data["allreduce"]
    assert ar["backend"] == "horovod" and ar["world_size"] == 2
    assert all(p["correct"] for p in ar["points"])
    assert data["resnet50"]["points"][0]["images_per_sec"] > 0
    checks = {c["id"]: c["status"] for c in data["verdict"]["checks"]}
    assert checks["allreduce.correct"] == "pass" and checks["allreduce.busbw_fraction"] == "pass"
    assert data["rdma"]["skipped"] and "no RDMA device" in data["rdma"]["reason"]
    assert "MPI build" in data["nccl_tests"]["reason"]
    for launch in launches:
        (cmd,) = launch["commands"]
        # The launch carried no secret of this process's environment to the nodes.
        log = Path(launch["log"]).read_text()
        assert SECRET not in log and SECRET not in json.dumps(data)
        # horovodrun's hops from node1 went through the pinned ssh wrapper, gone now.
        where = next(w for w in shlex.split(cmd[-1]) if w.startswith("/tmp/rackcert-hvd-"))
        assert f"PATH={where}:" in cmd[-1] and f"UserKnownHostsFile={where}/known_hosts" in cmd[-1]
        assert h1.ssh(f"test -e {where}").returncode == 1, "the wrapper's directory was left"

    # node2's address now answers with another host key. The controller's first hop (to
    # node1) is unchanged; horovodrun's hop node1 -> node2 must refuse it. Before, Horovod's
    # hard-coded StrictHostKeyChecking=no trusted it and the launch succeeded.
    with _rekeyed(h2):
        proc = bench_two_hosts(
            loaded, run, h1, "--model", "resnet18", "--skip", "storage,rdma",
            "--backend", "horovod", "--timeout", "300", timeout=600,
        )  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert f"the host key of {h2.address} is not the one enrolled" in last, proc.stderr[-2000:]
