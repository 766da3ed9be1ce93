"""firewalld for real on two RHEL 9 stand-ins: a two-node job passes only with the roles' rules.

Two EL stand-ins (tests/support/plugins/family_hosts.py) each run their own system bus and
firewalld with the nftables backend in their own network namespace
(rackcert.lab.hostfirewalld), default zone public: what the zone does not allow is rejected.
The spec's `network.firewall: {firewalld: {zone: public}}` reaches node_policy through the
generated inventory, and a play opens what slurm_node, dl_runtime and ssh_trust open, with
their own include of node_policy's open_ports (the roles' other tasks, package installs and
daemons, are the configure journeys' business and not run here: cost).

The multi-node check is validate's net.firewall (each node probes its peer's SSH port,
slurmd's 6818, and the ends of srun's and the launchers' ranges) and the bench's two-rank
Gloo allreduce (validation/bench/node/pair_allreduce.py) with its TCP store on the launchers'
first port. Gloo's own sockets bind ports the kernel picks; each host's netns keeps those in
the opened range (net.ipv4.ip_local_port_range, past the rendezvous port), which is what
makes "over the opened port range" true here (a site binds the data interface to a trusted
zone instead, network.firewall.firewalld.interfaces).
Not here: srun. The Slurm fixture joins nodes with a full `rackcert configure --tags slurm`
run (tens of seconds) and runs srun and slurmctld in the machine's namespace, where no
firewalld filters: slurmd's port is what a firewalld could block, and net.firewall probes it.

Then the launchers' range is removed on the rank-0 node with firewall-cmd: net.firewall names
the two ports and the allreduce fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
from rackcert.lab.sshhosts.host import TestHost
from tests.support.firewall_check import net_firewall_from
from tests.support.plugins.configure import spec_for_hosts
from validation.bench.node import pair_allreduce
from validation.checks import Outcome
from validation.expect import NodeExpect, expectations

ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
LAUNCHERS = "29400-29410"
SLURM = {
    "controller": {"address": "10.0.0.1"},
    "cluster": "lab",
    "partition": "cpu",
    "munge_key_file": "/etc/rackcert/munge.key",
}

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

    def edit(data: dict) -> None:
        data["network"]["firewall"] = {"firewalld": {"zone": "public"},
                                       "launcher_port_range": LAUNCHERS}  # fmt: skip
        data["slurm"] = SLURM

    loaded = spec_for_hosts(hosts, tmp / "spec", guest={"os": "rhel-9"}, edit=edit)
    partial = Rack(
        hosts, expectations(loaded.spec), [], subprocess.run, subprocess.CompletedProcess([], 0)
    )
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
    yield partial


def test_the_zone_rejects_the_jobs_ports_until_the_roles_open_them(rack: Rack) -> None:
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
    ranks = allreduce(rack, timeout_s=30)
    assert all(r.get("correct") is True for r in ranks), ranks
    assert {r["backend"] for r in ranks} == {"gloo"}


def test_one_rule_removed_is_named_the_allreduce_fails_and_configure_puts_it_back(
    rack: Rack,
) -> None:
    first, second = rack.hosts
    # firewall-cmd(1): without --permanent a change is to the running firewall, at once.
    out = first.exec(["firewall-cmd", "--zone=public", f"--remove-port={LAUNCHERS}/tcp"])
    assert out.returncode == 0, out.stderr
    walled = judge(rack, second)
    ranks = allreduce(rack, timeout_s=5)
    # The fix net.firewall names: the roles again (rackcert configure --tags ...), here on the
    # node it named (the other's tasks change nothing: cost). Only its running zone lacked
    # the range, its permanent one still has it: dl_runtime's task puts it back, alone.
    again = rack.play("--limit", first.name)
    assert walled.status.value == "fail"
    assert walled.observed == "4/6 reachable"
    assert sorted(walled.reason.split("; ")) == [
        f"{first.name} port 29400/tcp (launcher rendezvous/MPI): EHOSTUNREACH",
        f"{first.name} port 29410/tcp (launcher rendezvous/MPI): EHOSTUNREACH",
    ]
    assert ranks[1].get("error"), ranks  # rank 1 never reaches rank 0's store
    assert not any(r.get("correct") for r in ranks), ranks
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    recap = {line.split()[0]: line for line in again.stdout.splitlines() if " changed=" in line}
    assert list(recap) == [first.name] and "changed=1 " in recap[first.name], recap
    assert judge(rack, second).status.value == "pass"
