"""SSH trust: every node reaches every peer without a password (MPI and torchrun need it)."""

from __future__ import annotations

from validation import parsers
from validation.checks import NodeView, Outcome, check, failed, passed, skipped


@check("ssh.peers", probes=("ssh_peers",))
def peers(view: NodeView) -> Outcome:
    """`ssh -o BatchMode=yes` from this node to every other VM of the spec succeeds.

    A first contact records the peer's host key in the node's known_hosts (accept-new),
    as the first MPI launch would. The mesh is n x (n-1) connections: the one part of
    validate that grows faster than the number of nodes.

    Fix: distribute the nodes' public keys to each other's authorized_keys (role ssh_trust).
    """
    want = view.expect.peers
    if not want:
        return skipped("the spec has no other VM to reach")
    answers = parsers.ssh_peers(view.text("ssh_peers"))
    bad = []
    for peer in want:
        got = answers.get(peer.name)
        if got is None or got.rc != 0:
            bad.append(f"{peer.name} ({got.message if got else 'no answer'})")
    expected = f"{len(want)} peer(s) without password"
    if bad:
        return failed(f"{len(want) - len(bad)}/{len(want)} reached", expected, "; ".join(bad))
    return passed(f"{len(want)}/{len(want)} reached", expected)
