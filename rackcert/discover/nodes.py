"""`--nodes`: ask each running VM, over SSH, what `nvidia-smi topo -m` shows.

Why OpenSSH: the guest layer reaches VMs with the same client (Ansible, torchrun), so
a VM that discover can reach is one the later stages can reach too, and host keys are
checked the same way (BatchMode, the user's known_hosts or --known-hosts).

One SSH round trip per VM runs both commands; VMs are asked in parallel. Any VM that
cannot be reached or has no nvidia-smi is an error naming the VM: a draft is not
written from half the evidence.

Example:
    texts = probe([Target("node1", "10.77.0.11", 22, "root", key)], known_hosts=None)
    texts["node1"].topo          # the `nvidia-smi topo -m` text
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rackcert.errors import InputError

MARK = "@@rackcert-topo@@"
REMOTE = (
    "nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader || true;"
    f" echo {MARK}; nvidia-smi topo -m"
)


@dataclass(frozen=True)
class Target:
    vm: str
    address: str
    port: int
    user: str
    key_file: Path | None = None


@dataclass(frozen=True)
class GuestTopo:
    vm: str
    bus_ids: str
    topo: str


def ssh_argv(target: Target, known_hosts: Path | None, timeout: int) -> list[str]:
    argv = ["ssh", "-p", str(target.port), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}"]
    if target.key_file:
        argv += ["-i", str(Path(target.key_file).expanduser()), "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    # "--" ends ssh's options: a user or address that starts with "-" is then a destination,
    # never an option such as -oProxyCommand (which would run a command here).
    return [*argv, "--", f"{target.user}@{target.address}", REMOTE]


def _one(target: Target, known_hosts: Path | None, timeout: int) -> GuestTopo | str:
    where = f"VM {target.vm} ({target.user}@{target.address}:{target.port})"
    try:
        proc = subprocess.run(
            ssh_argv(target, known_hosts, timeout),
            capture_output=True,
            text=True,
            timeout=timeout * 6,
            check=False,
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


def probe(
    targets: list[Target], *, known_hosts: Path | None = None, timeout: int = 5
) -> dict[str, GuestTopo]:
    """Run the topology commands on every target; raise InputError naming the first failure."""
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(targets)))) as pool:
        answers = list(pool.map(lambda t: _one(t, known_hosts, timeout), targets))
    failures = [a for a in answers if isinstance(a, str)]
    if failures:
        more = f" (and {len(failures) - 1} more VM(s))" if len(failures) > 1 else ""
        raise InputError(f"--nodes: {failures[0]}{more}")
    return {a.vm: a for a in answers if isinstance(a, GuestTopo)}
