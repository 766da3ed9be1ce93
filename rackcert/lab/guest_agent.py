"""The lab's guest agent: SSH test hosts born from the twin's powered-on VMs.

A real VM answers SSH because it booted: cloud-init read its identity from
guestinfo (hostname, static address, authorized key) and sshd started. The
lab has no hypervisor, so this agent plays the guests. It watches the twin
through the real vSphere API, a PropertyCollector filter over every VM
(`name`, `runtime.powerState`, `config.extraConfig`, `config.template`) and
`WaitForUpdatesEx`, and:

- when a VM powers on, it reads the VM's guestinfo at that moment (as cloud-init
  does at boot) and decodes it the way cloud-init's VMware datasource does
  (`provision.guestinfo.read_identity`), then starts an SSH test host
  (`rackcert.lab.sshhosts.start.start_hosts`) with that hostname and address, whose
  authorized keys are exactly the user-data's; at a VM's first boot that host becomes the
  spec's guest.os where the lab stands in for it (an Ubuntu 22.04/24.04 or RHEL 9 stand-in,
  Debian 12 underneath: rackcert.lab.guestfamily), and stays it across power cycles, as a
  VM's OS is its disk's; debian-12 and families without a stand-in boot plain Debian 12;
- once that host's SSH answers, the guest's VMware Tools report it to the twin, as
  vmtoolsd reports guest information to the VMX: "tools.set.version", then
  "SetGuestInfo" with the hostname and the address the guest itself has on eth0,
  over the twin's Tools channel (POST /guestrpc/<BIOS UUID>, loopback only;
  twin/tools.go). Only then does vCenter show guest.ipAddress and
  toolsRunningStatus guestToolsRunning; the twin resets both at power-off;
- when a VM powers off or is destroyed, its host goes down;
- every running guest's /etc/hosts lists all running guests: the lab's stand-in
  for the site's DNS (a real rack resolves its nodes' names through the DNS of
  network.management), which torch.distributed's rendezvous and SSH trust need.

A VM without readable cloud-init metadata, a template, or a VM that never
powered on has no host, and its Tools never report. `hang` names VMs whose guest
never finishes booting (fault injection for tests: powered on, no SSH, no Tools);
`fail_starts` makes a VM's host fail to start a number of times: the agent tries again at
its next quiet poll, as a powered-on VM boots in the end.
Hosts are namespaces of the `owner` ("lab" for the lab; tests use their pid), so
`rackcert lab down` (sshhosts.lab.stop_spec_hosts) removes them too.

Example:
    agent = GuestAgent(spec)                # spec: the lab spec, pointing at the twin
    thread = agent.start_thread()           # or agent.run() in its own process
    ...
    agent.stop()                            # stops watching and takes its hosts down
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.guestwatch import cancel_waits
from provision.vmwatch import VmWatch, vm_config
from rackcert.lab import guestfamily, linkshape
from rackcert.lab.sshhosts.common import SshHostError
from rackcert.lab.sshhosts.host import TestHost
from rackcert.lab.sshhosts.lab import lab_state_dir
from rackcert.lab.sshhosts.network import LAB_OWNER
from rackcert.lab.sshhosts.start import start_hosts, stop_hosts

log = logging.getLogger("rackcert.lab.guest_agent")
WATCHED = ["name", "runtime.powerState", "config.extraConfig", "config.template", "config.uuid"]
TOOLS_VERSION = "12352"  # open-vm-tools 12.3.5's version number, as vmtoolsd announces it
REPORT_FOR_S = 60.0  # how long the lab's Tools keep reporting a guest that answers late
# How long a guest's sshd may take to come up. A VM's boot takes a minute or more; the lab's
# 15 s default for test hosts was short on a loaded 2-core machine, and the guest never came.
BOOT_FOR_S = 60.0
INFO_DNS_NAME, INFO_IPADDRESS = 1, 2  # open-vm-tools GuestInfoType


@dataclass
class Guest:
    """One running guest: the VM it stands for and the SSH host it is."""

    vm: str
    identity: dict[str, Any]
    host: TestHost


@dataclass
class GuestAgent:
    """Watch the twin's VMs; keep one SSH test host per powered-on VM with cloud-init data."""

    spec: Any
    owner: str = LAB_OWNER
    state_dir: Path | None = None
    shared: list[str] = field(default_factory=list)
    wait_s: int = 1
    guests: dict[str, Guest] = field(default_factory=dict)
    events: list[tuple[str, str]] = field(default_factory=list)  # (vm, "up" | "down" | why)
    hang: set[str] = field(default_factory=set)  # VMs whose guest never boots (fault injection)
    # VM -> how many of its host starts fail (fault injection: a lab host that did not come up)
    fail_starts: dict[str, int] = field(default_factory=dict)
    # Each guest's files on a disk of its own under state_dir (<vm>/disk) that outlives a
    # power-off, as a VM's virtual disk does: what configure installed is there at the next
    # power-on, beside the host key its first boot made (a running process, such as slurmd,
    # is gone: the boot's /etc/rc.local starts what the guest enabled). The VM's files go
    # with the VM when it is destroyed (Destroy_Task deletes them, vSphere API reference,
    # ManagedEntity.Destroy_Task), so a new clone of that name boots as a new machine.
    # False: a tmpfs per boot (a guest that keeps nothing).
    disks: bool = True
    _hung: set[str] = field(default_factory=set)  # hung VMs left without a host, for now
    _failed: set[str] = field(default_factory=set)  # VMs whose host did not start: tried again
    _destroyed: set[str] = field(default_factory=set)  # VMs gone since the last reconcile
    _stop: threading.Event = field(default_factory=threading.Event)
    _vms: dict[str, dict[str, Any]] = field(default_factory=dict)  # moid -> watched props
    _pc: Any = None  # the watch's own PropertyCollector, while it waits (stop() cancels it)
    # The spec's guest.os where the lab stands in for it (rackcert.lab.guestfamily), else
    # debian-12: what a VM's blank disk becomes at its first boot.
    image: str = guestfamily.DEBIAN

    def __post_init__(self) -> None:
        base = lab_state_dir(self.spec)
        self.state_dir = Path(self.state_dir or base / f"guests-{self.owner}")
        fam, line = guestfamily.lab_family(self.spec.guest.os)
        self.image = fam.id if fam is not None else guestfamily.DEBIAN
        if line:
            log.info("guest agent: %s", line)
        nfs = self.spec.storage.nfs
        if not self.shared and nfs is not None and nfs.fstype == "none":
            self.shared = [nfs.export]

    # -- the watch ----------------------------------------------------------------------------
    def run(self) -> None:
        """Watch until stop(); reconnect when the twin goes away (the guests keep running)."""
        from provision.session import connect

        while not self._stop.is_set():
            try:
                with connect(self.spec, timeout=10) as si:
                    self._watch(si)
            except Exception as exc:  # noqa: BLE001 - a lost vCenter: retry, never crash
                if self._stop.is_set():
                    break
                log.warning("guest agent: %s; reconnecting", str(exc) or type(exc).__name__)
                self._stop.wait(1.0)
        self.stop_guests()

    def start_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="lab-guest-agent", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop the watch now: its WaitForUpdatesEx is cancelled, not left to run out.

        CancelWaitForUpdates (vSphere API reference, PropertyCollector) ends the pending
        wait with RequestCanceled, so `lab down` and a test's teardown do not wait for the
        rest of the watch's round (wait_s) before the guests are stopped. The call goes from
        a thread of its own: `lab agent` calls stop() from a signal handler, which may have
        interrupted the watch inside pyVmomi's (not reentrant) connection-pool lock. A cancel
        ends only a wait already outstanding (one the loop sends just after it runs its
        round), so that thread cancels again until the watch has ended.
        """
        self._stop.set()
        if self._pc is not None:  # the watch clears _pc on its way out
            threading.Thread(
                target=cancel_waits, args=(lambda: self._pc, self.wait_s + 5), daemon=True
            ).start()

    def _watch(self, si: Any) -> None:
        with VmWatch(si, WATCHED, self.wait_s, vms=self._vms) as watch:
            self._pc = watch.collector
            try:
                while not self._stop.is_set():
                    seen = self._names()
                    powered_on = watch.next_round()
                    self._destroyed |= seen - self._names()  # left the view: destroyed
                    if powered_on is None:
                        # A hung guest was let go (it boots now), or a host did not start in
                        # time on a loaded machine: a powered-on VM boots in the end, so try
                        # again.
                        if (self._hung - self.hang) or self._failed:
                            self._reconcile(si, set())
                        continue
                    self._reconcile(si, powered_on)
            finally:
                self._pc = None

    def _names(self) -> set[str]:
        return {str(p["name"]) for p in self._vms.values() if p.get("name")}

    # -- the guests ---------------------------------------------------------------------------
    def _reconcile(self, si: Any, powered_on: set[str]) -> None:
        running = {
            props.get("name"): moid
            for moid, props in self._vms.items()
            if props.get("runtime.powerState") == "poweredOn" and not props.get("config.template")
        }
        self._failed &= set(running)  # a VM powered off or destroyed is not tried again
        before = {n: g.identity["address"] for n, g in self.guests.items()}
        for name in sorted(set(self.guests) - set(running)):
            self._down(name, "powered off or destroyed")
        for name in sorted(self._destroyed - set(running)):
            self._discard_files(name)
        self._destroyed.clear()
        for name, moid in sorted(running.items()):
            if name in self.guests and moid not in powered_on:
                continue
            if name in self.guests:
                self._down(name, "rebooted")
            self._boot(si, name, moid)
        if {n: g.identity["address"] for n, g in self.guests.items()} != before:
            self._publish_names()

    def _publish_names(self) -> None:
        """Every guest resolves every running guest by name (the lab's DNS)."""
        pairs = sorted(
            (g.identity["hostname"], g.identity["address"]) for g in self.guests.values()
        )
        text = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        text += "".join(f"{address}\t{name}\n" for name, address in pairs)
        for guest in self.guests.values():
            with contextlib.suppress(OSError):
                guest.host.path("/etc/hosts").write_text(text)

    def _boot(self, si: Any, name: str, moid: str) -> None:
        """What the guest does at boot: read guestinfo (now), apply it, start sshd."""
        from provision.guestinfo import read_identity

        if name in self.hang:
            if name not in self._hung:
                self._event((name, "hung: the guest does not boot"))
            self._hung.add(name)
            return
        self._hung.discard(name)
        read = vm_config(si, moid)  # one read: the guestinfo keys and the BIOS UUID Tools use
        if read is None:  # destroyed in between
            return
        extra, uuid = read
        ident = read_identity(extra)
        if not ident or not ident.get("address") or not ident.get("hostname"):
            self._event((name, "no cloud-init metadata: no host"))
            return
        try:
            if self.fail_starts.get(name, 0) > 0:
                self.fail_starts[name] -= 1
                raise SshHostError(f"injected: the host of {name} did not start")
            host = self._start_host(name, ident)
        except Exception as exc:  # noqa: BLE001 - one guest failing must not stop the others
            self._failed.add(name)
            self._event((name, f"host failed: {exc}"))
            log.warning("guest agent: %s: %s", name, exc)
            return
        self._failed.discard(name)
        self.guests[name] = Guest(name, ident, host)
        self._event((name, "up"))
        # The BIOS UUID from the config read above, not the watch's copy: govmomi 0.24's
        # simulator adds a new VM to its folder (and so to the watched view) before it
        # configures it (NewVirtualMachine: folderPutChild, then configure), and sets the
        # config by plain assignment, which sends no property update. A watch that met the
        # VM in that window never learned config.uuid ("no BIOS UUID" on a loaded machine).
        self._report_tools(name, uuid or self._vms.get(moid, {}).get("config.uuid") or "", host)

    def _report_tools(self, name: str, uuid: str, host: TestHost) -> None:
        """VMware Tools in the guest: report its hostname and address once SSH answers.

        vmtoolsd does not give up after one try: its guestinfo plugin reports again on
        every poll (open-vm-tools services/plugins/guestInfo, `poll-interval`, 30 s by
        default). The lab polls every second for REPORT_FOR_S, so a loaded machine where
        sshd or the twin answers late still gets its guest reported."""
        deadline = time.monotonic() + REPORT_FOR_S
        while not self._stop.is_set():
            if self._report_once(name, uuid, host) or time.monotonic() > deadline:
                return
            time.sleep(1.0)

    def _report_once(self, name: str, uuid: str, host: TestHost) -> bool:
        from provision.lifecycle import ssh_answers

        if not uuid:
            self._event((name, "tools: no BIOS UUID: nothing reported"))
            return True
        if not ssh_answers(host.address, host.port):
            self._event((name, "tools: the guest's SSH does not answer: nothing reported"))
            return False
        seen = guest_view(host)
        commands = [f"tools.set.version {TOOLS_VERSION}"]
        if seen.get("hostname"):
            commands.append(f"SetGuestInfo  {INFO_DNS_NAME} {seen['hostname']}")
        if seen.get("address"):
            commands.append(f"SetGuestInfo  {INFO_IPADDRESS} {seen['address']}")
        for command in commands:
            reply = tools_rpc(self.spec, uuid, command)
            if not reply.startswith("1"):
                self._event((name, f"tools: {command.split()[0]} refused: {reply[2:]}"))
                return False
        self._event((name, f"tools: reported {seen.get('address') or 'no address'}"))
        return True

    def _start_host(self, name: str, ident: dict[str, Any]) -> TestHost:
        net = ipaddress.ip_interface(f"{ident['address']}/{ident['prefix'] or 24}").network
        assert self.state_dir is not None
        state = self.state_dir / name  # the VM's files: its host key and its disk
        disk = state / "disk" if self.disks else None
        image = guestfamily.image_of(disk, self.image)  # a blank disk takes the spec's family
        base = guestfamily.base_rpms(image, self.state_dir / ".images")
        (host,) = start_hosts(
            [ident["hostname"]],
            str(net),
            state / "agent_key",  # the agent's own key, replaced below: not authorized
            owner=self.owner,
            state_dir=state,
            addresses=[ident["address"]],
            shared=self.shared,
            timeout=BOOT_FOR_S,
            disks=[disk] if disk is not None else None,
        )
        try:  # the image's family before the user's key lets anyone in (its first boot only)
            if guestfamily.give_family(host, image, base):
                self._event((name, f"{image} stand-in (Debian 12 underneath)"))
        except BaseException:
            stop_hosts([host], delete_bridge=False)
            raise
        keys = "".join(f"{k}\n" for k in ident["authorized_keys"])
        (host.runtime_dir / "authorized_keys").write_text(keys)
        linkshape.shape_lab([host], self.spec)  # its link at the lab's declared line rate
        return host

    def _down(self, name: str, why: str) -> None:
        guest = self.guests.get(name)
        if guest is not None:
            stop_hosts([guest.host], delete_bridge=False)
            del self.guests[name]  # after the host is gone: watchers see it down
            self._event((name, f"down ({why})"))

    def _discard_files(self, name: str) -> None:
        """A destroyed VM's files (host key, disk) are deleted with it."""
        assert self.state_dir is not None
        if (self.state_dir / name).is_dir():
            shutil.rmtree(self.state_dir / name, ignore_errors=True)
            self._event((name, "files deleted (VM destroyed)"))

    def _event(self, event: tuple[str, str]) -> None:
        """Record what a guest did; logged too (INFO), so a test that fails shows the story."""
        self.events.append(event)
        log.info("guest %s: %s", *event)

    def stop_guests(self) -> None:
        for name in sorted(self.guests):
            self._down(name, "agent stopped")

    def wait_for(self, names: set[str], timeout: float = 30) -> bool:
        """Test helper: True once exactly `names` have hosts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if set(self.guests) == names:
                return True
            time.sleep(0.1)
        return set(self.guests) == names


def guest_view(host: TestHost) -> dict[str, str]:
    """What vmtoolsd reads inside the guest: its hostname and eth0's IPv4 address."""
    out: dict[str, str] = {}
    name = host.exec(["hostname"], timeout=10)
    if name.returncode == 0:
        out["hostname"] = name.stdout.strip()
    addr = host.exec(["ip", "-4", "-o", "addr", "show", "dev", "eth0"], timeout=10)
    for line in addr.stdout.splitlines():
        words = line.split()
        if "inet" in words and words.index("inet") + 1 < len(words):
            out["address"] = words[words.index("inet") + 1].split("/")[0]
            break
    return out


def tools_rpc(spec: Any, uuid: str, command: str, *, timeout: float = 10) -> str:
    """Send one RPCI command over the twin's Tools channel; the VMX's reply ("1 ..." / "0 ...").

    The channel is the twin's own listener (spec.vcenter, with its TLS trust); a failure
    to reach it reads as "0 <why>", the way the VMX answers a refused command.
    """
    import urllib.error
    import urllib.request
    from urllib.parse import quote

    from provision.session import ssl_context

    vc = spec.vcenter
    url = f"{vc.protocol}://{vc.host}:{vc.port}/guestrpc/{quote(uuid, safe='')}"
    request = urllib.request.Request(url, data=command.encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=ssl_context(vc)) as answer:
            return str(answer.read(4096).decode("utf-8", "replace"))
    except (OSError, urllib.error.URLError) as exc:
        return f"0 {exc}"
