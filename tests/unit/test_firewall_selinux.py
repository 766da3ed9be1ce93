"""network.firewall in the spec, the roles' variables and slurm.conf line it gives, the
bench's launcher ports, and validate's net.firewall and selinux.denials judged on answers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from rackcert.core.ansible_vars import spec_group_vars
from rackcert.core.errors import SpecError
from rackcert.core.slurm.conf import site_lines
from rackcert.core.spec_loader import parse_spec
from tests.support.spec_helpers import LAB, example_data, mutated
from validation.bench import ports
from validation.checks import REGISTRY, NodeView, load_all, run_check
from validation.expect import NodeExpect, Peer, PortUse, expectations
from validation.facts.peers import FirewallReach
from validation.parsers import selinux_denials
from validation.probes import ProbeOutput

SLURM = {
    "controller": {"address": "10.0.0.1"},
    "cluster": "lab",
    "partition": "gpu",
    "munge_key_file": "/etc/rackcert/munge.key",
}

# An AVC record as auditd writes it, from Red Hat's SELinux guide (RHEL 9 "Using SELinux",
# "Identifying SELinux denials"), the time moved to around the boot below.
AVC = (
    'type=AVC msg=audit({t}.147:96): avc:  denied  {{ getattr }} for  pid=2465 comm="httpd"'
    ' path="/var/www/html/file1" dev="dm-0" ino=284133'
    " scontext=unconfined_u:system_r:httpd_t:s0 tcontext=unconfined_u:object_r:samba_share_t:s0"
    " tclass=file permissive=0"
)
BOOT = 1765000000


def _parse(data: dict[str, Any]):
    return parse_spec(yaml.safe_dump(data, sort_keys=False), "rack.yaml").spec


def _with_firewall(firewall: dict[str, Any], slurm: bool = True) -> dict[str, Any]:
    def edit(d: dict[str, Any]) -> None:
        d["network"]["firewall"] = firewall
        if slurm:
            d["slurm"] = SLURM

    return mutated(example_data(LAB), edit)


def test_firewall_block_gives_the_roles_their_ports_and_slurm_its_range() -> None:
    fw = {"firewalld": {"zone": "trusted", "interfaces": ["ib0"]}, "srun_port_range": "61000-61100"}
    spec = _parse(_with_firewall(fw))
    group = spec_group_vars(spec)
    assert group["node_policy_firewalld"] is True
    assert group["node_policy_zone"] == "trusted" and group["node_policy_interfaces"] == ["ib0"]
    assert group["node_policy_srun_port_range"] == "61000-61100"
    assert group["slurm_node_slurmd_port"] == 6818
    assert "SrunPortRange=61000-61100" in site_lines(spec)


def test_no_firewall_block_leaves_firewalld_and_slurm_conf_alone() -> None:
    spec = _parse(mutated(example_data(LAB), lambda d: d.update(slurm=SLURM)))
    assert spec_group_vars(spec)["node_policy_firewalld"] is False
    assert not any(line.startswith("SrunPortRange") for line in site_lines(spec))


@pytest.mark.parametrize(
    ("firewall", "words"),
    [
        ({"srun_port_range": "63000-60001"}, "srun_port_range"),
        ({"launcher_port_range": "70000"}, "launcher_port_range"),
        ({"firewalld": {"zone": "a-zone-name-too-long"}}, "zone"),
        ({"firewalld": {"zone": "trusted", "ports": [22]}}, "ports"),
        ({"firewalld": {"interfaces": ["-ib0"]}}, "interfaces"),
    ],
)
def test_bad_firewall_block_is_one_error_naming_file_line_and_key(firewall, words) -> None:
    data = _with_firewall(firewall, slurm=False)
    with pytest.raises(SpecError) as err:
        _parse(data)
    text = str(err.value)
    assert text.startswith("rack.yaml:") and "network.firewall" in text and words in text
    line = int(text.split(":")[1])
    assert "firewall" in yaml.safe_dump(data, sort_keys=False).splitlines()[line - 1] or line > 1


def test_bench_launchers_stay_in_the_opened_range() -> None:
    spec = _parse(_with_firewall({"launcher_port_range": "29500-29520"}))
    assert ports.rendezvous_port(spec, None) == 29500
    assert ports.rendezvous_port(spec, 29999) == 29999
    assert ports.mpi_port_env(spec) == {
        "OMPI_MCA_btl_tcp_port_min_v4": "29501",
        "OMPI_MCA_btl_tcp_port_range_v4": "20",
    }
    assert ports.mpi_port_env(_parse(_with_firewall({"launcher_port_range": "29500"}))) == {}


def test_expectation_names_slurmd_and_the_ends_of_each_range() -> None:
    spec = _parse(_with_firewall({"srun_port_range": "60001-63000"}))
    expect = next(iter(expectations(spec).values()))
    got = {(p.port, p.use) for p in expect.firewall_ports}
    assert got == {
        (6818, "slurmd"),
        (60001, "srun SrunPortRange"),
        (63000, "srun SrunPortRange"),
        (29400, "launcher rendezvous/MPI"),
        (29410, "launcher rendezvous/MPI"),
    }
    (targets,) = FirewallReach.args(expect)
    assert len(targets) == len(expect.peers) * 6  # each peer's SSH port and the five


def _expect() -> NodeExpect:
    return NodeExpect(
        node="a",
        address="10.0.0.2",
        peers=[Peer(name="b", address="10.0.0.3"), Peer(name="c", address="10.0.0.4")],
        firewall_ports=[PortUse(port=6818, use="slurmd")],
    )


def _judge(check_id: str, expect: NodeExpect, key: str, text: str):
    load_all()
    return run_check(REGISTRY[check_id], NodeView(expect, {key: ProbeOutput(key, 0, text)}))


def test_net_firewall_names_each_peer_and_port_it_cannot_reach() -> None:
    text = "\n".join(
        [
            "reach b 22 open",
            "reach b 6818 EHOSTUNREACH",
            "reach c 22 filtered",
            "reach c 6818 refused",
        ]
    )
    result = _judge("net.firewall", _expect(), "firewall_reach", text)
    assert result.status.value == "fail"
    assert result.observed == "2/4 reachable"
    assert "b port 6818/tcp (slurmd): EHOSTUNREACH" in result.reason
    assert "c port 22/tcp (ssh): filtered" in result.reason
    assert result.reason.count(";") == 1  # one finding per peer and port, no more


def test_net_firewall_passes_where_nothing_is_firewalled() -> None:
    text = "reach b 22 open\nreach b 6818 refused\nreach c 22 open\nreach c 6818 refused\n"
    result = _judge("net.firewall", _expect(), "firewall_reach", text)
    assert result.status.value == "pass", result.reason


def test_selinux_denial_since_boot_is_reported_and_older_ones_are_not() -> None:
    text = "\n".join(
        ["mode 1", f"btime {BOOT}", AVC.format(t=BOOT - 3600), AVC.format(t=BOOT + 60)]
    )
    report = selinux_denials(text)
    assert report.mode == "enforcing" and len(report.denials) == 1
    result = _judge("selinux.denials", _expect(), "selinux_denials", text)
    assert result.status.value == "fail"
    assert "denied { getattr }" in result.reason and "httpd_t" in result.reason


def test_selinux_without_denials_passes_and_without_selinux_is_skipped() -> None:
    clean = f"mode 1\nbtime {BOOT}\n{AVC.format(t=BOOT - 10)}\n"
    assert _judge("selinux.denials", _expect(), "selinux_denials", clean).status.value == "pass"
    off = f"mode disabled\nbtime {BOOT}\nno audit log\n"
    assert _judge("selinux.denials", _expect(), "selinux_denials", off).status.value == "skip"
