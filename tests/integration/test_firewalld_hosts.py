"""firewalld for real on two RHEL 9 stand-ins: a two-node job passes only with the roles' rules.

Two EL stand-ins (tests/support/plugins/family_hosts.py) each run their own system bus and
firewalld with the nftables backend in their own network namespace
(rackcert.lab.hostfirewalld), default zone public: what the zone does not allow is rejected.
The spec's `network.firewall: {firewalld: {zone: public}}` reaches node_policy through the
generated inventory, and a play opens what slurm_node, dl_runtime and ssh_trust open, with
their own include of node_policy's open_ports (the roles' other tasks, package installs and
daemons, are the configure journeys' business and not run here: cost).

The multi-node job is a Slurm step and the bench's allreduce; validate's net.firewall (each
node probes its peer's SSH port, slurmd's 6818, and the ends of srun's and the launchers'
ranges) judges the rules beside them.
- Slurm: the lab's munged and slurmctld (rackcert.lab.slurm) on the hosts' bridge address in
  the machine's namespace, one slurmd in each host's network, mount and UTS namespaces
  (SlurmLab.start_slurmds: not the slurm_node role's join, a configure run that the Slurm
  modules test), and `srun -N2 hostname` run on the first node as a user runs it on a login
  node. So every Slurm connection that enters a node crosses its firewalld: the
  controller's and srun's to slurmd's SlurmdPort, and the second node's slurmstepd's back
  to srun's listening ports on the first, which slurm.conf's SrunPortRange keeps in the
  range the role opened (slurm.conf(5), SrunPortRange).
- the bench's two-rank Gloo allreduce (validation/bench/node/pair_allreduce.py) over SSH, with
  its TCP store on the launchers' first port. Gloo's own sockets bind ports the kernel picks;
  each host's netns keeps those in the opened range (net.ipv4.ip_local_port_range, past the
  rendezvous port), which is what makes "over the opened port range" true here (a site binds
  the data interface to a trusted zone instead, network.firewall.firewalld.interfaces).

Then one rule is removed from each node's running firewall with firewall-cmd, each one job's
alone: the launchers' range on the rank-0 node (net.firewall names its two ends, the allreduce
fails) and slurmd's port on the second node (net.firewall names 6818/tcp, srun's step fails
there and the controller marks the node not responding); the roles' play puts both back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rackcert.configure.inventory import build_inventory, write_inventory
from rackcert.core.known_hosts import ssh_options
from rackcert.core.paths import playbooks_dir
from rackcert.lab.hostfirewalld import firewalld_available, start_firewalld
from rackcert.lab.slurm import NodeDef, SlurmLab, spec_block
from rackcert.lab.sshhosts.host import TestHost
from tests.support.firewall_check import net_firewall_from
from tests.support.plugins.configure import spec_for_hosts
from tests.support.plugins.slurm import free_port
from validation.bench.node import pair_allreduce
from validation.checks import Outcome
from validation.expect import NodeExpect, expectations

ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
LAUNCHERS = "29400-29410"

# What each role passes to node_policy's open_ports (slurm_node tasks/join.yml, dl_runtime
# tasks/main.yml, ssh_trust tasks/main.yml), in that order.
PLAY = [
    {
        "name": "The roles' firewalld rules",
        "hosts": "rackcert_nodes",
        "gather_facts": False,
        "tasks": [
            {
                "name": f"{role}: open its ports",
                "ansible.builtin.include_role": {"name": "node_policy", "tasks_from": "open_ports"},
                "vars": {"node_policy_ports": ports},
            }
            for role, ports in (
                (
                    "slurm_node",
                    ["{{ slurm_node_slurmd_port }}", "{{ node_policy_srun_port_range }}"],
                ),
                ("dl_runtime", ["{{ node_policy_launcher_port_range }}"]),
                ("ssh_trust", ["{{ ansible_port | default(22) }}"]),
            )
        ],  # fmt: skip
    }
]


@dataclass
class Rack:
    hosts: list[TestHost]
    expect: dict[str, NodeExpect]
    before: list[Outcome]  # net.firewall on each node before the roles' rules
    play: Callable[..., subprocess.CompletedProcess[str]]  # the roles' rules, applied again
    first: subprocess.CompletedProcess[str]  # the play's first run
    slurm: SlurmLab  # munged and slurmctld here, a slurmd in each host


def judge(rack: Rack, src: TestHost) -> Outcome:
    """validate's net.firewall on `src`: its probe over SSH, the check on the answer."""
    return net_firewall_from(src, rack.expect[src.name])


def allreduce(rack: Rack, timeout_s: int) -> list[dict]:
    """The bench's pair allreduce, rank 0 on the first host with its store on the launchers'
    first port; each rank's last output line (its JSON, or `error: ...`)."""
    first, second = rack.hosts
    port = LAUNCHERS.split("-")[0]

    def rank(i: int) -> dict:
        host = (first, second)[i]
        line = pair_allreduce.command("python3", i, first.address, second.address,
                                      device="cpu", timeout_s=timeout_s)  # fmt: skip
        line += f" --port {port} --size-bytes 65536 --iters 2"
        proc = host.ssh(line, timeout=timeout_s + 60)
        last = (proc.stdout.strip().splitlines() or [f"error: exit {proc.returncode}"])[-1]
        return json.loads(last) if last.startswith("{") else {"error": last, "rc": proc.returncode}

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(rank, (0, 1)))


