"""SSH trust: every node reaches its peers without a password (MPI and torchrun need it)."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.facts.peers import SshPeers

HOST_KEY_FAILED = "Host key verification failed"


def _why(message: str) -> str:
    if HOST_KEY_FAILED in message:
        return f"its host key is not the one enrolled: {message.rstrip('.')}"
    return message


@check("ssh.peers", facts=(SshPeers,))
def peers(view: NodeView) -> Outcome:
    """`ssh -o BatchMode=yes` from this node to its chosen peers succeeds (validate --peers).

    The peers are the two ring neighbours and k more, the ones this node has gone longest
    without checking (validation.peer_choice; `--peers all`: every other VM). Host keys are
    checked strictly (StrictHostKeyChecking=yes) against the keys the controller enrolled
    or the spec pinned (rackcert.core.known_hosts), sent with the probe: a peer answering with
    another key fails, never is trusted anew.

    Fix: share the cluster key (role ssh_trust); for a changed host key see docs/security.md.
    """
    want = view.expect.peers
    if not want:
        return skipped("the spec has no other VM to reach")
    answers = view.fact(SshPeers)
    bad = []
    for peer in want:
        got = answers.get(peer.name)
        if got is None or got.rc != 0:
            bad.append(f"{peer.name} ({_why(got.message) if got else 'no answer'})")
    expected = f"{len(want)} peer(s) without password"
    if bad:
        return failed(f"{len(want) - len(bad)}/{len(want)} reached", expected, "; ".join(bad))
    return passed(f"{len(want)}/{len(want)} reached", expected)
