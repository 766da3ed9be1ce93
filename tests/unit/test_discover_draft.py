"""Inventory -> spec draft, on Inventory objects built in the test (no vCenter)."""

from __future__ import annotations

import re

import pytest
import yaml

from rackcert.core.errors import InputError
from rackcert.core.observed import Inventory, ObservedHost, PciDevice
from rackcert.core.placement import place
from rackcert.core.spec_loader import parse_spec
from rackcert.discover.catalog import load_catalog, parse_catalog
from rackcert.discover.hardware import host_names
from rackcert.discover.hardware_drift import hardware_drift
from rackcert.discover.inventory_to_spec import Endpoint, inventory_to_spec
from rackcert.discover.yaml_writer import render
from tests.support.discover_helpers import LAB, R750, edited, inventory_of, rack_data, spec_of
from tests.support.spec_helpers import example_data

ENDPOINT = Endpoint(host="vc.example.internal", user="administrator@vsphere.local")


def draft_text(inventory: Inventory, name: str = "new-rack", catalog=None) -> str:
    draft = inventory_to_spec(inventory, ENDPOINT, name, catalog or load_catalog())
    return render(draft.data, draft.notes, draft.header)


def test_r750xa_draft_reproduces_the_example_hardware():
    original = spec_of(rack_data(4))
    text = draft_text(inventory_of(original))
    found = parse_spec(text, "draft").spec
    assert hardware_drift(original, found) == []
    # Same profile name and content as the hand-written example, field for field.
    assert [p.model_dump() for p in found.hardware_profiles] == [
        p.model_dump() for p in original.hardware_profiles
    ]
    assert [h.model_dump() for h in found.hosts] == [h.model_dump() for h in original.hosts]


def test_draft_is_byte_identical_on_rerun_and_independent_of_host_order():
    spec = spec_of(rack_data(16))
    inventory = inventory_of(spec)
    shuffled = Inventory(hosts=list(reversed(inventory.hosts)))
    assert draft_text(inventory) == draft_text(inventory) == draft_text(shuffled)
    assert not re.search(r"20\d\d-\d\d-\d\d|UTC|[^0-9:]\d\d:\d\d:\d\d[^.]", draft_text(inventory))


def test_default_vm_layout_follows_nvlink_pairs():
    spec = parse_spec(draft_text(inventory_of(spec_of(rack_data(2)))), "draft").spec
    templates = {t.name: t for t in spec.vm_templates}
    assert [(v.name, v.host, v.gpus) for v in spec.vms] == [
        ("esx01-vm1", "esx01", ["0000:17:00.0", "0000:31:00.0"]),
        ("esx01-vm2", "esx01", ["0000:b1:00.0", "0000:ca:00.0"]),
        ("esx02-vm1", "esx02", ["0000:17:00.0", "0000:31:00.0"]),
        ("esx02-vm2", "esx02", ["0000:b1:00.0", "0000:ca:00.0"]),
    ]
    assert all(templates[v.template].nvlink == "required" for v in spec.vms)
    assert all(p.nvlink_pair for p in place(spec))
    assert all(v.address.endswith(".invalid") for v in spec.vms)


def test_unknown_server_gets_no_pairs_a_comment_and_one_gpu_vms():
    data = edited(rack_data(1), lambda d: d["hardware_profiles"][0].update(server_model="X9"))
    for gpu in data["hardware_profiles"][0]["gpus"]:
        gpu.pop("nvlink_peer")
    text = draft_text(inventory_of(spec_of(data)))
    spec = parse_spec(text, "draft").spec
    assert all(g.nvlink_peer is None for g in spec.hardware_profiles[0].gpus)
    assert spec.hardware_profiles[0].name == "x9-a100x4"
    assert "nvlink_peer: unknown" in text and "--catalog" in text
    assert [len(v.gpus) for v in spec.vms] == [1, 1, 1, 1]
    assert {spec.template(v.template).nvlink for v in spec.vms} == {"none"}


