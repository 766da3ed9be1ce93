"""`rackcert upgrade` in the lab, every part real (issue 45, required item 6).

Three nodes (NODES says why three suffice), each a VM on the rack twin (one per ESXi host)
that the lab's guest agent plays as an SSH test host with a disk of its own (what configure
installed survives a power-off);
the lab's real Slurm (slurmctld in the root namespace, slurmd on each node, started by the
slurm_node role); the real roles (site.yml limited to the node) from the lab's local
package repository of FAKE vendor packages, where a new driver version is a new package;
the host images through the twin's vLCM; the real certifier (the node's validate and
localisation's per-node stage). The roll goes through the CLI, as an operator runs it, and
a stream of short multi-node jobs runs before and during it.

One module-scoped lab, scenarios in order (each starts from the state the last one left):
1. v1 -> v2 (driver 470.82.01 -> 470.141.03, ESXi 7.0 U3c -> U3d with a newer vGPU manager
   and nmlx5): the controller is SIGKILLed at a random step, then run again; no job ends
   CANCELLED/NODE_FAIL/FAILED (Slurm's jobcomp/filetxt log), never more than one node out
   (sinfo sampled in its own thread), every node at v2 and certified, the twin's images
   read back through Broadcom's SDK, nothing left drained or in maintenance by rackcert.
2. v2 -> v3 (driver 470.161.03) with a planted failure: node 2's new kernel-module package
   fails in its postinst (DKMS cannot build the module for that node's kernel, as a real
   broken package fails); node 1 resumes, node 2 stays drained with the finding, node 3 is
   never touched, the exit is non-zero and names node 2; `--rollback lab-node2` pins it
   back to v2's driver and resumes it.

The kill point is drawn from a seed the test prints (`killed at step N (seed S)`);
RACKCERT_TEST_KILL_SEED=S replays it. Cost on a 2-core machine shared with other work,
run side by side with the four-node version at a load average of 8-37: set-up 516 s (four
nodes: 533), the first roll 367 s (471), the second with its rollback 224 s (338); 1,107 s
against 1,342. The rolls are configure and the certifier: per chain a guest layer (the
driver's roles only, 44-47 s), a measure-before and a validate (25-27 s each: the node's
validate and its per-node stage); three nodes run 6 guest layers and 10 certifications
where four ran 8 and 14. Alone at a load average of 4-6 the four-node module took 8.5 min.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackcert.core.paths import REPO_ROOT
from rackcert.core.runs import RunDir
from rackcert.core.slurm.conf import node_lines
from rackcert.core.spec_loader import LoadedSpec, load_spec
from rackcert.lab.slurm import NodeDef, SlurmLab, spec_block
from rackcert.lab.sshhosts.host import TestHost
from tests.support.plugins.fake_vendor_repo import (
    DRIVER,
    KERNEL,
    MODULE_VERSION_FILE,
    _build_deb,
    build_fake_vendor_repo,
)
from tests.support.plugins.slurm import free_port
from tests.support.plugins.vcsim import TwinFactory, TwinLab
from tests.support.threads import Background
from tests.support.twin_vlcm import NEW_BASE, NMLX, NMLX_NEW, VGPU, VGPU_NEW, VLCM, sdk
from tests.support.upgrade_helpers import four_node

# Three nodes, the fewest that show every property here: with --max-unavailable 1 the two
# left in service are exactly one 2-node job's width, so the stream runs through the roll;
# the planted failure needs a node resumed before it (node 1), the failing one (node 2) and
# one the stopped roll never touches (node 3). A fourth node repeated node 1's chain.
NODES = [f"lab-node{i}" for i in range(1, 4)]
HOSTS = [f"lab-esx{i:02d}" for i in range(1, 4)]
# The steps a unit's chain records (upgrade.json): drain, wait drained, measure before,
# shutdown guest, host maintenance, host image, reboot, exit maintenance, power on, guest
# layer, validate, resume.
STEPS_PER_UNIT = 12
FAILING, AFTER = "lab-node2", "lab-node3"  # the planted failure, and the node after it
V1, V2, V3 = "470.82.01", "470.141.03", "470.161.03"
STATE = "/var/lib/rackcert-fake"
FAKES = REPO_ROOT / "tests" / "support" / "fakes"
# Node 3's kernel is one the new module cannot be built for (the planted failure's cause).
BROKEN_KERNEL_MARK = "/etc/rackcert-fake/dkms-build-fails"
# The FAKE GPU tools' knobs (tests/integration/test_configure_versions.py): the loaded module is
# what a
# boot (tests/support/fakes/fake-reboot) found installed, and nvidia-smi reports it.
LAB_VARS = {
    "rackcert_facts_nvidia_version_file": f"{STATE}/proc-driver-nvidia-version",
    "nvidia_driver_reboot_command": "/usr/local/sbin/rackcert-fake-reboot",
    "nvidia_driver_boot_time_command": f"cat {STATE}/boot_id",
    "nvidia_driver_branch_packages": "^rackcert-fake-(cuda-drivers|nvidia-kernel)-[0-9]+$",
    "nvidia_driver_dkms": False,
}
REBOOT = {"reboot": {"connected_ms": 200, "down_ms": 800}}
# The guest layer's roles for a driver change (rackcert.core.upgrade_layers.guest) and the
# roles they pull in as meta dependencies (rackcert_facts, vendor_package).
DRIVER_ROLES_WITH_DEPENDENCIES = {
    "nvidia_driver",
    "vgpu_license",
    "nvidia_peermem",
    "rackcert_facts",
    "vendor_package",
}
OLD_VGPU = "535.154.02"


def _postinst_failing_where_marked() -> str:
    return (
        "#!/bin/sh\nset -e\n"
        f"if [ -e {BROKEN_KERNEL_MARK} ]; then\n"
        '  echo "Error! Bad return status for module build on kernel: $(uname -r)'
        " (FAKE: this node's kernel)\" >&2\n"
        "  exit 10\nfi\n"
    )


def _driver_repo(directory: Path) -> Path:
    """The fake vendor repository with the R470 driver as NVIDIA ships a branch: a kernel
    module package per version and the cuda-drivers metapackage depending on it; 470.161.03's
    module fails its postinst where the node's kernel is marked."""
    repo = build_fake_vendor_repo(directory).path
    for old in repo.glob(f"{DRIVER.format(branch='470')}_*.deb"):
        old.unlink()  # the plain stand-ins without a module: replaced by the branch's own
    work = directory.parent / "r470.build"
    kernel, driver = KERNEL.format(branch="470"), DRIVER.format(branch="470")
    virtual = "rackcert-fake-nvidia-kernel"
    for version in (V1, V2, V3):
        deb = f"{version}-1"
        rel = f"Provides: {virtual}\nConflicts: {virtual}\nReplaces: {virtual}\n"
        files = {MODULE_VERSION_FILE: version + "\n"}
        _build_deb(work, repo / f"{kernel}_{deb}_all.deb", kernel, deb, rel, files)
        if version == V3:
            _add_postinst(work, repo / f"{kernel}_{deb}_all.deb", _postinst_failing_where_marked())
        rel = f"Depends: {kernel} (>= {version})\n"
        _build_deb(work, repo / f"{driver}_{deb}_all.deb", driver, deb, rel)
    index = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    (repo / "Packages").write_text(index)
    return repo


