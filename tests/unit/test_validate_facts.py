"""One fact class per observation: each parses real H200 output into a typed value.

The captured files are real output of one NVIDIA H200 machine (driver 580.159.04, CUDA
13.0): tests/support/fixtures/h200/ (made by its capture.sh); `nvidia-smi topo -m` is the same
capture kept with the project's shared H200 evidence.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyinfra.facts import server

from tests.support.paths import FIXTURES
from validation.checks import load_all
from validation.expect import NodeExpect, Peer
from validation.facts import command_of, key_of, registry, snapshot
from validation.facts.container import CdiGpus, CtkVersion
from validation.facts.gpu import CudaToolkit, GpuQuery, GpuTopology, NvlinkStatus, SmiHeader
from validation.facts.net import IbRates, MlxconfigAts, RdmaPorts
from validation.facts.peers import SshPeers
from validation.facts.system import (
    Clock,
    KernelLog,
    LinuxDistribution,
    LoadedModules,
    Mounts,
    Sysctl,
)
from validation.parsers import ParseError
from validation.snapshot import jsonable

H200 = FIXTURES / "h200"


def lines(name: str) -> list[str]:
    return (H200 / f"{name}.txt").read_text().splitlines()


def test_gpu_facts_read_the_real_h200() -> None:
    (gpu,) = GpuQuery().process(lines("nvidia-smi-query-gpu"))
    assert gpu["name"] == "NVIDIA H200" and gpu["driver_version"] == "580.159.04"
    head = SmiHeader().process(lines("nvidia-smi-q"))
    assert (head.driver_version, head.cuda_driver) == ("580.159.04", "13.0")
    assert GpuTopology().process(lines("nvidia-smi-topo-m")).gpus() == ["GPU0"]
    assert isinstance(NvlinkStatus().process(lines("nvidia-smi-nvlink-s")), list)
    assert CudaToolkit().process(lines("nvcc")) == "13.0.88"


def test_system_facts_read_the_real_h200() -> None:
    mods = LoadedModules().process(lines("proc-modules"))
    assert mods["nvidia"]["used"] == "-"  # pyinfra's KernelModules fails on this kernel
    mounts = Mounts().process(lines("mountinfo"))
    assert any(m.mount_point == "/" for m in mounts)
    assert KernelLog().process(lines("dmesg-xid")) == []  # the machine had no XID
    release = ["/etc/os-release", *lines("os-release"), "---"]
    assert LinuxDistribution().process(release)["release_meta"]["ID"] == "ubuntu"
    synced, said = Clock().process(["timedatectl NTPSynchronized=yes"])
    assert synced and "NTPSynchronized=yes" in said


def test_vendor_tool_facts_parse_their_documented_formats() -> None:
    ports = RdmaPorts().process(["mlx5_0 port 1 ==> ens1f0np0 (Up)"])
    assert ports[0].up and ports[0].netdev == "ens1f0np0"
    rates = IbRates().process(["/sys/class/infiniband/mlx5_0/ports/1/rate: 100 Gb/sec (4X EDR)"])
    assert rates == {"mlx5_0/1": 100.0}
    ats = MlxconfigAts().process(["Device:         0000:4b:00.0", "ATS_ENABLED   True(1)"])
    assert ats == {"0000:4b:00.0": "True(1)"}
    assert CtkVersion().process(["NVIDIA Container Toolkit CLI version 1.14.3"]) == "1.14.3"
    assert CdiGpus().process(["nvidia.com/gpu=0", "nvidia.com/gpu=all"]) == ["0"]
    with pytest.raises(ParseError):
        GpuQuery().process(["NVIDIA-SMI has failed because it couldn't communicate"])


def test_every_check_declares_registered_facts_and_keys_are_unique() -> None:
    known = registry()
    for defn in load_all().values():
        for cls in defn.facts:
            assert known[key_of(cls)] is cls, (defn.id, cls)
    assert all(key_of(c) in known for c in snapshot())


def test_peer_fact_command_is_shaped_by_the_node_and_values_are_json() -> None:
    expect = NodeExpect(
        node="n1", address="10.0.0.1", peers=[Peer(name="n2", address="10.0.0.2", port=2222)]
    )
    cmd = command_of(SshPeers, expect)
    assert "-p 2222" in cmd and "root@10.0.0.2" in cmd and "KexAlgorithms=curve25519" in cmd
    got = SshPeers().process(["peer n2 rc=255 Permission denied (publickey)."])
    assert jsonable(got) == {"n2": {"name": "n2", "rc": 255, "message": got["n2"].message}}
    assert command_of(SshPeers, NodeExpect(node="n1", address="x")) == "true"


_SYSCTL_LINES = st.lists(
    st.text(alphabet="ab.-_ \t=:0123456789x/\u00e9", max_size=24)
    | st.sampled_from(["a = 1", "b=  ", "c: 4 5", " = 3", "d = 1_0", "e = +7", "f=\t2 x"]),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(_SYSCTL_LINES)
def test_sysctl_parse_is_pyinfras_for_any_lines(output: list[str]) -> None:
    # rackcert's Sysctl.process is pyinfra's made cheaper; the record must not change.
    assert Sysctl().process(output) == server.Sysctl().process(output)
