"""The node's system: name, kernel, OS, modules, mounts, sysctl, packages, kernel log, clock.

pyinfra's own classes are used where they fit (wrapped only to give them a `key`);
`LoadedModules` and `Mounts` are rackcert's because the node checks need what pyinfra's
drop (a '-' use count, the super-block options of a mount).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import Any

from pyinfra.facts import deb, rpm, server

from validation import parsers
from validation.facts.base import Fact


class Hostname(server.Hostname, Fact):
    """`uname -n`: the node's own name (also what tells the node answered at all)."""

    key = "hostname"
    stderr = False
    quick = True


class KernelVersion(server.KernelVersion, Fact):
    """`uname -r`: the running kernel."""

    key = "kernel"
    stderr = False
    quick = True


class Arch(server.Arch, Fact):
    """`uname -m`."""

    key = "arch"
    stderr = False
    quick = True


class LinuxDistribution(server.LinuxDistribution, Fact):
    """/etc/*-release: {name, major, minor, release_meta: os-release's keys}."""

    key = "os"
    stderr = False
    quick = True


# What pyinfra's Sysctl turns into a list of words (ints where they parse): the whole value.
_SYSCTL_WORDS = re.compile(r"[a-zA-Z0-9_\-\.\s]+").fullmatch


def _int_or_word(word: str) -> int | str:
    try:
        return int(word)
    except ValueError:
        return word


