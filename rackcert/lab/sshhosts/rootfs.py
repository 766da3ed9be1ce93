"""What a test host sees of the file system, set up inside its new namespaces before sshd runs.

Why: a host stands in for a VM, so what a playbook changes must be the host's alone:

- /etc, /usr, /var, /opt, /home, /srv and /mnt are overlays whose upper layer is a tmpfs
  private to the host (or its disk, a directory that outlives it), and /root is a fresh home
  (Debian's default dot files only), so `apt install`, `/root/.ssh`, `/etc/hosts`, mounts and
  dpkg's database are per host; the machine itself is never changed by a playbook, and its own
  dot files (pyenv shims...) do not leak in.
- The rackcert checkout and the controller's virtualenv are hidden (an empty tmpfs over each,
  `private`): a node runs rackcert's bench worker from its own environment, as on a real rack.
  Everything else (/tmp, /run, ...) is shared, read-write. `shared` paths stay shared even below
  an overlaid directory (the lab's NFS stand-in).
- the node image's DL framework: where the machine has the lab DL stack (LAB_DL_SITE, made by
  .ci/setup.d/45-lab-dl-stack.sh: torch, torchvision, Horovod), each host's system Python sees
  it through a .pth in its own /usr (as a DL image has its framework installed system-wide).
- name: `unshare --uts`, so `hostname` answers the host's own name; /etc/hosts lists every
  host of the set.

Example:
    script = setup_script("n1", runtime_dir, shared=[Path("/srv/nfs")], disk=None)
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from rackcert.lab import timesync
from rackcert.lab.sshhosts.sshd import SSHD

# Private mount point: each host mounts its own tmpfs here, visible only inside it.
PRIVATE_MNT = Path("/run/rackcert-sshhosts/private")
LAB_DL_SITE = Path(os.environ.get("RACKCERT_LAB_DL_SITE", "/opt/rackcert-lab/dl-site"))
DL_PTH = "/usr/lib/python3/dist-packages/rackcert-lab-dl.pth"
OVERLAID = ("etc", "usr", "var", "opt", "home", "srv", "mnt")


def setup_script(
    name: str,
    host_dir: Path,
    shared: Sequence[Path],
    private: Sequence[Path] = (),
    disk: Path | None = None,
) -> str:
    """Shell run inside the new namespaces, then replaced by sshd (same pid).

    `disk`: the host's files (overlay upper layers, /root) on that directory instead of a
    tmpfs, so a host started again over the same disk finds what it left there, as a VM
    powered on again finds its virtual disk as it was (packages, configuration)."""
    mnt = shlex.quote(str(PRIVATE_MNT))
    if disk is None:
        lines = ["set -e", f"mount -t tmpfs -o mode=0755 rackcert-host {mnt}"]
    else:
        lines = ["set -e", f"mount --bind {shlex.quote(str(disk))} {mnt}"]
    for i, path in enumerate(shared):
        stage = f"{mnt}/shared{i}"
        lines += [f"mkdir -p {stage}", f"mount --bind {shlex.quote(str(path))} {stage}"]
    # The machine's own fstab, read before /etc is overlaid: the boot below mounts only the
    # entries the guest added to its /etc/fstab.
    lines.append(f"cat /etc/fstab > {mnt}/machine-fstab 2>/dev/null || : > {mnt}/machine-fstab")
    for d in OVERLAID:
        up, wk = f"{mnt}/upper/{d}", f"{mnt}/work/{d}"
        lines += [
            f"mkdir -p {up} {wk}",
            f"mount -t overlay overlay -o lowerdir=/{d},upperdir={up},workdir={wk} /{d}",
        ]
    # A VM's image has no CUDA toolkit until the cuda role installs the spec's (only where a
    # GPU is): this machine's own toolkit under /usr/local must not stand in for it.
    lines += [
        'for d in /usr/local/cuda-*; do if [ -d "$d" ] && [ ! -L "$d" ]; then'
        ' mount -t tmpfs -o mode=0755,size=1m rackcert-private "$d"; fi; done',
        "rm -f /usr/local/cuda",
        "if grep -qs /usr/local/cuda- /usr/local/bin/nvcc; then rm -f /usr/local/bin/nvcc; fi",
    ]
    # The fresh home first, so shared paths below /root (a Python under ~/.pyenv) stay visible.
    lines += [
        f"mkdir -p {mnt}/root && mount --bind {mnt}/root /root && chmod 0700 /root",
        "cp /usr/share/base-files/dot.bashrc /root/.bashrc 2>/dev/null || true",
        "cp /usr/share/base-files/dot.profile /root/.profile 2>/dev/null || true",
    ]
    # Hidden before the shared paths move in, so a shared path below a private one stays.
    for path in private:
        p = shlex.quote(str(path))
        lines.append(
            f"if [ -d {p} ]; then mount -t tmpfs -o mode=0755,size=1m rackcert-private {p}; fi"
        )
    for i, path in enumerate(shared):
        p = shlex.quote(str(path))
        lines += [f"mkdir -p {p}", f"mount --move {mnt}/shared{i} {p}"]
    # `ip netns exec` remounted /sys for the netns, without the machine's cgroup mounts that
    # a booted VM has (slurmd dies without them): the same layout again, best effort.
    lines += [f"{{ {cmd}; }} 2>/dev/null || true" for cmd in cgroup_mount_commands()]
    site = shlex.quote(str(LAB_DL_SITE))
    lines.append(
        f"if [ -d {site} ] && [ -d {Path(DL_PTH).parent} ]; then echo {site} > {DL_PTH}; fi"
    )
    lines += [
        f"hostname {shlex.quote(name)}",
        f"echo {shlex.quote(name)} > /etc/hostname",
        f"cat {shlex.quote(str(host_dir / 'hosts'))} > /etc/hosts",
        # The machine's resolver is unreachable from the host's netns: fail fast, not in 20 s.
        "rm -f /etc/resolv.conf",
        "echo 'nameserver 127.0.0.1' > /etc/resolv.conf",
        timesync.host_start_command(host_dir / "chrony.conf"),
        # The guest's own fstab entries mounted at boot, as systemd-fstab-generator(8) mounts
        # /etc/fstab on a VM (the storage role's export, recorded there by the role).
        f"if [ -f {mnt}/upper/etc/fstab ]; then grep -vxF -f {mnt}/machine-fstab /etc/fstab"
        f" | grep -v '^[[:space:]]*#' > {mnt}/boot-fstab || true;"
        f" mount -a -T {mnt}/boot-fstab >{shlex.quote(str(host_dir / 'fstab.log'))} 2>&1"
        " || true; fi",
        # What the guest enabled at boot: its own /etc/rc.local (never the machine's), run
        # as systemd's rc-local.service runs it on a VM (systemd-rc-local-generator(8): an
        # executable /etc/rc.local is started at boot), so a daemon a role started there
        # without systemd (slurm_node's slurmd) is back after a power cycle.
        f"if [ -x {mnt}/upper/etc/rc.local ]; then"
        " PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        f" timeout 60 /etc/rc.local </dev/null >{shlex.quote(str(host_dir / 'rc.local.log'))}"
        " 2>&1 || true; fi",
        "mkdir -p /run/sshd",
        f"exec {SSHD} -D -f {shlex.quote(str(host_dir / 'sshd_config'))}"
        f" -E {shlex.quote(str(host_dir / 'sshd.log'))}",
    ]
    return "\n".join(lines)


def cgroup_mount_commands() -> list[str]:
    """Mount commands that repeat this machine's mounts at and below /sys/fs/cgroup."""
    out: list[str] = []
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return out
    for line in mounts:
        dev, where, fstype, opts = line.split()[:4]
        if where == "/sys/fs/cgroup":
            option = " -o mode=755" if fstype == "tmpfs" else ""
            out.append(f"mount -t {fstype}{option} {shlex.quote(dev)} /sys/fs/cgroup")
        elif where.startswith("/sys/fs/cgroup/"):
            keep = ",".join(o for o in opts.split(",") if o not in ("rw", "relatime"))
            option = f" -o {shlex.quote(keep)}" if keep else ""
            out.append(
                f"mkdir -p {shlex.quote(where)} && mount -t {fstype}{option}"
                f" {shlex.quote(dev)} {shlex.quote(where)}"
            )
    return out
