"""The nodes' firewalls and SELinux: peers reach the ports jobs use; no AVC denial since boot."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.facts.peers import FirewallReach
from validation.facts.system import AUDIT_LOG, SelinuxDenials
from validation.parsers import REACHED


@check("net.firewall", facts=(FirewallReach,))
def firewall(view: NodeView) -> Outcome:
    """Every peer's SSH port, slurmd's port and the ends of srun's and the launchers' port
    ranges answer a TCP connect from this node (open, or refused by the peer itself).

    A connect that times out (a firewall's drop) or is answered with an ICMP error
    (firewalld's reject, EHOSTUNREACH) is one finding per peer and port.

    Fix: open the port in the peer's firewalld zone (network.firewall in the spec, then
    rackcert configure --tags slurm,dl_runtime,ssh_trust), or bind the data interface to the
    zone (`firewall-cmd --permanent --zone=trusted --change-interface=ib0`).
    """
    want = view.expect.peers
    if not want:
        return skipped("the spec has no other VM to reach")
    answers = view.fact(FirewallReach)
    uses = {p.port: p.use for p in view.expect.firewall_ports}
    bad, total = [], 0
    for peer in want:
        for port in dict.fromkeys([peer.port, *uses]):
            total += 1
            use = "ssh" if port == peer.port else uses[port]
            state = answers.get((peer.name, port), "no answer")
            if state not in REACHED:
                bad.append(f"{peer.name} port {port}/tcp ({use}): {state}")
    expected = f"{total} peer port(s) reachable"
    if bad:
        return failed(f"{total - len(bad)}/{total} reachable", expected, "; ".join(bad))
    return passed(f"{total}/{total} reachable", expected)


@check("selinux.denials", facts=(SelinuxDenials,))
def selinux_denials(view: NodeView) -> Outcome:
    """No SELinux AVC denial in the audit log since the node booted (where SELinux is on).

    A denial is something the policy stopped: a munge key, a health check slurmd runs or a
    data mount labelled as the policy does not expect. Enforcing stays on; rackcert's roles
    label what they write (semanage fcontext, restorecon, setsebool -P).

    Fix: `ausearch -m AVC -ts boot` on the node; label the path (`semanage fcontext -a -t
    TYPE PATH; restorecon -v PATH`) or set the boolean the denial names, never `setenforce 0`.
    """
    report = view.fact(SelinuxDenials)
    if report.mode in ("disabled", "unknown"):
        return skipped(f"SELinux is {report.mode} on the node")
    if not report.audit_log:
        return skipped(
            f"SELinux is {report.mode}; {AUDIT_LOG} is not there or not readable by the"
            " validating user (auditd writes it 0600 root)"
        )
    if report.denials:
        shown = "; ".join(report.denials[:5])
        more = f" (+{len(report.denials) - 5} more)" if len(report.denials) > 5 else ""
        return failed(
            f"SELinux {report.mode}, {len(report.denials)} denial(s)",
            "no AVC denial since boot",
            shown + more,
        )
    return passed(f"SELinux {report.mode}, no denial since boot", "no AVC denial since boot")
