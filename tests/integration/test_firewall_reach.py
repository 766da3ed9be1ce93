"""validate's net.firewall between two RHEL 9 stand-in hosts whose peer filters with the
kernel's nftables (in its own network namespace), and selinux.denials' command on an audit
log.

The peer's rules are the two firewalld writes for a port its zone does not allow: the zone's
`reject with icmpx type admin-prohibited` (firewalld's nftables backend, filter_INPUT) and a
`drop` (a zone whose target is DROP), set with `nft` directly so that both shapes are judged
in one cheap test. firewalld itself, running on the stand-ins with the roles' rules, is
tests/integration/test_firewalld_hosts.py. Nothing listens on the probed ports: an open path
answers with the peer's RST (refused), which net.firewall counts as reached.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from rackcert.lab.sshhosts.host import TestHost
from tests.support.firewall_check import net_firewall_from
from validation.expect import NodeExpect, Peer, PortUse
from validation.facts.system import SelinuxDenials

PORTS = [PortUse(port=6818, use="slurmd"), PortUse(port=29410, use="launcher rendezvous/MPI")]
RULES = """table inet rackcert_test_fw {
  chain input {
    type filter hook input priority filter; policy accept;
    tcp dport 6818 reject with icmpx type admin-prohibited
    tcp dport 29410 drop
  }
}
"""


def _judge(src: TestHost, peer: TestHost):
    expect = NodeExpect(
        node=src.name,
        address=src.address,
        peers=[Peer(name=peer.name, address=peer.address, port=peer.port)],
        firewall_ports=PORTS,
    )
    return net_firewall_from(src, expect)


def test_net_firewall_names_the_port_a_peer_filters(family_hosts) -> None:
    src, peer = family_hosts("rhel-9", ["fwa", "fwb"])
    clean = _judge(src, peer)
    assert clean.status.value == "pass", clean.reason
    assert clean.observed == "3/3 reachable"

    nft = ["ip", "netns", "exec", peer.netns, "nft"]
    subprocess.run([*nft, "-f", "-"], input=RULES, text=True, check=True)
    try:
        walled = _judge(src, peer)
    finally:
        subprocess.run([*nft, "delete", "table", "inet", "rackcert_test_fw"], check=True)
    assert walled.status.value == "fail"
    assert walled.observed == "1/3 reachable"
    findings = walled.reason.split("; ")
    assert sorted(findings) == [
        f"{peer.name} port 29410/tcp (launcher rendezvous/MPI): filtered",
        f"{peer.name} port 6818/tcp (slurmd): EHOSTUNREACH",
    ]
    assert _judge(src, peer).status.value == "pass"


def test_selinux_denials_command_reads_this_boots_avc_records(tmp_path: Path) -> None:
    boot = next(
        int(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    # Red Hat's example record (RHEL 9 "Using SELinux", "Identifying SELinux denials"), with
    # one from before this boot and one after.
    record = (
        "type=AVC msg=audit({t}.220:1234): avc:  denied  {{ execute }} for  pid=4242"
        ' comm="slurmd" name="rackcert-health-check" dev="dm-0" ino=1234'
        " scontext=system_u:system_r:slurmd_t:s0 tcontext=system_u:object_r:etc_t:s0"
        " tclass=file permissive=0"
    )
    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                record.format(t=boot - 100),
                f"type=SYSCALL msg=audit({boot + 5}.220:1234): arch=c000003e syscall=59",
                record.format(t=boot + 5),
                "",
            ]
        )
    )
    fact = SelinuxDenials()
    proc = subprocess.run(
        ["bash", "-c", fact.command(str(log))], capture_output=True, text=True, check=True
    )
    report = fact.process(proc.stdout.splitlines())
    assert report.audit_log
    assert report.denials == [
        'avc: denied { execute } for pid=4242 comm="slurmd" name="rackcert-health-check"'
        ' dev="dm-0" ino=1234 scontext=system_u:system_r:slurmd_t:s0'
        " tcontext=system_u:object_r:etc_t:s0 tclass=file permissive=0"
    ]
    missing = subprocess.run(
        ["bash", "-c", fact.command(str(tmp_path / "none.log"))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert not fact.process(missing.stdout.splitlines()).audit_log
