"""HGX boards and vendor device groups in the spec: each refused case gives its one-line error.

The example is inventories/hgx-h200-4node.yaml; each case breaks one thing in a copy and
asserts the whole error line: file, line, field and the statement it follows.
"""

from __future__ import annotations

import re

import pytest

from rackcert.core.errors import SpecError
from rackcert.core.placement import place
from rackcert.core.spec_loader import load_spec, parse_spec
from tests.support.hgx_spec import HGX
from tests.support.hgx_spec import hgx_data as _hgx
from tests.support.spec_helpers import R750, example_data, mutated, write_spec

NVAIE = (
    "NVIDIA AI Enterprise: GPU passthrough is not supported on NVSwitch systems under VMware"
    " vSphere; only time-sliced vGPU is"
)


def _error(tmp_path, data) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(tmp_path, data))
    message = str(info.value)
    assert "\n" not in message
    prefix = str(tmp_path / "spec.yaml") + ":"
    assert message.startswith(prefix)
    return re.sub(r"^\d+: ", "", message.removeprefix(prefix))


def _vm(d, name):
    return next(v for v in d["vms"] if v["name"] == name)


REFUSED = [
    (
        "passthrough-on-nvswitch",
        lambda d: d["vm_templates"][0].update(gpu_mode="passthrough", vgpu_profile=None),
        "vm_templates[0].gpu_mode: VM 'train8-a' on host 'hgx01' (HGX H200 8-GPU): "
        + NVAIE
        + "; set gpu_mode: vgpu with a vgpu_profile",
    ),
    (
        "size-the-board-lacks",
        lambda d: d["vm_templates"][1].update(gpus=3),
        "vm_templates[1].gpus: VM 'train4-a' on host 'hgx02' (HGX H200 8-GPU): the board's"
        " Fabric Manager partitions hold 1, 2, 4, 8 GPU(s), not 3; a VM takes one whole"
        " partition",
    ),
    (
        "p2p-across-vms-split",
        lambda d: _vm(d, "pair-a").update(allow_split_pair=True),
        "vms[3].allow_split_pair: VM 'pair-a' on host 'hgx03' (HGX H200 8-GPU): vGPUs that talk"
        " peer to peer must be in one VM (NVIDIA AI Enterprise), so P2P across VMs is refused"
        " and a VM takes a whole partition; drop allow_split_pair",
    ),
    (
        "p2p-across-vms-overlapping-partitions",
        lambda d: (
            _vm(d, "train4-c").update(device_group="partition-2"),
            _vm(d, "pair-e").update(device_group="partition-5"),
        ),
        "vms[8].device_group: partition-5 (modules 5, 7) shares module 5 with partition-2 of VM"
        " 'train4-c' on host 'hgx04': a partition's GPUs talk peer to peer, and P2P across VMs"
        " is refused (NVIDIA AI Enterprise)",
    ),
    (
        "p2p-across-vms-gpus-not-a-partition",
        lambda d: _vm(d, "pair-a").update(gpus=["0000:1b:00.0", "0000:43:00.0"]),
        "vms[3].gpus: VM 'pair-a' on host 'hgx03' (HGX H200 8-GPU): GPUs 0000:1b:00.0,"
        " 0000:43:00.0 are not one Fabric Manager partition, and P2P across VMs is refused"
        " (NVIDIA AI Enterprise); name a partition with device_group instead",
    ),
    (
        "vcenter-7-with-device-groups",
        lambda d: d["vcenter"].update(version="7.0.3"),
        "vcenter.version: VM 'train8-a' on host 'hgx01' (HGX H200 8-GPU) takes its GPUs as a"
        " vendor device group, and vCenter 7.0.3 cannot: vendor device groups exist from vSphere"
        " API 8.0.0.1 (ConfigSpec.deviceGroups); vSphere 7.0.3 has none; run vSphere 8.0.x",
    ),
    (
        "esxi-7-with-device-groups",
        lambda d: d["hosts"][2].update(esxi_version="7.0.3"),
        "hosts[2].esxi_version: VM 'pair-a' on host 'hgx03' (HGX H200 8-GPU) takes its GPUs as a"
        " vendor device group, and ESXi 7.0.3 cannot: vendor device groups exist from vSphere"
        " API 8.0.0.1 (ConfigSpec.deviceGroups); vSphere 7.0.3 has none; run vSphere 8.0.x",
    ),
    (
        "vsphere-release-not-spoken",
        lambda d: d["vcenter"].update(version="6.7.0"),
        "vcenter.version: String should match pattern",
    ),
    (
        "unknown-partition",
        lambda d: _vm(d, "pair-f").update(device_group="partition-15"),
        "vms[9].device_group: VM 'pair-f' on host 'hgx04' (HGX H200 8-GPU): the board has no"
        " partition-15 (partition IDs 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)",
    ),
    (
        "partition-of-another-size",
        lambda d: _vm(d, "pair-f").update(device_group="partition-1"),
        "vms[9].device_group: VM 'pair-f' on host 'hgx04' (HGX H200 8-GPU): partition-1 holds 4"
        " GPU(s), template 'hgx-2gpu' asks for 2",
    ),
    (
        "module-id-missing",
        lambda d: d["hardware_profiles"][0]["gpus"][5].pop("module_id"),
        "hardware_profiles[0].gpus[5].module_id: GPU 0000:c3:00.0 sits on board 'HGX H200"
        " 8-GPU': give its SXM module ID (nvidia-smi -q, 'Module ID'), which the Fabric Manager"
        " partitions use",
    ),
    (
        "partition-names-a-missing-module",
        lambda d: d["hardware_profiles"][0]["board"].update(
            partitions=[{"id": 0, "modules": [1, 2, 3, 9]}]
        ),
        "hardware_profiles[0].board.partitions[0].modules: partition 0 names module 9, not this"
        " profile's GPUs: list the board's own partitions (the default is the 8-GPU HGX"
        " H100/H200 table of NVIDIA's Fabric Manager User Guide)",
    ),
    (
        "bridge-on-a-board",
        lambda d: (
            d["hardware_profiles"][0]["gpus"][0].update(nvlink_peer="0000:43:00.0"),
            d["hardware_profiles"][0]["gpus"][1].update(nvlink_peer="0000:1b:00.0"),
        ),
        "hardware_profiles[0].gpus[0].nvlink_peer: the GPUs of an NVSwitch board are joined by"
        " its NVSwitches, not by a bridge: drop nvlink_peer",
    ),
    (
        "partition-taken-twice",
        lambda d: _vm(d, "pair-e").update(device_group="partition-6"),
        "vms[9].device_group: partition-6 (modules 6, 8) shares module 6 with partition-6 of VM"
        " 'pair-e' on host 'hgx04': a partition's GPUs talk peer to peer, and P2P across VMs is"
        " refused (NVIDIA AI Enterprise)",
    ),
]


