"""SSH from the node to its peers: the one fact whose command the node's peers shape."""

from __future__ import annotations

import shlex

from rackcert.core.ssh_target import hop_options, node_known_hosts
from validation import parsers
from validation.expect import NodeExpect, Peer
from validation.facts.base import Fact

# The hops only run `true`: they prefer curve25519 key exchange, which OpenSSH 9's default
# (the post-quantum hybrid sntrup761x25519) costs ten times the CPU of (about 100 ms per
# connection on a 2-core machine against 10 ms, measured with OpenSSH 9.2), and the
# mesh makes many. The hybrid stays allowed as a fallback.
HOP_KEX = (
    "curve25519-sha256,curve25519-sha256@libssh.org,sntrup761x25519-sha512@openssh.com,"
    "ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521"
)


class SshPeers(Fact):
    """`ssh -o BatchMode=yes PEER true` to each chosen peer at once: {peer: (rc, message)}.

    Host keys are trusted only as the controller enrolled or the spec pinned them
    (StrictHostKeyChecking=yes against exactly those lines, sent with the command); none
    given: the node's own known_hosts, strictly.
    """

    key = "ssh_peers"
    tool = "ssh"

    @classmethod
    def args(cls, expect: NodeExpect) -> tuple[list[Peer], str, list[str] | None]:
        return (expect.peers, expect.user, expect.peer_known_hosts)

    def command(
        self, peers: list[Peer] | None = None, login: str = "root", pins: list[str] | None = None
    ) -> str:
        if not peers:
            return "true"
        setup, cleanup = "", ""
        if pins is not None:
            setup, path, cleanup = node_known_hosts(pins, "peers")
            hop = hop_options(path, connect_timeout=5)
        else:
            hop = [
                *("-o", "BatchMode=yes", "-o", "ConnectTimeout=5"),
                *("-o", "StrictHostKeyChecking=yes"),
            ]
        opts = shlex.join(
            [
                *hop,
                *("-o", "ControlMaster=no", "-o", "GSSAPIAuthentication=no"),
                *("-o", "LogLevel=ERROR", "-o", f"KexAlgorithms={HOP_KEX}"),
            ]
        )
        lines = [f"{setup} || exit 1"] if setup else []
        # The last line of what ssh said, cut at 200 bytes, by the shell itself: `tail` and
        # `cut` cost the node two more processes a peer (the mesh makes many).
        lines.append("nl='\n'")
        for peer in peers:
            target = shlex.quote(f"{login}@{peer.address}")
            label = shlex.quote(peer.name)
            lines.append(
                f"( out=$(ssh -n -T {opts} -p {peer.port} -- {target} true 2>&1); rc=$?; "
                f'printf \'peer %s rc=%s %.200s\\n\' {label} "$rc" "${{out##*"$nl"}}" ) &'
            )
        lines.append("wait")
        if cleanup:
            lines.append(cleanup)
        return "\n".join(lines)

    @staticmethod
    def default() -> dict[str, parsers.PeerResult]:
        return {}

    def process(self, output: list[str]) -> dict[str, parsers.PeerResult]:
        return parsers.ssh_peers("\n".join(output))


# A TCP connect from the node to each (peer, port) at once, in the node's Python (Ansible
# needs one there): the connect's own outcome tells a firewall's drop (timeout) or reject
# (an errno such as EHOSTUNREACH) from a peer that answers (connected, or RST: refused).
_REACH = """
import socket, sys, errno, threading
def probe(name, host, port):
    try:
        socket.create_connection((host, port), timeout=float(sys.argv[1])).close()
        state = "open"
    except ConnectionRefusedError:
        state = "refused"
    except socket.timeout:
        state = "filtered"
    except OSError as e:
        state = errno.errorcode.get(e.errno, "error")
    print("reach %s %d %s" % (name, port, state), flush=True)
jobs = []
for arg in sys.argv[2:]:
    name, host, port = arg.rsplit(",", 2)
    jobs.append(threading.Thread(target=probe, args=(name, host, int(port))))
[j.start() for j in jobs]
[j.join() for j in jobs]
"""

REACH_TIMEOUT_S = 3


class FirewallReach(Fact):
    """Whether each peer's ports answer a TCP connect from this node: {(peer, port): state}.

    The ports are each peer's SSH port and the spec's firewall ports (NodeExpect's
    firewall_ports). Nothing needs to listen: a peer's RST (refused) shows the path is open.
    """

    key = "firewall_reach"
    tool = "python3"

    @classmethod
    def args(cls, expect: NodeExpect) -> tuple[list[str]]:
        targets = []
        for peer in expect.peers:
            ports = [peer.port, *(p.port for p in expect.firewall_ports)]
            targets += [f"{peer.name},{peer.address},{port}" for port in dict.fromkeys(ports)]
        return (targets,)

    def command(self, targets: list[str] | None = None) -> str:
        if not targets:
            return "true"
        return shlex.join(["python3", "-c", _REACH, str(REACH_TIMEOUT_S), *targets])

    @staticmethod
    def default() -> dict[tuple[str, int], str]:
        return {}

    def process(self, output: list[str]) -> dict[tuple[str, int], str]:
        return parsers.firewall_reach("\n".join(output))


FACTS = (SshPeers, FirewallReach)