def srun(rack: Rack, *args: str) -> subprocess.CompletedProcess[str]:
    """srun on the first node, as a user runs it on a login node (its listening ports behind
    that node's firewalld), against the lab's controller."""
    line = ["env", f"SLURM_CONF={rack.slurm.conf}", "srun", *args]
    return rack.hosts[0].exec(line, timeout=60)


def wait_state(rack: Rack, node: str, ready: Callable[[str], bool], timeout: float = 30) -> str:
    """The node's sinfo state once `ready` holds for it (a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = rack.slurm.node_states().get(node, "")
        if ready(state):
            return state
        time.sleep(0.2)
    raise AssertionError(f"{node}: sinfo state still {state!r} after {timeout:.0f} s")


@pytest.fixture(scope="module")
def rack(family_hosts_module, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rack]:
    missing = firewalld_available()
    assert missing is None, missing
    hosts = family_hosts_module("rhel-9", ["fwd1", "fwd2"])
    start_firewalld(hosts)
    low, high = (int(p) for p in LAUNCHERS.split("-"))
    for h in hosts:
        out = h.exec(["sysctl", "-w", f"net.ipv4.ip_local_port_range={low + 1} {high}"])
        assert out.returncode == 0, out.stderr
    tmp = tmp_path_factory.mktemp("firewalld")
    # The controller on the hosts' bridge address, per test process (its own directory,
    # munge socket and port); the spec's slurm block points at it.
    gateway = hosts[0].subnet.rsplit(".", 1)[0] + ".1"
    slurm = SlurmLab.for_owner(
        f"{os.getpid()}fw", address=gateway, port=free_port(gateway),
        nodes=[NodeDef(h.name, h.address) for h in hosts],
    )  # fmt: skip

    def edit(data: dict) -> None:
        data["network"]["firewall"] = {"firewalld": {"zone": "public"},
                                       "launcher_port_range": LAUNCHERS}  # fmt: skip
        data["slurm"] = spec_block(slurm)

    loaded = spec_for_hosts(hosts, tmp / "spec", guest={"os": "rhel-9"}, edit=edit)
    # What `rackcert slurm conf` prints for the site's slurm.conf where firewalld is set.
    slurm.srun_port_range = loaded.spec.network.firewall.srun_port_range
    partial = Rack(
        hosts, expectations(loaded.spec), [], subprocess.run,
        subprocess.CompletedProcess([], 0), slurm,
    )  # fmt: skip
    partial.before = [judge(partial, h) for h in hosts]
    inventory = write_inventory(build_inventory(loaded.spec), tmp / "inv")
    playbook = tmp / "play.yml"
    playbook.write_text(yaml.safe_dump(PLAY, sort_keys=False))
    ssh_args = " ".join(f"-o {o}" for o in ssh_options(hosts[0].known_hosts)[1::2])
    # The runner's ssh settings that matter here (rackcert.configure.runner): the hosts' known
    # keys only, one connection per host kept for the play.
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": str(tmp), "ANSIBLE_ROLES_PATH": str(playbooks_dir() / "roles"),
           "ANSIBLE_SSH_ARGS": f"-o ControlMaster=auto -o ControlPersist=60s {ssh_args}"
                               " -o IdentitiesOnly=yes -o BatchMode=yes",
           "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp / "cp"), "ANSIBLE_PIPELINING": "True",
           "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3", "ANSIBLE_NOCOLOR": "True"}  # fmt: skip

    def play(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook), *args],
            capture_output=True, text=True, timeout=180, cwd=tmp, check=False, env=env,
        )  # fmt: skip

    partial.play = play
    partial.first = play()
    try:
        slurm.start()
        slurm.start_slurmds({h.name: h.pid for h in hosts})
        yield partial
    finally:
        slurm.stop()
        for log in slurm.directory.glob("*.log"):  # kept beside the test's files
            shutil.copy(log, tmp / log.name)
        slurm.remove()


def test_the_zone_rejects_the_jobs_ports_until_the_roles_open_them(rack: Rack) -> None:
    first, second = rack.hosts
    for host, before in zip(rack.hosts, rack.before, strict=True):
        peer = next(h for h in rack.hosts if h is not host)
        assert before.status.value == "fail", before.reason
        # public allows ssh (firewalld's zone file): the other five ports are rejected.
        assert before.observed == "1/6 reachable"
        assert f"{peer.name} port 6818/tcp (slurmd): EHOSTUNREACH" in before.reason
    assert rack.first.returncode == 0, rack.first.stdout[-3000:] + rack.first.stderr[-2000:]
    for host in rack.hosts:
        ports = host.exec(["firewall-cmd", "--zone=public", "--list-ports"]).stdout.split()
        assert sorted(ports) == ["22/tcp", "29400-29410/tcp", "60001-63000/tcp", "6818/tcp"]
        after = judge(rack, host)
        assert after.status.value == "pass", after.reason
        assert after.observed == "6/6 reachable"
    step = srun(rack, "-N2", "-l", "hostname")
    assert step.returncode == 0, step.stderr
    assert sorted(step.stdout.splitlines()) == [f"0: {first.name}", f"1: {second.name}"]
    ranks = allreduce(rack, timeout_s=30)
    assert all(r.get("correct") is True for r in ranks), ranks
    assert {r["backend"] for r in ranks} == {"gloo"}


def test_one_rule_removed_on_each_node_is_named_its_job_fails_and_configure_puts_it_back(
    rack: Rack,
) -> None:
    first, second = rack.hosts

    # One rule on each node, each one job's alone; one play then puts both back (a fault in
    # a test of its own would cost a second play, ~10 s).
    # firewall-cmd(1): without --permanent a change is to the running firewall, at once.
    def remove(host: TestHost, port: str) -> None:
        out = host.exec(["firewall-cmd", "--zone=public", f"--remove-port={port}"])
        assert out.returncode == 0, out.stderr

    # The launchers' range on the allreduce's rank-0 node, slurmd's port on the second node
    # (srun runs on the first). With the first removed, srun still runs: it needs no
    # launcher port.
    remove(first, f"{LAUNCHERS}/tcp")
    walled = judge(rack, second)
    ok = srun(rack, "-N2", "-l", "hostname")
    # With the second removed too, srun's launch on the second node is rejected (firewalld's
    # reject answers EHOSTUNREACH; Slurm's slurm_open_stream retries a connect only on
    # ECONNREFUSED and ETIMEDOUT, src/common/slurm_protocol_socket.c). The job that just
    # ended left the controller freshly in touch with that slurmd (its last response: the
    # job's end), and the controller pings a node only once that is SlurmdTimeout/3 old
    # (src/slurmctld/ping_nodes.c, still_live_time), so the launch, not a ping, is what
    # meets the firewall first; --immediate (srun(1)) ends srun rather than queue it should
    # a ping ever come first. The allreduce runs beside it:
    # each job waits out its own failure (srun: KillWait + 2 s for the step it did start;
    # the ranks: their 5 s timeout), and neither job uses the other's port.
    remove(second, "6818/tcp")
    with ThreadPoolExecutor(1) as pool:
        launched = pool.submit(srun, rack, "-N2", "--immediate", "-l", "hostname")
        ranks = allreduce(rack, timeout_s=5)
        step = launched.result()
    # The controller's message ending the job on that node fails alike, and it marks the
    # node not responding (sinfo(1): the state's `*` suffix).
    gone = wait_state(rack, second.name, lambda s: s.endswith("*"))
    unreached = judge(rack, first)
    # The fix net.firewall names: the roles again (rackcert configure --tags ...). Only the
    # running zones lacked the ports, the permanent ones still have them: on each node one
    # role's task puts its port back, alone. Slurm finds the node again at its next ping
    # (every SlurmdTimeout/3), or, once the node is DOWN (SlurmdTimeout without an answer),
    # at a registration request, every 20th ping; and ends the failed job there when it
    # resends the job's end, a minute later: none of that is waited for here (cost), only
    # the rules net.firewall finds.
    again = rack.play()
    assert walled.status.value == "fail"
    assert walled.observed == "4/6 reachable"
    assert sorted(walled.reason.split("; ")) == [
        f"{first.name} port 29400/tcp (launcher rendezvous/MPI): EHOSTUNREACH",
        f"{first.name} port 29410/tcp (launcher rendezvous/MPI): EHOSTUNREACH",
    ]
    assert ranks[1].get("error"), ranks  # rank 1 never reaches rank 0's store
    assert not any(r.get("correct") for r in ranks), ranks
    assert ok.returncode == 0, ok.stderr
    assert sorted(ok.stdout.splitlines()) == [f"0: {first.name}", f"1: {second.name}"]
    assert unreached.status.value == "fail"
    assert unreached.observed == "5/6 reachable"
    assert unreached.reason == f"{second.name} port 6818/tcp (slurmd): EHOSTUNREACH"
    assert step.returncode != 0, step.stdout
    assert f"1: {second.name}" not in step.stdout.splitlines(), step.stdout
    assert f"failed on node {second.name}: Communication connection failure" in step.stderr, (
        step.stderr
    )
    assert gone.endswith("*"), gone
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    recap = {line.split()[0]: line for line in again.stdout.splitlines() if " changed=" in line}
    assert sorted(recap) == sorted(h.name for h in rack.hosts), recap
    assert all("changed=1 " in line for line in recap.values()), recap
    assert [judge(rack, h).status.value for h in rack.hosts] == ["pass", "pass"]