@pytest.mark.parametrize(
    ("edit", "expected"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_case_is_one_line(tmp_path, edit, expected):
    got = _error(tmp_path, mutated(_hgx(), edit))
    assert got == expected or (expected.endswith("pattern") and got.startswith(expected))


def test_the_error_line_is_the_field_line():
    text = HGX.read_text().replace("  version: 8.0.3\n", "  version: 7.0.3\n", 1)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t == "  version: 7.0.3")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "inventories/h.yaml")
    assert str(info.value).startswith(f"inventories/h.yaml:{line}: vcenter.version: ")


def test_hgx_example_is_accepted_and_placed_on_whole_partitions():
    spec = load_spec(HGX).spec
    assert spec.vcenter.version == "8.0.3"
    got = {p.vm: (p.host, p.partition, p.modules) for p in place(spec)}
    assert got == {
        "train8-a": ("hgx01", 0, (1, 2, 3, 4, 5, 6, 7, 8)),
        "train4-a": ("hgx02", 1, (1, 2, 3, 4)),
        "train4-b": ("hgx02", 2, (5, 6, 7, 8)),
        "pair-a": ("hgx03", 3, (1, 3)),
        "pair-b": ("hgx03", 4, (2, 4)),
        "pair-c": ("hgx03", 5, (5, 7)),
        "pair-d": ("hgx03", 6, (6, 8)),
        "train4-c": ("hgx04", 1, (1, 2, 3, 4)),
        "pair-e": ("hgx04", 5, (5, 7)),
        "pair-f": ("hgx04", 6, (6, 8)),
    }


def test_a_small_vm_first_does_not_break_the_larger_partitions(tmp_path):
    """Two 2-GPU VMs before a 4-GPU VM on one host: they fill one half, the 4 gets the other."""
    data = _hgx()
    data["vms"] = [
        {"name": "p1", "template": "hgx-2gpu", "host": "hgx01", "address": "10.20.0.51"},
        {"name": "p2", "template": "hgx-2gpu", "host": "hgx01", "address": "10.20.0.52"},
        {"name": "q4", "template": "hgx-4gpu", "host": "hgx01", "address": "10.20.0.53"},
    ]
    spec = load_spec(write_spec(tmp_path, data)).spec
    got = {p.vm: p.partition for p in place(spec)}
    assert got == {"p1": 3, "p2": 4, "q4": 2}


def test_a_full_board_refuses_one_more_vm(tmp_path):
    data = _hgx()
    data["vms"].append(
        {"name": "extra", "template": "hgx-2gpu", "host": "hgx01", "address": "10.20.0.99"}
    )
    message = _error(tmp_path, data)
    assert "host 'hgx01' has 8 GPU(s) but its VMs ask for 10" in message


def test_r750xa_on_7_0_3_behaves_as_before():
    spec = load_spec(R750).spec
    assert spec.vcenter.version == "7.0.3"
    pairs = [p for p in place(spec) if p.nvlink_pair]
    assert [p.vm for p in pairs] == ["s1-pair", "s3-pair-a", "s3-pair-b"]
    assert all(p.partition is None and p.modules == () for p in place(spec))


def test_r750xa_on_8_0_3_is_accepted(tmp_path):
    data = example_data()
    data["vcenter"]["version"] = "8.0.3"
    for host in data["hosts"]:
        host["esxi_version"] = "8.0.3"
    assert load_spec(write_spec(tmp_path, data)).spec.vcenter.version == "8.0.3"


def test_device_group_needs_a_board(tmp_path):
    data = mutated(example_data(), lambda d: d["vms"][4].update(device_group="partition-3"))
    assert _error(tmp_path, data) == (
        "vms[4].device_group: device_group names a Fabric Manager partition, and host 'esx01'"
        " has no NVSwitch board (a PCIe NVLink pair is asked for by size: 2 GPUs, nvlink:"
        " required)"
    )