def _add_postinst(work: Path, deb: Path, script: str) -> None:
    root = work / (deb.stem + ".postinst")
    subprocess.run(["dpkg-deb", "-R", str(deb), str(root)], check=True)
    post = root / "DEBIAN" / "postinst"
    post.write_text(script)
    post.chmod(0o755)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
        check=True, capture_output=True,
    )  # fmt: skip


def _spec_data(repo: Path, driver: str, new_host: bool) -> dict[str, Any]:
    data = four_node(hosts=len(NODES))
    data["guest"]["nvidia_driver"] = driver
    data["guest"]["sources"] = {
        "nvidia_driver": {"path": str(repo), "package": DRIVER.format(branch="470")}
    }
    data["guest"]["ansible_vars"] = dict(LAB_VARS)
    data["storage"] = {}  # no data mount on these nodes
    if new_host:
        data["host_software"] = {
            "vgpu_manager_version": "535.161.05",
            "components": {"nmlx5": "4.23.0.66"},
        }
        for host in data["hosts"]:
            host["esxi_version"] = NEW_BASE
    else:
        data["host_software"] = {"vgpu_manager_version": OLD_VGPU}
    return data


@dataclass
class UpgradeLab:
    twin: TwinLab
    slurm: SlurmLab
    base: LoadedSpec  # v1, pointing at the twin and the Slurm controller
    runs: Path
    work: Path
    repo: Path
    jobs: list[str] = field(default_factory=list)
    certified_spec: Path = Path()  # the spec of the last certified run

    def spec(self, name: str, driver: str, *, new_host: bool) -> Path:
        """The certified spec with the guest driver (and the host image) moved."""
        data = yaml.safe_load(self.base.text)
        new = _spec_data(self.repo, driver, new_host)
        data["guest"]["nvidia_driver"] = new["guest"]["nvidia_driver"]
        data["host_software"] = new["host_software"]
        data["hosts"] = [
            {**h, "esxi_version": n["esxi_version"]}
            for h, n in zip(data["hosts"], new["hosts"], strict=True)
        ]
        path = self.work / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def host(self, node: str) -> TestHost:
        assert self.twin.agent is not None
        return self.twin.agent.guests[node].host

    def sinfo(self) -> dict[str, str]:
        out = self.slurm.client("sinfo", "-h", "-N", "-o", "%N %t").stdout
        return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)

    def reasons(self) -> dict[str, str]:
        out = self.slurm.client("sinfo", "-R", "-h", "-N", "-o", "%N|%E").stdout
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def sbatch(self, nodes: int = 2) -> str:
        out = self.slurm.client(
            "sbatch", "--parsable", "--output=/dev/null", f"-N{nodes}", "--wrap",
            "srun sleep 1", timeout=20,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        job = out.stdout.strip().split(";")[0]
        self.jobs.append(job)
        return job

    def ended(self) -> dict[str, str]:
        """JobId -> JobState from jobcomp/filetxt's log: every job that ended."""
        try:
            text = self.slurm.jobcomp_log.read_text()
        except FileNotFoundError:
            return {}
        return dict(re.findall(r"\bJobId=(\d+)\b.*?\bJobState=(\S+)", text))

    def cli(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rackcert.cli", *args, "--runs-dir", str(self.runs)],
            capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )  # fmt: skip


def _fake_gpu_tools(host: TestHost) -> None:
    """nvidia-smi reading the loaded module, and the fake reboot, on the node's own disk."""
    local = host.path("/usr/local")
    shutil.copy(FAKES / "fake-nvidia-smi", local / "bin/nvidia-smi")
    (local / "bin/fake-nvidia-smi.json").write_text(
        json.dumps({"gpus": 1, "driver_file": f"{STATE}/proc-driver-nvidia-version"}) + "\n"
    )
    shutil.copytree(REPO_ROOT / "tests/support/fixtures/h200", local / "fixtures/h200")
    (local / "sbin").mkdir(exist_ok=True)
    shutil.copy(FAKES / "fake-reboot", local / "sbin/rackcert-fake-reboot")
    out = host.exec(["/usr/local/sbin/rackcert-fake-reboot"])
    assert out.returncode == 0, out.stderr
    out = host.exec(["sh", "-c", "rm -f /var/lib/apt/lists/*_dists_* /var/cache/apt/*.bin"])
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, vcsim_binary: Path) -> Iterator[UpgradeLab]:
    from rackcert.configure.runner import configure
    from validation.stage import run as validate

    work = tmp_path_factory.mktemp("upgrade-lab")
    # apt reads the repository as _apt: not under pytest's 0700 tmp dir.
    apt_dir = Path(tempfile.mkdtemp(prefix=f"rackcert-upgrade-apt-{os.getpid()}-", dir="/tmp"))
    apt_dir.chmod(0o755)
    repo = _driver_repo(apt_dir / "repo")
    source = work / "lab4.yaml"
    source.write_text(yaml.safe_dump(_spec_data(repo, V1, False), sort_keys=False))
    factory = TwinFactory(work)
    slurm: SlurmLab | None = None
    try:
        twin = factory(source, desc={"vlcm": VLCM, **REBOOT}, guests=True)
        provisioned = subprocess.run(
            [sys.executable, "-m", "rackcert.cli", "provision", str(twin.spec_path), "--yes",
             "--runs-dir", str(work / "runs")],
            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )  # fmt: skip
        assert provisioned.returncode == 0, provisioned.stdout[-2000:] + provisioned.stderr[-2000:]
        assert twin.agent is not None and twin.agent.wait_for(set(NODES), timeout=60)
        for node in NODES:
            _fake_gpu_tools(twin.agent.guests[node].host)
        spec = twin.spec
        gateway = spec.network.management.gateway
        assert gateway
        nodes = [
            NodeDef(n.name, n.address, n.cpus, n.memory_mb) for n in node_lines(spec, gres=False)
        ]
        slurm = SlurmLab.for_owner(
            f"{os.getpid()}u", address=str(gateway), nodes=nodes, port=free_port(str(gateway)),
            cluster="lab", partition="lab",
        )  # fmt: skip
        slurm.start()
        data = yaml.safe_load(twin.spec_path.read_text())
        data["slurm"] = spec_block(slurm, job_timeout_s=5)
        twin.spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
        base = load_spec(twin.spec_path)
        runs = work / "runs"
        # The rack certified at v1: every role on every node, validate, the team's sign-off.
        certified = RunDir.create(runs, "lab", base.sha256, base.text)
        record = configure(base, certified)
        assert record.status == "ok", record.error
        # Their first boot with the driver installed loads its module (the role reboots for
        # a new driver only where a GPU shows on PCI or another module runs; these nodes have
        # neither yet). From now on a driver change finds the old module loaded, and reboots.
        for node in NODES:
            booted = twin.agent.guests[node].host.exec(["/usr/local/sbin/rackcert-fake-reboot"])
            assert booted.returncode == 0, booted.stderr
        slurm.wait_idle(NODES, timeout=60)
        checked = validate(base, certified, runs_root=runs)
        assert {
            n: v.versions.get("nvidia_driver") for n, v in checked.data.nodes.items()
        } == dict.fromkeys(NODES, V1)
        certified.write_stage("report", {"verdict": "PASS", "reasons": []})
        yield UpgradeLab(twin, slurm, base, runs, work, repo, certified_spec=twin.spec_path)
    finally:
        if slurm is not None:
            slurm.stop()
            for log in slurm.directory.glob("*.log"):
                shutil.copy(log, work / log.name)
            slurm.remove()
        factory.stop_all()
        shutil.rmtree(apt_dir, ignore_errors=True)