def test_catalog_pairs_need_both_gpus_of_a_bridged_model():
    """A missing card leaves its partner unpaired (a bridge needs two cards)."""
    data = rack_data(1)
    profile = data["hardware_profiles"][0]
    profile["gpus"] = [g for g in profile["gpus"] if g["pci"] != "0000:ca:00.0"]
    profile["gpus"][2].pop("nvlink_peer")
    spec = parse_spec(draft_text(inventory_of(spec_of(data))), "draft").spec
    peers = {g.pci: g.nvlink_peer for g in spec.hardware_profiles[0].gpus}
    assert peers == {
        "0000:17:00.0": "0000:31:00.0",
        "0000:31:00.0": "0000:17:00.0",
        "0000:b1:00.0": None,
    }
    assert [v.gpus for v in spec.vms] == [["0000:17:00.0", "0000:31:00.0"], ["0000:b1:00.0"]]


def test_distinct_hardware_gives_distinct_profiles():
    data = rack_data(4)
    lab = example_data(LAB)["hardware_profiles"][0]
    data["hardware_profiles"].append(lab)
    data["hosts"][1]["profile"] = data["hosts"][3]["profile"] = lab["name"]
    data["hosts"][3]["esxi_version"] = "8.0.1"
    original = spec_of(data)
    found = parse_spec(draft_text(inventory_of(original)), "draft").spec
    assert [p.name for p in found.hardware_profiles] == ["r750xa-a100x4", "r750xa-a100x2"]
    assert [h.profile for h in found.hosts] == [
        "r750xa-a100x4",
        "r750xa-a100x2",
        "r750xa-a100x4",
        "r750xa-a100x2",
    ]
    assert found.hosts[3].esxi_version == "8.0.1"
    assert hardware_drift(original, found) == []


def test_nic_ports_are_functions_of_one_card():
    found = parse_spec(draft_text(inventory_of(spec_of(rack_data(1)))), "draft").spec
    (nic,) = found.hardware_profiles[0].nics
    assert (nic.pci, nic.model, nic.ports, nic.numa) == (
        "0000:4b:00.0",
        "Mellanox ConnectX-6 Dx",
        2,
        0,
    )


def test_other_devices_are_not_listed_and_unknown_gpus_are_flagged():
    inventory = inventory_of(spec_of(rack_data(1)))
    host = inventory.hosts[0]
    host.pci_devices.append(
        PciDevice(
            id="0000:e3:00.0",
            vendor_id=0x10DE,
            device_id=0x9999,
            class_id=0x0302,
            device_name="GB999 [Future 96GB]",
            numa_node=1,
        )
    )
    host.pci_devices.append(
        PciDevice(id="0000:4b:00.2", vendor_id=0x15B3, device_id=0x101E, class_id=0x0200)
    )
    text = draft_text(inventory)
    gpus = parse_spec(text, "draft").spec.hardware_profiles[0].gpus
    assert [g.pci for g in gpus][-1] == "0000:e3:00.0"
    assert (gpus[-1].model, gpus[-1].memory_gb) == ("NVIDIA GB999 [Future 96GB]", 96)
    assert "0000:e3:00.0: GPU 10de:9999" in text and "check model and memory_gb" in text
    assert "0000:4b:00.2: Mellanox 15b3:101e is not in the NIC catalog" in text
    # Chipset, SATA and root ports are not GPUs or NICs.
    assert len(gpus) == 5


def test_signed_pci_ids_as_the_api_types_them_are_understood():
    """vSphere types ids as xsd:short; a raw negative value still maps to the right part."""
    inventory = inventory_of(spec_of(rack_data(1)))
    for dev in inventory.hosts[0].pci_devices:
        if dev.vendor_id == 0x15B3:
            dev.vendor_id -= 0x10000  # 0x15b3 fits, but make it look like a signed short
    nics = parse_spec(draft_text(inventory), "draft").spec.hardware_profiles[0].nics
    assert [n.model for n in nics] == ["Mellanox ConnectX-6 Dx"]


def test_password_by_reference_and_placeholders_are_comments():
    text = draft_text(inventory_of(spec_of(rack_data(1))))
    data = yaml.safe_load(text)
    assert data["vcenter"]["password_env"] == "RACKCERT_VCENTER_PASSWORD"
    assert "password" not in {k for k in data["vcenter"] if k not in ("password_env",)}
    assert "# nvidia_driver: 470.82.01" in text and "# ofed: 5.4-3.1.0.0" in text
    assert "# storage:" in text and "#     server: filer.example.internal" in text
    assert "# reference: dell-r750xa-a100-esxi703" in text
    assert "nvidia_driver" not in data["guest"]


