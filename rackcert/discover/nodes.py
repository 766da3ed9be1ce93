"""`--nodes`: ask each running VM, over SSH, what `nvidia-smi topo -m` shows.

Why OpenSSH: the guest layer reaches VMs with the same client (Ansible, torchrun), so
a VM that discover can reach is one the later stages can reach too, and host keys are
checked the same way (rackcert.core.ssh_target: BatchMode, StrictHostKeyChecking=yes against
--known-hosts or the user's known_hosts). The ssh client gets a short named environment
(rackcert.core.childenv), never this process's whole one: a vCenter password variable would
otherwise reach a ProxyCommand, a LocalCommand or anything ~/.ssh/config starts.

One SSH round trip per VM runs both commands; VMs are asked in parallel. Any VM that
cannot be reached or has no nvidia-smi is an error naming the VM: a draft is not
written from half the evidence.

Example:
    node1 = SshTarget(host="10.77.0.11", identity_file=key, known_hosts=kh)
    texts = probe([Target("node1", node1)], withheld=["RACKCERT_VCENTER_PASSWORD"])
    texts["node1"].topo          # the `nvidia-smi topo -m` text
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rackcert.core.childenv import child_env
from rackcert.core.errors import InputError
from rackcert.core.ssh_target import SshTarget

MARK = "@@rackcert-topo@@"
REMOTE = (
    "nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader || true;"
    f" echo {MARK}; nvidia-smi topo -m"
)


@dataclass(frozen=True)
class Target:
    vm: str
    ssh: SshTarget


@dataclass(frozen=True)
class GuestTopo:
    vm: str
    bus_ids: str
    topo: str


def _one(target: Target, env: dict[str, str]) -> GuestTopo | str:
    ssh = target.ssh
    where = f"VM {target.vm} ({ssh.destination}:{ssh.port})"
    timeout = ssh.connect_timeout
    try:
        proc = subprocess.run(
            ssh.argv(REMOTE),
            capture_output=True,
            text=True,
            timeout=timeout * 6,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return f"{where}: no answer within {timeout * 6} s"
    except FileNotFoundError:
        return "ssh (OpenSSH client) not found: install openssh-client"
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    if proc.returncode == 255:
        return f"{where}: SSH failed: {last or 'connection error'}"
    if MARK not in proc.stdout:
        return f"{where}: unexpected answer (rc {proc.returncode}): {last}"
    bus_ids, topo = proc.stdout.split(MARK, 1)
    if proc.returncode != 0:
        hint = "nvidia-smi not found" if proc.returncode == 127 else last or "failed"
        return f"{where}: nvidia-smi topo -m: {hint} (rc {proc.returncode})"
    return GuestTopo(target.vm, bus_ids, topo)


def probe(targets: list[Target], *, withheld: list[str] | None = None) -> dict[str, GuestTopo]:
    """Run the topology commands on every target; raise InputError naming the first failure.

    `withheld`: variable names that must not reach the ssh client even if the named list
    (rackcert.core.childenv.PASSED) had them (the spec's password_env).
    """
    env = child_env(withheld=withheld or ())
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(targets)))) as pool:
        answers = list(pool.map(lambda t: _one(t, env), targets))
    failures = [a for a in answers if isinstance(a, str)]
    if failures:
        more = f" (and {len(failures) - 1} more VM(s))" if len(failures) > 1 else ""
        raise InputError(f"--nodes: {failures[0]}{more}")
    return {a.vm: a for a in answers if isinstance(a, GuestTopo)}
