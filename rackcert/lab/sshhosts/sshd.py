"""Keys and sshd: the client key pair, each host's own host key, its sshd, and known_hosts.

Why: a test host is reached as a VM is, over real SSH with strict host key checking. Its host
key is kept in its state directory, so a host started again (a VM powered on again) answers
with the same key and the known_hosts written at its first start still holds. sshd's own files
(config, key copy, pid, log) live in the runtime directory, outside every overlay and /root.

Example:
    key = ensure_keypair(Path("~/.cache/rackcert/lab/id_ed25519"))
    prepare_host_dir(state / "n1", runtime_dir("lab", "n1"), key, ["10.77.0.11"], ["n1"], 22)
    write_known_hosts(state / "known_hosts", state, ["n1"], ["10.77.0.11"], 22)
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
from collections.abc import Sequence
from pathlib import Path

from rackcert.lab import timesync
from rackcert.lab.sshhosts.common import RUNTIME_ROOT, run_cmd
from rackcert.lab.sshhosts.network import NETNS_PREFIX

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"


def ensure_keypair(key_file: Path) -> Path:
    """An ed25519 key pair at key_file (and key_file.pub); generated once, then reused."""
    key_file = Path(key_file).expanduser()
    if not key_file.is_file() or not key_file.with_suffix(key_file.suffix + ".pub").is_file():
        key_file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            key_file.unlink()
        run_cmd(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rackcert", "-f", str(key_file)]
        )
    key_file.chmod(0o600)
    return key_file


def client_pub(key_file: Path) -> str:
    """The client public key (key_file.pub), to authorize on every host."""
    return Path(str(key_file) + ".pub").read_text().strip()


def sshd_config(host_dir: Path, address: str, port: int) -> str:
    """sshd_config of one host: its address only, keys only, files in its runtime dir."""
    return "\n".join(
        [
            f"ListenAddress {address}:{port}",
            f"HostKey {host_dir / 'ssh_host_ed25519_key'}",
            f"PidFile {host_dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {host_dir / 'authorized_keys'} .ssh/authorized_keys",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "UseDNS no",
            "MaxStartups 64:30:128",
            "MaxSessions 64",
            "AcceptEnv LANG LC_*",
            f"Subsystem sftp {SFTP_SERVER}",
            "",
        ]
    )


def hosts_file(pairs: Sequence[tuple[str, str]]) -> str:
    """/etc/hosts of a host: localhost, then every host of the set by name."""
    base = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    return base + "".join(f"{addr}\t{name}\n" for name, addr in pairs)


def known_host_name(name: str, port: int) -> str:
    """How known_hosts names a host (`[name]:port` off port 22)."""
    return name if port == 22 else f"[{name}]:{port}"


def host_pub(host_dir: Path) -> str:
    """A host's public host key, `type base64` (as known_hosts lists it)."""
    return " ".join((host_dir / "ssh_host_ed25519_key.pub").read_text().split()[:2])


def runtime_dir(owner: str, name: str) -> Path:
    """Where sshd of `owner`'s host `name` keeps its files (named as its netns)."""
    return RUNTIME_ROOT / f"{NETNS_PREFIX}{owner}-{name}"


def prepare_host_dir(
    host_dir: Path,
    rt: Path,
    key_file: Path,
    addrs: list[str],
    names: Sequence[str],
    port: int,
) -> None:
    """Host key kept in host_dir (stable across restarts); sshd's files written to rt."""
    host_dir.mkdir(parents=True, exist_ok=True)
    hk = host_dir / "ssh_host_ed25519_key"
    if not hk.is_file():
        run_cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host_dir.name, "-f", str(hk)])
    shutil.rmtree(rt, ignore_errors=True)
    rt.mkdir(parents=True, mode=0o700)
    shutil.copy2(hk, rt / hk.name)
    (rt / hk.name).chmod(0o600)
    (rt / "authorized_keys").write_text(client_pub(key_file) + "\n")
    (rt / "hosts").write_text(hosts_file(list(zip(names, addrs, strict=True))))
    idx = list(names).index(host_dir.name)
    (rt / "sshd_config").write_text(sshd_config(rt, addrs[idx], port))
    subnet = str(ipaddress.IPv4Network(f"{addrs[idx]}/24", strict=False))
    (rt / "chrony.conf").write_text(timesync.client_config(subnet, rt / "chronyd.pid"))


def write_known_hosts(
    path: Path, state_dir: Path, names: Sequence[str], addrs: Sequence[str], port: int
) -> None:
    """known_hosts for the set: every host's key under its address and its name."""
    path.write_text(
        "".join(
            f"{known_host_name(a, port)} {host_pub(state_dir / n)}\n"
            + f"{known_host_name(n, port)} {host_pub(state_dir / n)}\n"
            for n, a in zip(names, addrs, strict=True)
        )
    )