def test_pci_addresses_stay_strings_for_yaml_1_1_readers():
    """PyYAML (YAML 1.1) would read an unquoted 0000:17:00.0 as a sexagesimal float."""
    data = yaml.safe_load(draft_text(inventory_of(spec_of(rack_data(1)))))
    gpu = data["hardware_profiles"][0]["gpus"][0]
    assert gpu["pci"] == "0000:17:00.0" and gpu["nvlink_peer"] == "0000:31:00.0"


def test_key_order_follows_the_example():
    example = example_data(R750)
    data = yaml.safe_load(draft_text(inventory_of(spec_of(rack_data(1)))))
    wanted = [k for k in example if k in data]
    assert [k for k in data if k in example] == wanted
    for section in ("vcenter", "guest", "network", "certification"):
        in_example = [k for k in example[section] if k in data[section]]
        assert [k for k in data[section] if k in example[section]] == in_example
    for key in ("hardware_profiles", "vm_templates"):
        in_example = [k for k in example[key][0] if k in data[key][0]]
        assert [k for k in data[key][0] if k in example[key][0]] == in_example
    gpu_keys = list(example["hardware_profiles"][0]["gpus"][0])
    assert list(data["hardware_profiles"][0]["gpus"][0]) == gpu_keys
    assert list(data["hosts"][0]) == list(example["hosts"][0])


def test_host_names_shorten_fqdns_only_when_unique():
    assert host_names(["esx01.a.internal", "esx02.a.internal"]) == {
        "esx01.a.internal": "esx01",
        "esx02.a.internal": "esx02",
    }
    assert host_names(["esx01.a.internal", "esx01.b.internal"]) == {
        "esx01.a.internal": "esx01.a.internal",
        "esx01.b.internal": "esx01.b.internal",
    }
    assert host_names(["10.0.0.5"]) == {"10.0.0.5": "10.0.0.5"}


def test_no_gpu_host_gets_a_profile_and_no_vms():
    inventory = Inventory(
        hosts=[
            ObservedHost(
                name="mgmt01.example.internal",
                moid="host-9",
                vendor="Dell Inc.",
                model="PowerEdge R650",
                esxi_version="7.0.3",
                numa_nodes=2,
            )
        ]
    )
    spec = parse_spec(draft_text(inventory), "draft").spec
    assert spec.hardware_profiles[0].name == "poweredge-r650-nogpu"
    assert spec.vms == [] and spec.vm_templates == []


def test_site_catalog_adds_a_server_model(tmp_path):
    data = edited(rack_data(1), lambda d: d["hardware_profiles"][0].update(server_model="Z1"))
    for gpu in data["hardware_profiles"][0]["gpus"]:
        gpu.pop("nvlink_peer")
    extra = tmp_path / "site.yaml"
    extra.write_text(
        "servers:\n"
        "  - {name: z1, vendor: Dell Inc., model: Z1, profile_prefix: z1, nvlink_bridges: [\n"
        "      {gpu_models: [NVIDIA A100 PCIe 80GB], pairs: [[17:00.0, b1:00.0]]}]}\n"
    )
    catalog = load_catalog([extra])
    spec = parse_spec(draft_text(inventory_of(spec_of(data)), catalog=catalog), "d").spec
    peers = {g.pci: g.nvlink_peer for g in spec.hardware_profiles[0].gpus}
    assert peers["0000:17:00.0"] == "0000:b1:00.0" and peers["0000:b1:00.0"] == "0000:17:00.0"
    assert peers["0000:31:00.0"] is None


@pytest.mark.parametrize(
    "text, needle",
    [
        ("servers: [{name: a}]\n", "servers.0.vendor"),
        ("gpus: [{vendor_id: 10de, device_id: xyz, model: m, short: s, memory_gb: 1}]\n", "hex"),
        ("- not a mapping\n", "a catalog is a mapping"),
        ("gpus: [\n", "cannot read catalog"),
    ],
)
def test_broken_catalog_file_is_one_clear_error(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        parse_catalog(path)
    assert needle in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)