class Sysctl(server.Sysctl, Fact):
    """`sysctl -a`: every kernel parameter, as pyinfra's Sysctl gives it.

    Its `process` is pyinfra's, line for line, without the per-line look-up of an
    uncompiled pattern and the helper calls: `sysctl -a` has 1,000-3,500 lines a node and
    was the biggest parse of a validate run (6 ms a node here; now 2.5 ms). The values
    are the same (tests/integration/test_validate_facts.py compares the two).
    """

    key = "sysctl"
    stderr = False

    def process(self, output: Iterable[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for line in output:
            key, sep, values = line.partition("=")
            if not sep:
                key, sep, values = line.partition(":")
                if not sep:
                    continue
            if not key or not values:
                continue
            value: Any = values.strip()
            if _SYSCTL_WORDS(value):
                words = value.split()
                value = (
                    _int_or_word(words[0]) if len(words) == 1 else [_int_or_word(w) for w in words]
                )
            found[key.strip()] = value
        return found


class DebPackages(deb.DebPackages, Fact):
    """`dpkg -l`: installed packages and versions (Debian, Ubuntu)."""

    key = "deb_packages"
    stderr = False


class RpmPackages(rpm.RpmPackages, Fact):
    """`rpm -qa`: installed packages and versions (RHEL and its kin)."""

    key = "rpm_packages"
    stderr = False


class LoadedModules(Fact):
    """/proc/modules: name -> size, use count, state.

    pyinfra's own server.KernelModules parses the use count as an int and fails on the
    H200 machine's kernel, which prints '-' there (module unloading not built in).
    """

    key = "kernel_modules"
    quick = True

    def command(self) -> str:
        return "cat /proc/modules"

    @staticmethod
    def default() -> dict[str, dict[str, str]]:
        return {}

    def process(self, output: list[str]) -> dict[str, dict[str, str]]:
        return parsers.proc_modules(output)


class Mounts(Fact):
    """/proc/self/mountinfo: every mount with its source, type and options (per-mount and
    super-block together, as the storage check compares them)."""

    key = "mounts"
    quick = True

    def command(self) -> str:
        return "cat /proc/self/mountinfo"

    @staticmethod
    def default() -> list[Any]:
        return []

    def process(self, output: list[str]) -> list[parsers.Mount]:
        return parsers.mountinfo("\n".join(output))


class KernelLog(Fact):
    """NVIDIA XID lines of the kernel log since boot (dmesg, else journalctl -k):
    [(pci, xid, rest)]. Exit 1 when neither can be read: the check says so."""

    key = "xid_events"

    def command(self) -> str:
        return (
            "out=$(dmesg 2>&1) || out=$(journalctl -k -b --no-pager 2>&1) ||"
            ' { printf "%s\\n" "$out"; exit 1; };'
            ' printf "%s\\n" "$out" | grep -E "Xid" | tail -n 200;'
            " true"
        )

    @staticmethod
    def default() -> list[Any]:
        return []

    def process(self, output: list[str]) -> list[tuple[str, int, str]]:
        return parsers.xid_events("\n".join(output))


class Clock(Fact):
    """Clock synchronisation: timedatectl's NTPSynchronized, else chrony's leap status:
    (synchronised?, what it said)."""

    key = "clock"

    def command(self) -> str:
        return (
            "if command -v timedatectl >/dev/null 2>&1 &&"
            " v=$(timedatectl show -p NTPSynchronized --value 2>/dev/null); then"
            ' echo "timedatectl NTPSynchronized=$v";'
            " elif command -v chronyc >/dev/null 2>&1; then chronyc -n tracking;"
            ' else echo "neither timedatectl nor chronyc answered"; exit 127; fi'
        )

    def process(self, output: list[str]) -> tuple[bool, str]:
        return parsers.clock_synced("\n".join(output))


class RunningVersions(Fact):
    """The NVIDIA driver and OFED as the kernel runs them and as they are installed on disk,
    and the reboots a rackcert role left pending (/var/lib/rackcert/reboot-required).

    Loaded: /proc/driver/nvidia/version (NVIDIA Driver Installation Guide) and the loaded
    mlx5_core's /sys/module/mlx5_core/version; installed: `modinfo -F version` of the module
    the next boot loads. A driver or OFED upgrade without its reboot shows as two versions.
    """

    key = "running_versions"

    def command(self) -> str:
        return (
            "echo '## nvidia_loaded'; head -1 /proc/driver/nvidia/version 2>/dev/null;"
            " echo '## nvidia_installed'; modinfo -F version nvidia 2>/dev/null;"
            " echo '## mlx5_loaded'; cat /sys/module/mlx5_core/version 2>/dev/null;"
            " echo '## mlx5_installed'; modinfo -F version mlx5_core 2>/dev/null;"
            " echo '## reboot'; cat /var/lib/rackcert/reboot-required 2>/dev/null; true"
        )

    @staticmethod
    def default() -> dict[str, list[str]]:
        return {}

    def process(self, output: list[str]) -> dict[str, list[str]]:
        return parsers.running_versions(output)


AUDIT_LOG = "/var/log/audit/audit.log"


class SelinuxDenials(Fact):
    """SELinux's mode (/sys/fs/selinux/enforce; no selinuxfs: disabled), the boot time
    (/proc/stat btime) and the audit log's AVC records: {mode, denials since boot}.

    auditd writes each denial as `type=AVC msg=audit(EPOCH.MS:SERIAL): avc:  denied ...`
    (RHEL 9 "Using SELinux", troubleshooting); older records than the boot are not this
    boot's. Only the last 200 AVC lines are read, so a noisy node costs one small answer.
    """

    key = "selinux_denials"
    stderr = False

    def command(self, log: str = AUDIT_LOG) -> str:
        q = shlex.quote(log)
        return (
            "if [ -r /sys/fs/selinux/enforce ]; then read -r m </sys/fs/selinux/enforce;"
            ' echo "mode $m"; else echo "mode disabled"; fi;'
            " awk '/^btime /{print \"btime \" $2}' /proc/stat;"
            f" if [ -r {q} ]; then grep -h '^type=AVC ' {q} | tail -n 200;"
            " else echo 'no audit log'; fi"
        )

    @staticmethod
    def default() -> parsers.AvcReport:
        return parsers.AvcReport()

    def process(self, output: list[str]) -> parsers.AvcReport:
        return parsers.selinux_denials("\n".join(output))


FACTS = (
    SelinuxDenials,
    Hostname,
    KernelVersion,
    Arch,
    LinuxDistribution,
    Sysctl,
    DebPackages,
    RpmPackages,
    LoadedModules,
    Mounts,
    KernelLog,
    Clock,
    RunningVersions,
)
