"""One fact class per observation: each parses real H200 output into a typed value.

The captured files are real output of one NVIDIA H200 machine (driver 580.159.04, CUDA
13.0): tests/support/fixtures/h200/ (made by its capture.sh); `nvidia-smi topo -m` is the same
capture kept with the project's shared H200 evidence.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyinfra.facts import server

from validation.expect import NodeExpect
from validation.facts import command_of, key_of, registry
from validation.facts.net import NetInterfaces
from validation.facts.system import (
    Mounts,
    Sysctl,
)
from validation.probes import build_script, split_output


def test_sysctl_parse_is_pyinfras_on_this_machines_kernel() -> None:
    done = subprocess.run(["sysctl", "-a"], capture_output=True, text=True, check=False)
    output = done.stdout.splitlines()
    assert len(output) > 500, done.stderr
    ours, theirs = Sysctl().process(output), server.Sysctl().process(output)
    assert ours == theirs
    assert [type(v) for v in ours.values()] == [type(v) for v in theirs.values()]


def test_quick_facts_run_without_the_time_limit_and_read_no_driver() -> None:
    # Fact.quick spares the node `timeout` and a second shell; only for what nothing can
    # hold up: uname, /proc and /etc. A /sys file is a driver's answer and keeps the limit.
    expect = NodeExpect(node="n1", address="127.0.0.1")
    quick = [c for c in registry().values() if getattr(c, "quick", False)]
    assert {key_of(c) for c in quick} == {
        "hostname", "kernel", "arch", "os", "kernel_modules", "mounts"
    }  # fmt: skip
    for cls in quick:
        assert "/sys" not in command_of(cls, expect) and cls().requires_command() is None, cls
    script = build_script([*quick, Sysctl], expect)
    assert script.count("$T sh -c") == 1 and "$T sh -c 'sysctl -a" in script
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
    outputs = split_output(done.stdout)
    expected = {key_of(c): 0 for c in [*quick, Sysctl]}
    if not Path("/proc/modules").exists():  # a kernel without loadable modules: cat's exit 1
        expected["kernel_modules"] = 1
    assert {k: o.rc for k, o in outputs.items()} == expected
    assert outputs["hostname"].text == os.uname().nodename
    assert Mounts().process(outputs["mounts"].text.splitlines())  # this machine's mounts


# The NetInterfaces command before it used shell built-ins (cat, readlink, basename, sed).
_NICS_WITH_PROCESSES = (
    'for d in /sys/class/net/*; do n=${d##*/}; printf "if %s|%s|%s|%s|%s|%s\\n" "$n"'
    ' "$(cat $d/mtu 2>/dev/null)" "$(cat $d/address 2>/dev/null)"'
    ' "$(cat $d/operstate 2>/dev/null)" "$(cat $d/speed 2>/dev/null)"'
    ' "$(basename "$(readlink $d/device/driver 2>/dev/null)" 2>/dev/null)'
    ' $(basename "$(readlink $d/device 2>/dev/null)" 2>/dev/null)"; done;'
    " ip -o -4 addr show 2>/dev/null | sed 's/^/addr /';"
    " ip route show default 2>/dev/null | sed 's/^/route /';"
    ' while read -r dev dst rest; do [ "$dst" = 00000000 ] &&'
    ' echo "route default dev $dev"; done < /proc/net/route 2>/dev/null; true'
)


@pytest.fixture
def nic_netns() -> Iterator[str]:
    """A network namespace of its own with a bridge, a veth pair on it (one end down, its
    speed unreadable), lo, addresses and a default route: interfaces that stay still while
    the two commands read them. The machine's own namespace does not: the other test
    worker's lab adds and removes bridges and veths (and a bridge's MAC follows its ports)."""
    ns = f"rcnic{os.getpid()}"
    steps = [
        ["ip", "netns", "add", ns],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
        ["ip", "-n", ns, "link", "add", "br0", "type", "bridge"],
        ["ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb"],
        ["ip", "-n", ns, "link", "set", "va", "master", "br0"],
        ["ip", "-n", ns, "link", "set", "va", "up"],
        ["ip", "-n", ns, "link", "set", "br0", "up"],
        ["ip", "-n", ns, "addr", "add", "192.0.2.9/24", "dev", "br0"],
        ["ip", "-n", ns, "route", "add", "default", "via", "192.0.2.1", "dev", "br0"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def test_nic_fact_built_ins_print_what_the_processes_printed(nic_netns: str) -> None:
    # Interfaces of the kinds a node has: bridge, veth, lo, a down one whose speed cannot be
    # read, none with a device link (virtio's driver link is read by the same code).
    here = ["ip", "netns", "exec", nic_netns, "sh", "-c"]
    new = subprocess.run([*here, NetInterfaces().command()], capture_output=True, text=True)
    old = subprocess.run([*here, _NICS_WITH_PROCESSES], capture_output=True, text=True)
    assert new.stdout.count("if br0|") == 1 and "if vb|" in new.stdout, new.stdout
    assert new.stdout == old.stdout and new.stdout.count("if lo|") == 1, new.stdout
    assert new.stderr == old.stderr == ""
    state = NetInterfaces().process(new.stdout.splitlines())
    assert state.mtu["lo"] == 65536 and state.addrs.get("lo") == ["127.0.0.1"]
