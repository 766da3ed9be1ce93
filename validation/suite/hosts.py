"""The suite started the testinfra way: a validate job from `--hosts` and `--rackcert-spec`.

    pytest --hosts=ssh://root@10.0.0.11,ssh://root@10.0.0.12 \\
        --rackcert-spec inventories/lab.yaml validation/suite

Each testinfra host URL (`ssh://user@address[:port]`, or `ssh://user@vm-name`) is
matched to a VM of the spec by address (and port when given) or by name; its
expectations come from the spec as they do for `rackcert validate`, so the same checks
judge the same facts. SSH is testinfra's: the user's own known_hosts, or
`--ssh-config` and `--ssh-identity-file` (default: the spec's guest.ssh.key_file).
A host the spec does not name is a usage error, one line.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from rackcert.core.runs import utc_now
from rackcert.core.ssh_target import SshTarget
from validation.checks import select
from validation.expect import NodeExpect, expectations
from validation.gather import Job, Target
from validation.peer_choice import choose


class HostsError(ValueError):
    """--hosts or --rackcert-spec cannot be turned into a job."""


def parse_hosts(text: str) -> list[tuple[str | None, str, int | None]]:
    """testinfra's --hosts: comma-separated ssh://user@host[:port] -> (user, host, port)."""
    out = []
    for item in (h.strip() for h in text.split(",")):
        if not item:
            continue
        url = urlsplit(item if "://" in item else f"ssh://{item}")
        if url.scheme not in ("ssh", "paramiko") or not url.hostname:
            raise HostsError(f"--hosts {item}: give ssh://user@address[:port]")
        out.append((url.username, url.hostname, url.port))
    if not out:
        raise HostsError("--hosts is empty: give ssh://user@address[:port],...")
    return out


def _match(expects: dict[str, NodeExpect], host: str, port: int | None) -> NodeExpect:
    for e in expects.values():
        if host in (e.address, e.node) and (port is None or port == e.ssh_port):
            return e
    known = ", ".join(f"{e.node} ({e.address}:{e.ssh_port})" for e in expects.values())
    raise HostsError(f"--hosts {host}{f':{port}' if port else ''}: not a VM of the spec ({known})")


def job_from_hosts(
    spec_path: str,
    hosts: str,
    *,
    checks: list[str] | None = None,
    identity_file: str | None = None,
    ssh_config: str | None = None,
    peers: int | str = 2,
    tool_path: str | None = None,
    events: str | None = None,
) -> Job:
    """The validate job for these testinfra hosts, judged against this spec."""
    from rackcert.core.errors import RackcertError
    from rackcert.core.spec_loader import load_spec

    try:
        spec = load_spec(Path(spec_path)).spec
        defs = select(checks or None)
    except RackcertError as exc:
        raise HostsError(str(exc)) from None
    expects = expectations(spec)
    key = identity_file or spec.guest.ssh.key_file
    targets: list[Target] = []
    for user, host, port in parse_hosts(hosts):
        e = _match(expects, host, port)
        ssh = SshTarget(
            host=host,
            user=user or e.user,
            port=port or e.ssh_port,
            identity_file=str(Path(key).expanduser()) if key else None,
            ssh_config=ssh_config,
        )
        targets.append(Target(expect=e.model_copy(update={"user": ssh.user}), ssh=ssh))
    chosen = [t.expect.node for t in targets]
    plan = choose(list(expects), f"pytest-{utc_now()}", k=peers, sources=chosen)
    for i, t in enumerate(targets):
        kept = [p for p in t.expect.peers if p.name in plan.chosen[t.expect.node]]
        targets[i] = t.model_copy(update={"expect": t.expect.model_copy(update={"peers": kept})})
    checks_ = [d.id for d in defs]
    return Job(
        targets=targets, checks=checks_, tool_path=tool_path, events=events or "", facts=None
    )
