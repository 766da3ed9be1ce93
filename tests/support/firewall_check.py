"""validate's `net.firewall` judged from a test host, as validate does it on a node: the
fact's probe run over the host's SSH, the check run on its answer (used by
tests/integration/test_firewall_reach.py and test_firewalld_hosts.py)."""

from __future__ import annotations

from rackcert.lab.sshhosts.host import TestHost
from validation.checks import REGISTRY, NodeView, Outcome, load_all, run_check
from validation.expect import NodeExpect
from validation.facts.peers import FirewallReach
from validation.probes import ProbeOutput


def net_firewall_from(src: TestHost, expect: NodeExpect) -> Outcome:
    """The check's outcome on `src` for what `expect` says it must reach."""
    fact = FirewallReach()
    proc = src.ssh(fact.command(*FirewallReach.args(expect)), timeout=30)
    assert proc.returncode == 0, proc.stderr
    load_all()
    outputs = {fact.key: ProbeOutput(fact.key, 0, proc.stdout)}
    return run_check(REGISTRY["net.firewall"], NodeView(expect, outputs))
