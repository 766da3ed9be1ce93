"""How rackcert reaches one node over OpenSSH: one type, rendered for every client that needs it.

validate (testinfra), bench (plain ssh, and the launchers' own hops from the first node)
and discover --nodes all reach VMs with the same OpenSSH client. They used to spell the
options each in its own way (three ConnectTimeouts, two known_hosts files, a `--` in some
command lines and not in others); this module is the one place that says them, the way
testinfra's host spec (`ssh://user@host:port` plus identity file and ssh_config) is one
value for all of its modules.

What every rendering holds:
- `BatchMode=yes`: a password or passphrase prompt is a failure, never a hang;
- `StrictHostKeyChecking=yes`, always. There is no knob to loosen it: trust on first
  contact happens in one place only, `rackcert.core.known_hosts.enroll` (ssh-keyscan, shown
  and recorded); with a known_hosts file (the rack's, or the spec's pinned one) the
  client trusts exactly that file (`UserKnownHostsFile`, no global file, no
  `UpdateHostKeys`); without one, the user's own known_hosts, strictly;
- `IdentitiesOnly=yes` with an identity file: the spec's key, not whatever an agent offers;
- `--` before the destination in an argv, so a user or host starting with `-` is a
  destination, never an option such as `-oProxyCommand` (which would run a command here).

Example:
    target = SshTarget(host="10.77.0.11", identity_file="~/.ssh/id_rack", known_hosts=kh)
    subprocess.run(target.argv("hostname"))             # ssh ... -- root@10.77.0.11 hostname
    hostspec, kwargs = target.testinfra()               # testinfra.get_host(hostspec, **kwargs)
    setup, path, cleanup = node_known_hosts(lines)      # the enrolled keys, on a node
    hop_options(path)                                   # a launcher's hops from that node
"""

from __future__ import annotations

import shlex
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from rackcert.core.known_hosts import host_name, ssh_options


def _options(*, identity: bool, known_hosts: str | None, connect_timeout: int) -> list[str]:
    opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}"]
    if identity:
        opts += ["-o", "IdentitiesOnly=yes"]
    if known_hosts:
        return opts + ssh_options(Path(known_hosts))
    return [*opts, "-o", "StrictHostKeyChecking=yes"]


class SshTarget(BaseModel):
    """One node as OpenSSH reaches it: user, host, port, key, known_hosts, timeout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(description="Address or name of the node")
    user: str = "root"
    port: int = 22
    identity_file: str | None = Field(None, description="Private key (the spec's key_file)")
    known_hosts: str | None = Field(
        None, description="The only host keys trusted (rackcert.core.known_hosts); none: the user's"
    )
    ssh_config: str | None = Field(None, description="An ssh_config to read (-F), if asked")
    connect_timeout: int = 5

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}"

    @property
    def known_hosts_name(self) -> str:
        """How known_hosts names this node: `host`, or `[host]:port` off port 22."""
        return host_name(self.host, self.port)

    def _identity(self) -> str | None:
        return str(Path(self.identity_file).expanduser()) if self.identity_file else None

    def options(self) -> list[str]:
        """The `-o` options of this target (no port, key or destination)."""
        return _options(
            identity=bool(self.identity_file),
            known_hosts=self.known_hosts,
            connect_timeout=self.connect_timeout,
        )

    def argv(self, *command: str, tty: bool = False) -> list[str]:
        """`ssh [-tt] -p PORT [-F cfg] [-i key] -o ... -- user@host [command...]`.

        `tty`: force a pty (-tt), so that stopping the local client hangs up the remote
        command instead of leaving it running.
        """
        argv = ["ssh", *(["-tt"] if tty else []), "-p", str(self.port)]
        if self.ssh_config:
            argv += ["-F", str(Path(self.ssh_config).expanduser())]
        identity = self._identity()
        if identity:
            argv += ["-i", identity]
        return [*argv, *self.options(), "--", self.destination, *command]

    def testinfra(self) -> tuple[str, dict[str, object]]:
        """(hostspec, keyword arguments) for `testinfra.get_host`.

        testinfra passes the user and port as `-o User=`/`-o Port=` and quotes every value;
        the options here go in `ssh_extra_args`. No ControlMaster (controlpersist 0): one
        connection per run of the probe script, nothing left behind.
        """
        kwargs: dict[str, object] = {
            "timeout": self.connect_timeout,
            "controlpersist": 0,
            "ssh_extra_args": shlex.join(self.options()),
        }
        identity = self._identity()
        if identity:
            kwargs["ssh_identity_file"] = identity
        if self.ssh_config:
            kwargs["ssh_config"] = str(Path(self.ssh_config).expanduser())
        return f"ssh://{self.user}@{self.host}:{self.port}", kwargs


def hop_options(node_known_hosts: str | None, connect_timeout: int = 15) -> list[str]:
    """`-o` options for a launcher's own hops between the nodes (mpirun's plm_rsh_args, the
    horovodrun ssh wrapper, validate's ssh.peers): the same strictness, against a
    known_hosts file ON the node (none: the node user's own known_hosts, strictly).

    No identity file: the nodes use the cluster key configure's ssh_trust role installed
    (its ~/.ssh/config names it for every peer).
    """
    return _options(identity=False, known_hosts=node_known_hosts, connect_timeout=connect_timeout)


def node_known_hosts(lines: list[str], tag: str = "ssh") -> tuple[str, str, str]:
    """Shell that puts the controller's enrolled keys on a node, for hops from that node.

    Returns (setup, path, cleanup): `setup` creates a new private directory (mkdir -m 700
    fails if the name exists, and the name is random, so nobody can plant it) holding
    `lines` as a known_hosts file at `path`; `cleanup` removes it. The keys travel with
    the command that needs them, so a hop trusts exactly what the controller enrolled or
    the spec pinned, whatever else the node's own ~/.ssh/known_hosts holds.
    """
    where = f"/tmp/rackcert-{tag}-{uuid.uuid4().hex[:16]}"
    body = "".join(f"{line}\n" for line in lines)
    setup = f"mkdir -m 700 {where} && printf %s {shlex.quote(body)} > {where}/known_hosts"
    return setup, f"{where}/known_hosts", f"rm -rf {where}"
