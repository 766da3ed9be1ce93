"""A lab's lifetime: whoever starts lab hosts stops them, on a signal too; a lab whose
owner died is cleared by the next run, which says so in one line.

Why: Python's default answer to SIGTERM and SIGHUP is to die at once, without running a
single `finally`; a benchmark stopped by `timeout`, a closed terminal or a CI job's cancel
left its network namespaces, sshd, chronyd, iperf3 daemons, slurmd and the twin running,
and the next lab of the same size had to find them. Here:

- `owned(what)` wraps a run that starts lab parts (a benchmark, `rackcert demo`, `lab up
  --foreground`, a test session). SIGTERM, SIGINT and SIGHUP raise `Terminated` (a
  KeyboardInterrupt, so `except Exception` never swallows it) in the main thread, and the
  run's own `finally` blocks stop what they started; a second signal while they do is
  noted, not obeyed, so the clean-up is not cut short. On the way out, whatever is still
  there of this owner is stopped as well (`release`): its namespaces and bridges, and
  every process that carries its tag.
- The tag: `owned` sets RACKCERT_LAB_OWNER=<pid> in the environment, so everything the run
  starts (the twin, munged, slurmctld, sshd and chronyd in the namespaces, ansible's SSH
  masters) carries it in /proc/<pid>/environ, whichever code started it. Namespaces and
  bridges are named after the same pid (rackcert.lab.sshhosts).
- `clear_stale()`: the labs of owners whose pid is no longer running (a SIGKILL, a crash,
  a machine that lost power in the middle of a run) are stopped at the start of the next
  owned run, which prints one line naming the pid and what was cleared. A pid that is
  running is never touched, so runs side by side (xdist workers, other sessions) and the
  persistent lab of `rackcert lab up` (owner "lab", no pid) are left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rackcert.lab.pids import owner_dead, pid_alive
from rackcert.lab.slurm import RUN_ROOT, SlurmLab
from rackcert.lab.sshhosts import network as hostnet

OWNER_ENV = "RACKCERT_LAB_OWNER"
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# A daemon asked to stop (SIGTERM) gets this long before it is killed: sshd, chronyd, the
# twin and slurmctld exit in well under a second here.
GRACE_S = 3.0


class Terminated(KeyboardInterrupt):
    """A run was asked to stop by a signal; its `finally` blocks stop what it started."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process ended by it."""
        return 128 + self.signum


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


# -- the owner tag ------------------------------------------------------------------------------
def tagged_processes() -> dict[int, str]:
    """Every process that carries an owner tag in its environment: pid -> tag.

    /proc/<pid>/environ is the environment a process started with, which it inherited from
    whoever started it: what an owned run started carries the run's pid there for good.
    """
    out: dict[int, str] = {}
    prefix = OWNER_ENV.encode() + b"="
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(prefix):
                out[int(proc.name)] = item[len(prefix) :].decode(errors="replace")
                break
    return out


def _ancestors() -> set[int]:
    """This process and the ones above it: never stopped by a clear, whatever their tag."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[-1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _program(pid: int) -> str:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return "?"
    name = Path(argv0.split()[0]).name if argv0.split() else "?"
    return name.rstrip(":")  # sshd titles itself "sshd: /usr/sbin/sshd -D ..."


def stop_processes(pids: Sequence[int], grace_s: float = GRACE_S) -> list[str]:
    """SIGTERM every pid at once, then SIGKILL what is left after `grace_s`; the programs.

    All at once, because a lab's daemons stop in parallel (Slurm's own advice for its
    daemons, NOTES: "SIGTERM all daemons at once, then kill what is left").
    """
    names = [_program(pid) for pid in pids]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return names


# -- clearing -----------------------------------------------------------------------------------
@dataclass
class Cleared:
    """What was stopped of one or more owners' labs."""

    owners: list[str] = field(default_factory=list)
    namespaces: int = 0
    bridges: int = 0
    programs: list[str] = field(default_factory=list)
    slurm: int = 0

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.bridges or self.programs or self.slurm)

    def what(self) -> str:
        counts: dict[str, int] = {}
        for name in self.programs:
            counts[name] = counts.get(name, 0) + 1
        parts = []
        if self.namespaces:
            parts.append(f"{self.namespaces} network namespace{'s' * (self.namespaces != 1)}")
        if self.bridges:
            parts.append(f"{self.bridges} bridge{'s' * (self.bridges != 1)}")
        if self.programs:
            names = ", ".join(f"{n} {p}" for p, n in sorted(counts.items()))
            parts.append(f"{len(self.programs)} processes ({names})")
        if self.slurm:
            parts.append(f"{self.slurm} Slurm controller{'s' * (self.slurm != 1)}")
        return ", ".join(parts)

    def line(self) -> str:
        pids = sorted({o.split("x", 1)[0] for o in self.owners}, key=int)
        whose = f"pid{'s' * (len(pids) != 1)} {', '.join(pids)}"
        return f"cleared a stale lab left by {whose} (no longer running): {self.what()}"