class Sampler:
    """Short multi-node jobs submitted through the roll, and sinfo's nodes out of service
    sampled, each in a thread of its own (tests.support.threads.Background: anything either
    raises, an sbatch that timed out included, fails the test when the block ends)."""

    def __init__(self, lab: UpgradeLab):
        self.lab = lab
        self.out_seen: list[set[str]] = []
        self.errors: list[str] = []
        self.background = Background(self._jobs, self._sample)

    def __enter__(self) -> Sampler:
        self.background.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.background.__exit__(*exc)

    def _jobs(self, stop: threading.Event) -> None:
        while not stop.wait(3.0):
            try:
                self.lab.sbatch(2)
            except AssertionError as exc:  # a job refused or failed: noted, the stream goes on
                self.errors.append(str(exc))

    def _sample(self, stop: threading.Event) -> None:
        while not stop.is_set():
            states = self.lab.sinfo()
            self.out_seen.append(
                {
                    n
                    for n, s in states.items()
                    if s.rstrip("*~#!%$@^-").startswith(("drain", "drng", "down", "fail", "maint"))
                }
            )
            time.sleep(0.1)


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _record(lab: UpgradeLab) -> dict[str, Any]:
    newest = sorted(lab.runs.glob("lab/*/upgrade.json"))[-1]
    return dict(json.loads(newest.read_text())["data"])


