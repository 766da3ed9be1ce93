"""`nvidia-smi topo -m` parsing, guest -> host GPU mapping, and correcting nvlink_peer."""

from __future__ import annotations

import pytest

from rackcert.core.errors import InputError
from rackcert.core.observed import ObservedVm, PassthroughDevice
from rackcert.discover.catalog import load_catalog
from rackcert.discover.hardware import host_hardware
from rackcert.discover.topo import (
    GuestLinks,
    apply_links,
    gpu_passthrough,
    map_to_host,
    parse_topo,
)
from tests.support.discover_helpers import observed_host, rack_data, spec_of

# An 8-GPU NVSwitch board, in the layout newer drivers print (spaces, extra columns).
NVSWITCH = """\
        GPU0    GPU1    GPU2    GPU3    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV18    NV18    NV18    PIX     0-51    0               N/A
GPU1    NV18     X      NV18    NV18    NODE    0-51    0               N/A
GPU2    NV18    NV18     X      NV18    SYS     52-103  1               N/A
GPU3    NV18    NV18    NV18     X      SYS     52-103  1               N/A
NIC0    PIX     NODE    SYS     SYS      X

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
"""


def test_space_separated_layout_with_more_columns():
    matrix = parse_topo(NVSWITCH)
    assert matrix.gpus == [0, 1, 2, 3]
    assert len(matrix.nvlinks()) == 6
    assert set(matrix.nvlinks().values()) == {18}


@pytest.mark.parametrize(
    "text, needle",
    [
        ("", "no GPU matrix"),
        ("No devices were found\n", "no GPU matrix"),
        ("\tGPU0\tGPU1\n", "no GPU rows"),
        ("\tGPU0\tGPU1\nGPU0\t X \n", "too few cells"),
        ("\tGPU0\tGPU1\nGPU0\t X \tWAT\n", "unknown link 'WAT'"),
    ],
)
def test_not_a_matrix_is_one_clear_error(text, needle):
    with pytest.raises(InputError) as info:
        parse_topo(text)
    assert needle in str(info.value)


def test_guest_gpus_map_to_passthrough_devices_in_device_key_order():
    vm = ObservedVm(
        name="vm1",
        moid="vm-1",
        passthrough=[
            PassthroughDevice(key=203, backing="fixed", id="0000:b1:00.0", vendor_id=0x10DE),
            PassthroughDevice(key=201, backing="fixed", id="0000:31:00.0", vendor_id=0x10DE),
            PassthroughDevice(key=205, backing="fixed", id="0000:4b:00.0", vendor_id=0x15B3),
            PassthroughDevice(key=202, backing="vgpu", vgpu="grid_a100-40c"),
        ],
    )
    assert gpu_passthrough(vm, set()) == ["0000:31:00.0", "0000:b1:00.0"]


def test_bus_id_order_decides_when_indices_are_not_in_bus_order():
    """GPU1 has the lower guest bus id, so it is the first passthrough device."""
    matrix = parse_topo(
        "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tSYS\tNV4\nGPU1\tSYS\t X \tSYS\nGPU2\tNV4\tSYS\t X \n"
    )
    bus = {0: "0000:1b:00.0", 1: "0000:13:00.0", 2: "0000:23:00.0"}
    links = map_to_host(matrix, ["0000:17:00.0", "0000:31:00.0", "0000:b1:00.0"], bus)
    # guest 1 -> 17:00.0, guest 0 -> 31:00.0, guest 2 -> b1:00.0; NV4 is guest 0 <-> 2.
    assert links.pairs == {("0000:31:00.0", "0000:b1:00.0"): 4}
    assert links.not_linked == {("0000:17:00.0", "0000:31:00.0"), ("0000:17:00.0", "0000:b1:00.0")}


def _hw():
    spec = spec_of(rack_data(1))
    return host_hardware(observed_host("esx01.example.internal", spec), load_catalog(), "esx01")


def test_guest_evidence_corrects_the_catalog():
    hw = _hw()
    # The guests show 17 <-> b1 bridged (re-cabled) and 31, ca without a bridge to each other.
    links = [
        GuestLinks("a", "esx01", pairs={("0000:17:00.0", "0000:b1:00.0"): 12}),
        GuestLinks("b", "esx01", not_linked={("0000:31:00.0", "0000:ca:00.0")}),
    ]
    assert apply_links([hw], links) == {"esx01": {"nodes"}}
    peers = {g.pci: g.nvlink_peer for g in hw.gpus}
    assert peers == {
        "0000:17:00.0": "0000:b1:00.0",
        "0000:b1:00.0": "0000:17:00.0",
        "0000:31:00.0": None,
        "0000:ca:00.0": None,
    }
    assert hw.pair_source == "nodes"


def test_pcie_only_guest_removes_the_catalog_pair_and_keeps_the_other():
    hw = _hw()
    apply_links([hw], [GuestLinks("a", "esx01", not_linked={("0000:17:00.0", "0000:31:00.0")})])
    peers = {g.pci: g.nvlink_peer for g in hw.gpus}
    assert peers["0000:17:00.0"] is None and peers["0000:31:00.0"] is None
    assert peers["0000:b1:00.0"] == "0000:ca:00.0"


def test_nvswitch_like_evidence_is_noted_not_forced_into_pairs():
    hw = _hw()
    many = {("0000:17:00.0", "0000:31:00.0"): 18, ("0000:17:00.0", "0000:b1:00.0"): 18}
    apply_links([hw], [GuestLinks("a", "esx01", pairs=many)])
    assert hw.gpu("0000:17:00.0").nvlink_peer == "0000:31:00.0"  # as it was
    assert any("NVLinks to several GPUs" in n for n in hw.notes)