def _clear(owners: Callable[[str], bool], *, keep: set[int]) -> Cleared:
    """Stop the labs of every owner for which `owners(tag)` is true (never `keep`'s pids)."""
    cleared = Cleared()
    found: set[str] = set()
    # Processes first (the twin, munged, slurmctld, ansible's SSH masters...), so nothing
    # of the lab starts anything new while its namespaces go.
    tags = {p: tag for p, tag in tagged_processes().items() if owners(tag) and p not in keep}
    found |= set(tags.values())
    owned_ns: list[str] = []
    netns_pids: set[int] = set()
    if os.geteuid() == 0:
        for netns in hostnet.netns_list():
            owner = hostnet.netns_owner(netns)
            if owner and owners(owner):
                owned_ns.append(owner)
                netns_pids |= set(hostnet.netns_pids(netns))
    cleared.programs = stop_processes(list(tags)) if tags else []
    # What ran in the namespaces untagged (started before tags existed): counted, and
    # stopped with its namespace below.
    cleared.programs += [_program(p) for p in sorted(netns_pids - set(tags)) if pid_alive(p)]
    if os.geteuid() == 0:
        bridge_owners = {}
        for link in hostnet.bridge_names():
            owner = hostnet.bridge_owner(link)
            if owner and owners(owner):
                bridge_owners[link] = owner
        for owner in sorted(set(owned_ns) | set(bridge_owners.values())):
            found.add(owner)
            cleared.namespaces += hostnet.stop_owner(owner)
        cleared.bridges = sum(1 for link in bridge_owners if not hostnet.link_exists(link))
    for directory in sorted(RUN_ROOT.glob("*")) if RUN_ROOT.is_dir() else []:
        if directory.is_dir() and owners(directory.name):
            lab = SlurmLab.load(directory.name)
            if lab is not None:
                lab.remove()
                cleared.slurm += 1
                found.add(directory.name)
    cleared.owners = sorted(found)
    return cleared


def clear_stale() -> Cleared:
    """Stop what owners that are no longer running left: namespaces, bridges, tagged
    processes, Slurm controllers. Never an owner whose pid runs, never the lab ("lab").

    The one clearer of dead owners' labs: set-up (30-guest.sh), every owned run and the
    test session's fixtures call this, so a crashed run's SSH hosts and its daemons go
    together (the SSH hosts' own namespace-only clearer is gone)."""
    return _clear(owner_dead, keep=_ancestors())


def release(pid: int | None = None) -> Cleared:
    """Stop whatever is still there of this process's lab (or `pid`'s): its namespaces and
    bridges (`<pid>` and `<pid>x<set>`), every process with its tag, its Slurm controllers."""
    mine = str(pid or os.getpid())
    return _clear(lambda tag: tag == mine or tag.startswith(mine + "x"), keep=_ancestors())


# -- the signals --------------------------------------------------------------------------------
class _Stopper:
    """The signal handler: the first signal raises Terminated, the ones after it are noted."""

    def __init__(self, what: str, say: Callable[[str], None]) -> None:
        self.what = what
        self.say = say
        self.signum: int | None = None

    def __call__(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            self.say(f"{self.what}: {signal_name(signum)} again; still stopping the lab")
            return
        self.signum = signum
        raise Terminated(signum)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


_ACTIVE: list[str] = []


@contextlib.contextmanager
def owned(what: str, *, say: Callable[[str], None] = _stderr) -> Iterator[None]:
    """Run a lab starter: stale labs cleared first (one line each time), this run's children
    tagged, SIGTERM/SIGINT/SIGHUP turned into Terminated, and what is left of this run's lab
    stopped on the way out. Nested use (the demo calls `lab up`) is the outer run's."""
    if _ACTIVE:
        yield
        return
    _ACTIVE.append(what)
    stale = clear_stale()
    if stale:
        say(f"{what}: {stale.line()}")
    previous_env = os.environ.get(OWNER_ENV)
    os.environ[OWNER_ENV] = str(os.getpid())
    stopper = _Stopper(what, say)
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            previous[signum] = signal.signal(signum, stopper)
    try:
        yield
    finally:
        try:
            if stopper.signum is None:  # from here on a signal is noted, not obeyed
                stopper.signum = 0
            left = release()
            if left:
                say(f"{what}: stopped what was left of its lab: {left.what()}")
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)  # type: ignore[arg-type]
            if previous_env is None:
                os.environ.pop(OWNER_ENV, None)
            else:
                os.environ[OWNER_ENV] = previous_env
            _ACTIVE.clear()


def run_main(what: str, main: Callable[[], int | None]) -> int:
    """A benchmark's main inside `owned`: a signal ends it with one line and 128 + its number."""
    try:
        with owned(what):
            return int(main() or 0)
    except Terminated as stop:
        _stderr(f"{what}: stopped by {signal_name(stop.signum)}; its lab is stopped")
        return stop.exit_code


def stop_child(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Ask a child run to stop with SIGTERM (its own `owned` stops its lab), SIGKILL it after
    `grace_s`. Why not subprocess.run's own answer to an interrupt: that is SIGKILL, which
    leaves the child's lab for the next run to clear."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