def _steps_begun(path: Path) -> int:
    try:
        data = json.loads(path.read_text())["data"]
    except (OSError, ValueError, KeyError):
        return 0
    return sum(len(x.get("steps", [])) for x in data.get("nodes", []) + data.get("hosts", []))


def _killed_at_a_random_step(lab: UpgradeLab, spec: Path, seed: int) -> int:
    """`rackcert upgrade` started, then SIGKILLed (with everything it started) once the
    record shows a step count picked at random; returns that count."""
    import psutil

    # From the first unit's wait drained to the last unit's shutdown guest (step 40 of 48 when
    # the lab had four nodes): any step a re-run must pick up, the last unit's included.
    at = random.Random(seed).randint(2, STEPS_PER_UNIT * len(NODES) - 8)
    before = set(lab.runs.glob("lab/*/upgrade.json"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rackcert.cli", "upgrade", str(spec), "--yes",
         "--max-unavailable", "1", "--runs-dir", str(lab.runs)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        new = set(lab.runs.glob("lab/*/upgrade.json")) - before
        if new and _steps_begun(next(iter(new))) >= at:
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the roll ended before step {at} (rc {proc.returncode})"
    tree = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)  # the controller dies, and all it ran with it
    for child in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.send_signal(signal.SIGKILL)
    proc.wait(30)
    return at


def _roles_run(lab: UpgradeLab, run: str, node: str) -> set[str]:
    """The roles any configure run of the node under the roll's run ran a task of (its
    ansible-runner events; a run the kill cut short included)."""
    events = (lab.runs / "lab" / run / "nodes" / node).glob(
        "*/artifacts/configure/ansible/*/job_events/*.json"
    )
    roles = {json.loads(path.read_text()).get("event_data", {}).get("role") for path in events}
    return {r for r in roles if r}


def _configure_runs(lab: UpgradeLab, run: str, node: str) -> list[dict[str, Any]]:
    """The node's configure runs under the roll's run, oldest first: meta, record, inventory."""
    out = []
    for path in sorted((lab.runs / "lab" / run / "nodes" / node).glob("*/configure.json")):
        record = json.loads(path.read_text())["data"]
        inventory = yaml.safe_load((path.parent / record["inventory"]).read_text())
        meta = json.loads((path.parent / "meta.json").read_text())
        out.append({"meta": meta, "record": record, "inventory": inventory})
    return out


def test_a_killed_roll_run_again_moves_every_node_and_loses_no_job(lab: UpgradeLab):
    spec = lab.spec("v2.yaml", V2, new_host=True)
    plan = lab.cli("upgrade", str(spec), "--plan", "--max-unavailable", "1")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert f"wave {len(NODES)}: {HOSTS[-1]}: {NODES[-1]}" in plan.stdout
    seed = int(os.environ.get("RACKCERT_TEST_KILL_SEED") or time.time_ns() % 10_000)
    with Sampler(lab) as sampler:
        for _ in range(3):
            lab.sbatch(2)
        at = _killed_at_a_random_step(lab, spec, seed)
        again = lab.cli("upgrade", str(spec), "--yes", "--max-unavailable", "1")
    assert again.returncode == 0, (
        f"kill seed {seed} (step {at}): {again.stdout[-3000:]}{again.stderr[-3000:]}"
    )
    data = _record(lab)
    print(
        f"killed at step {at} (seed {seed}); states:",
        {n["name"]: n["state"] for n in data["nodes"]},
    )
    assert data["status"] == "done"
    assert [n["state"] for n in data["nodes"]] == ["resumed"] * len(NODES)
    assert all(n["versions_after"].get("nvidia_driver") == V2 for n in data["nodes"])
    # Each node's guest layer ran the driver's roles (and what they depend on), as its Ansible
    # events show: not site.yml whole, nothing of NFS, SSH trust, Slurm's join or the runtime.
    run = sorted(lab.runs.glob("lab/*/upgrade.json"))[-1].parent.name
    for node in NODES:
        roles = _roles_run(lab, run, node)
        assert {"nvidia_driver", "vgpu_license", "nvidia_peermem"} <= roles, (node, roles)
        extra = roles - DRIVER_ROLES_WITH_DEPENDENCIES
        assert not extra, (node, extra)
    # Never more than one node out of service, and the sampling saw the roll take them out.
    assert max(len(s) for s in sampler.out_seen) == 1, [s for s in sampler.out_seen if len(s) > 1][
        :5
    ]
    assert {n for s in sampler.out_seen for n in s} == set(NODES)
    assert not sampler.errors, sampler.errors
    # Every job ended, and COMPLETED (none CANCELLED, NODE_FAIL or FAILED).
    _wait(lambda: set(lab.jobs) <= set(lab.ended()), 120, "every job to end")
    ends = {j: lab.ended()[j] for j in lab.jobs}
    assert set(ends.values()) == {"COMPLETED"}, ends
    # Nothing left drained by rackcert, no host in its maintenance, every node in service.
    assert lab.reasons() == {}
    _wait(lambda: set(lab.sinfo().values()) <= {"idle", "mix", "alloc"}, 60, "all nodes in service")
    from provision.hypervisor_port import VSphereHypervisor

    assert VSphereHypervisor(lab.base.spec, wait_guest=False).marked_hosts() == []
    # The images as vLCM reports them, read by a client nobody here wrote.
    image, scan = sdk(lab.twin, [{"op": "image"}, {"op": "scan"}], lab.work)
    assert image["base"] == NEW_BASE
    assert image["components"][VGPU] == VGPU_NEW and image["components"][NMLX] == NMLX_NEW
    assert scan["status"] == "COMPLIANT" and len(scan["compliant"]) == len(HOSTS)
    for node in NODES:
        smi = lab.host(node).exec(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        )
        assert smi.stdout.strip() == V2, (node, smi.stdout, smi.stderr)
    # The platform team signs v2 off: the next roll starts from this certified state.
    checked = lab.cli("validate", str(spec))
    assert "Traceback" not in checked.stderr
    newest = sorted(p for p in lab.runs.glob("lab/*/validate.json"))[-1].parent
    RunDir.open(newest).write_stage("report", {"verdict": "PASS", "reasons": []})
    lab.certified_spec = spec


def test_a_planted_failure_stays_drained_the_next_untouched_and_rollback_resumes(
    lab: UpgradeLab,
):
    spec = lab.spec("v3.yaml", V3, new_host=True)
    mark = lab.host(FAILING).path(BROKEN_KERNEL_MARK)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text("this node's kernel cannot build the 470.161.03 module\n")
    after = lab.host(AFTER)
    touched_before = after.exec(["stat", "-c", "%Y", "/var/lib/dpkg/status"]).stdout
    with Sampler(lab) as sampler:
        lab.sbatch(2)
        out = lab.cli("upgrade", str(spec), "--yes", "--max-unavailable", "1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{FAILING}: failed" in out.stdout and FAILING in out.stderr
    data = _record(lab)
    run = sorted(lab.runs.glob("lab/*/upgrade.json"))[-1].parent.name
    states = {n["name"]: n["state"] for n in data["nodes"]}
    assert states == {"lab-node1": "resumed", FAILING: "failed", AFTER: "pending"}
    reason = lab.reasons()[FAILING]
    assert reason.startswith(f"rackcert upgrade {run}: guest layer: configure failed"), reason
    assert list(lab.reasons()) == [FAILING]
    after_record = next(n for n in data["nodes"] if n["name"] == AFTER)
    assert after_record["steps"] == []
    assert after.exec(["stat", "-c", "%Y", "/var/lib/dpkg/status"]).stdout == touched_before
    assert max(len(s) for s in sampler.out_seen) == 1
    # Back to the certified state: v2's driver pinned from the node's forward run, resumed.
    back = lab.cli("upgrade", str(spec), "--yes", "--rollback", FAILING)
    assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-3000:]
    data = _record(lab)
    failed = next(n for n in data["nodes"] if n["name"] == FAILING)
    assert failed["state"] == "rolled_back" and failed["versions_after"]["nvidia_driver"] == V2
    _wait(lambda: lab.sinfo().get(FAILING) in ("idle", "mix", "alloc"), 60, f"{FAILING} resumed")
    # The rollback ran the certified spec's roles on the node alone, each version pinned to
    # what its forward configure run of this roll recorded before it changed anything.
    forward, backward = _configure_runs(lab, run, FAILING)
    assert forward["meta"]["spec_sha256"] == load_spec(spec).sha256
    assert backward["meta"]["spec_sha256"] == load_spec(lab.certified_spec).sha256
    assert backward["record"]["limit"] == FAILING
    # Both ran the roles of the component the roll moves (the guest layer's declaration), not
    # NFS, SSH trust or Slurm's join (slurmd, gone with the power cycle, is started at boot by
    # the /etc/rc.local that slurm_node wrote at set-up: the node back in service shows it).
    driver_roles = ["nvidia_driver", "vgpu_license", "nvidia_peermem"]
    assert forward["record"]["tags"] == backward["record"]["tags"] == driver_roles
    assert _roles_run(lab, run, FAILING) <= DRIVER_ROLES_WITH_DEPENDENCIES
    pinned = backward["inventory"]["all"]["children"]["rackcert_nodes"]["hosts"][FAILING]
    assert pinned["nvidia_driver_version"] == V2
    assert pinned["nvidia_driver_package"] == DRIVER.format(branch="470")
    recorded = forward["record"]["hosts"][FAILING]["outcomes"]["rackcert_facts_versions"]
    assert recorded["nvidia_driver"] == V2
    assert lab.reasons() == {}
    _wait(lambda: set(lab.jobs) <= set(lab.ended()), 120, "every job to end")
    ends = {j: lab.ended()[j] for j in lab.jobs}
    assert set(ends.values()) == {"COMPLETED"}, ends
