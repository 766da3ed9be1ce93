"""The SSH test hosts themselves: real sshd, own name, own network, own files, clean teardown."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from rackcert.core.errors import RackcertError
from rackcert.core.spec_loader import load_spec
from rackcert.lab import lifetime, timesync
from rackcert.lab.sshhosts.common import RUNTIME_ROOT
from rackcert.lab.sshhosts.host import TestHost
from rackcert.lab.sshhosts.lab import start_lab_hosts
from rackcert.lab.sshhosts.network import (
    bridge_name,
    claim_subnet,
    netns_list,
    release_subnet,
    stop_owner,
)
from rackcert.lab.sshhosts.start import start_hosts, stop_hosts


def test_hosts_answer_ssh_with_own_name_address_and_mtu(ssh_hosts):
    h1, h2 = ssh_hosts(2, mtu=1400)
    out1 = h1.ssh(
        "hostname; cat /etc/hostname; cat /sys/class/net/eth0/mtu; ip -4 -o addr show eth0"
    )
    assert out1.returncode == 0, out1.stderr
    name, etc_name, mtu, *addrs = out1.stdout.splitlines()
    assert (name, etc_name, mtu) == ("node1", "node1", "1400")
    assert any(f"eth0    inet {h1.address}/24" in a for a in addrs), addrs
    assert h2.ssh("hostname").stdout == "node2\n"
    # MTU is per host: changing h1's leaves h2's alone.
    assert h1.exec(["ip", "link", "set", "eth0", "mtu", "9000"]).returncode == 0
    assert h2.ssh("cat /sys/class/net/eth0/mtu").stdout == "1400\n"
    assert h1.ssh("cat /sys/class/net/eth0/mtu").stdout == "9000\n"
    # Peers see each other by name and address (for ssh_trust, rendezvous).
    assert h1.ssh("getent hosts node2").stdout.split()[0] == h2.address
    probe = h2.ssh(f"python3 -c \"import socket; socket.create_connection(('{h1.address}', 22))\"")
    assert probe.returncode == 0, probe.stderr


def test_files_are_per_host_and_machine_untouched(ssh_hosts):
    h1, h2 = ssh_hosts(2)
    marker = f"/etc/rackcert-sshhosts-test-{os.getpid()}"
    assert (
        h1.ssh(f"echo one > {marker} && mkdir -p /root/.ssh && touch /root/.ssh/x").returncode == 0
    )
    assert h1.path(marker).read_text() == "one\n"
    assert not h2.path(marker).exists()
    assert not Path(marker).exists()
    assert h2.ssh(f"test -e {marker}").returncode == 1
    # Shared paths (/tmp) are the machine's own.
    assert h2.ssh("test -d /work || test -d /tmp").returncode == 0


def test_a_host_on_a_disk_finds_its_files_when_started_again(tmp_path):
    """A disk outlives its host (the lab's VMs powered off and on); without one, a host starts
    from the image every time."""
    subnet = claim_subnet()
    disk, key, marker = tmp_path / "disk-a", tmp_path / "k", "/etc/rackcert-disk-test"
    started: list[TestHost] = []

    def start(**kw):
        (host,) = start_hosts(["a"], subnet, key, **kw)
        started.append(host)
        return host

    try:
        a = start(disks=[disk])
        assert a.ssh(f"echo kept > {marker} && echo home > /root/note").returncode == 0
        stop_hosts([a], delete_bridge=False)
        again = start(disks=[disk])
        out = again.ssh(f"cat {marker} /root/note")
        assert out.stdout == "kept\nhome\n", out.stderr
        stop_hosts([again], delete_bridge=False)
        fresh = start()  # no disk: the image, as before
        assert fresh.ssh(f"test -e {marker}").returncode == 1
        assert not Path(marker).exists()
        with pytest.raises(RackcertError, match="one disk per test host name"):
            start_hosts(["b", "c"], subnet, key, disks=[disk])
    finally:
        stop_hosts(started)
        release_subnet(subnet)


def test_known_hosts_pins_each_host_key(ssh_hosts):
    h1, h2 = ssh_hosts(2)
    lines = h1.known_hosts.read_text().splitlines()
    assert {line.split()[0] for line in lines} == {h1.address, h2.address, "node1", "node2"}
    keys = {line.split()[0]: line.split()[2] for line in lines}
    assert keys[h1.address] != keys[h2.address]


def test_kill_makes_host_refuse_while_others_serve(ssh_hosts):
    h1, h2 = ssh_hosts(2)
    h2.kill()
    assert not h2.alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((h2.address, 22), timeout=2)
    assert h1.ssh("true").returncode == 0


def test_stop_is_idempotent_and_leaves_nothing(ssh_hosts, tmp_path):
    subnet = claim_subnet()
    hosts = start_hosts(["a", "b"], subnet, tmp_path / "k")
    names = {h.netns for h in hosts}
    assert names <= set(netns_list())
    assert all(str(os.getpid()) in n for n in names)
    stop_hosts(hosts)
    stop_hosts(hosts)
    assert not names & set(netns_list())
    assert not Path("/sys/class/net", bridge_name(subnet)).exists()


def test_subnet_in_use_is_a_clear_error(ssh_hosts, tmp_path):
    (h,) = ssh_hosts(["solo"])
    with pytest.raises(RackcertError, match="belongs to"):
        start_hosts(["x"], h.subnet, tmp_path / "k", owner="1")


def test_clear_stale_removes_dead_owner_only(ssh_hosts, tmp_path):
    (mine,) = ssh_hosts(["live"])
    dead = 2**22 + 12345  # above pid_max's default: never a live pid
    subnet = claim_subnet(owner=str(dead))
    stale = start_hosts(["ghost"], subnet, tmp_path / "k", owner=str(dead))
    assert stale[0].reachable()
    assert lifetime.clear_stale().namespaces >= 1
    assert stale[0].netns not in netns_list()
    assert not Path("/sys/class/net", bridge_name(subnet)).exists()
    assert mine.ssh("true").returncode == 0


def test_start_lab_hosts_uses_spec_addresses_and_shares_export(tmp_path):
    loaded = load_spec(Path("inventories/lab.yaml"))
    spec = loaded.spec.model_copy(deep=True)
    owner = f"{os.getpid()}xlab"
    subnet = claim_subnet(owner=owner)
    base = subnet.rsplit(".", 1)[0]
    for i, vm in enumerate(spec.vms):
        vm.address = f"{base}.{11 + i}"
    spec.guest.ssh.key_file = str(tmp_path / "id_ed25519")
    spec.storage.nfs.export = str(tmp_path / "export")
    try:
        hosts = start_lab_hosts(spec, owner=owner)
        assert [h.name for h in hosts] == ["lab-node1", "lab-node2"]
        assert hosts[0].ssh(f"echo data > {tmp_path}/export/f").returncode == 0
        assert hosts[1].ssh(f"cat {tmp_path}/export/f").stdout == "data\n"
        again = start_lab_hosts(spec, owner=owner)
        assert [h.pid for h in again] == [h.pid for h in hosts]
    finally:
        stop_owner(owner)
        release_subnet(subnet)


def _tracking(host: TestHost, deadline_s: float = 30.0) -> str:
    """chronyc's tracking report on the host once it says synchronised (or the last one)."""
    import time

    end = time.monotonic() + deadline_s
    out = ""
    while time.monotonic() < end:
        out = host.ssh("chronyc -n tracking").stdout
        if "Leap status     : Normal" in out:
            break
        time.sleep(0.5)
    return out


def test_hosts_keep_time_from_their_gateway_as_a_vm_from_its_site(ssh_hosts, tmp_path):
    """Each host's chronyd synchronises to the NTP server on its bridge's gateway (the site's
    time server), so validate's time.sync judges a daemon as on a VM; the server goes with
    the bridge."""
    from validation.facts.system import Clock

    h1, h2 = ssh_hosts(2)
    gateway = timesync.gateway_of(h1.subnet)
    out = _tracking(h1)
    assert "Leap status     : Normal" in out, out
    assert f"({gateway})" in out.splitlines()[0], out
    clock = h2.ssh(Clock().command())
    assert Clock().process(clock.stdout.splitlines())[0], clock.stdout
    # A host stopped alone keeps the others' time server; the bridge's end stops it.
    subnet = claim_subnet()
    hosts = start_hosts(["t"], subnet, tmp_path / "k")
    pidfile = RUNTIME_ROOT / f"{bridge_name(subnet)}-chrony.pid"
    pid = int(pidfile.read_text())
    stop_hosts(hosts)
    assert not pidfile.exists()
    cmdline = Path(f"/proc/{pid}/cmdline")
    assert not cmdline.exists() or b"chronyd" not in cmdline.read_bytes()


def test_the_machines_cuda_toolkit_is_not_the_nodes(ssh_hosts):
    """A VM's image has no CUDA toolkit until the cuda role installs the spec's: the
    machine's own under /usr/local is hidden from the hosts, and the machine keeps it."""
    from validation.facts.gpu import CudaToolkit

    (h,) = ssh_hosts(["cudaless"])
    fact = CudaToolkit()
    seen = h.ssh(fact.command())
    assert fact.process(seen.stdout.splitlines()) is None, seen.stdout
    files = h.ssh("find /usr/local/ -path '/usr/local/cuda-*' -type f 2>/dev/null | wc -l")
    assert files.stdout.strip() == "0", files.stdout
    machine = sorted(Path("/usr/local").glob("cuda-*"))
    assert all(any(d.iterdir()) for d in machine if d.is_dir() and not d.is_symlink())
