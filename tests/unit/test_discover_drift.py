"""Hardware drift between a spec in use and what discovery found, on specs built in the test."""

from __future__ import annotations

from rackcert.discover.hardware_drift import hardware_drift
from tests.support.discover_helpers import edited, rack_data, spec_of


def lines(old, new, **kwargs) -> list[str]:
    return [d.line() for d in hardware_drift(spec_of(old), spec_of(new), **kwargs)]


def _split_profile(data, host_index: int, edit) -> None:
    """Give one host its own copy of the profile, then edit that copy."""
    profile = dict(data["hardware_profiles"][0])
    profile = {**profile, "name": "changed", "gpus": [dict(g) for g in profile["gpus"]]}
    profile["nics"] = [dict(n) for n in profile["nics"]]
    edit(profile)
    data["hardware_profiles"].append(profile)
    data["hosts"][host_index]["profile"] = "changed"


def test_same_hardware_under_other_names_is_no_drift():
    old = rack_data(2)
    new = edited(old, lambda d: d["hardware_profiles"][0].update(name="other"))
    for host in new["hosts"]:
        host["profile"] = "other"
        host["name"] = host["name"].upper()  # matched by address
    assert lines(old, new) == []


def test_removed_gpu_and_its_broken_pair():
    old = rack_data(2)

    def drop(profile):
        profile["gpus"] = [g for g in profile["gpus"] if g["pci"] != "0000:ca:00.0"]
        profile["gpus"][2].pop("nvlink_peer")

    new = edited(old, lambda d: _split_profile(d, 1, drop))
    assert lines(old, new) == [
        "esx02: GPU removed: 0000:ca:00.0 NVIDIA A100 PCIe 80GB",
        "esx02: GPU changed: 0000:b1:00.0: nvlink_peer 0000:ca:00.0 -> None",
    ]
    # Without knowledge of the pairs only the removal is reported.
    assert lines(old, new, nvlink_known=set()) == [
        "esx02: GPU removed: 0000:ca:00.0 NVIDIA A100 PCIe 80GB"
    ]


def test_moved_nic_added_gpu_host_changes_and_hosts_in_and_out():
    old = rack_data(3)

    def change(profile):
        profile["nics"][0]["pci"] = "0000:98:00.0"
        profile["nics"][0]["numa"] = 1
        profile["gpus"].append(
            {"pci": "0000:e3:00.0", "model": "NVIDIA H100 PCIe", "memory_gb": 80, "numa": 1}
        )
        profile["numa_nodes"] = 4

    def edit(d):
        _split_profile(d, 0, change)
        d["hosts"][0]["esxi_version"] = "8.0.1"
        d["hosts"][2] = {**d["hosts"][2], "name": "esx09", "address": "esx09.example.internal"}

    assert lines(old, edited(old, edit)) == [
        "esx01: host changed: esxi_version 7.0.3 -> 8.0.1, numa_nodes 2 -> 4",
        "esx01: GPU added: 0000:e3:00.0 NVIDIA H100 PCIe",
        "esx01: NIC moved: Mellanox ConnectX-6 Dx 0000:4b:00.0 -> 0000:98:00.0",
        "esx03: host removed: esx03.example.internal is not in vCenter",
        "esx09: host added: esx09.example.internal with 4 GPU(s) is in vCenter, not in the spec",
    ]


def test_nic_line_rate_is_not_compared():
    """vSphere cannot see it, so a catalog default must not read as drift."""
    old = rack_data(1)
    new = edited(old, lambda d: d["hardware_profiles"][0]["nics"][0].update(speed_gbps=200))
    assert lines(old, new) == []
