"""Each cross-field rule fires on a broken copy of the example, with its own message and line."""

from __future__ import annotations

import pytest

from rackcert.core.errors import SpecError
from rackcert.core.spec_loader import load_spec, parse_spec
from tests.support.spec_helpers import R750, example_data, mutated, write_spec


def _error(tmp_path, data) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(tmp_path, data))
    message = str(info.value)
    assert "\n" not in message
    return message


def _set(path, value):
    def edit(d):
        node = d
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return edit


def _gpu(d, i):
    return d["hardware_profiles"][0]["gpus"][i]


CASES = [
    (
        "unknown-profile",
        _set(("hosts", 2, "profile"), "r750"),
        "hosts[2].profile: unknown hardware profile 'r750'",
    ),
    (
        "unknown-template",
        _set(("vms", 1, "template"), "nope"),
        "vms[1].template: unknown VM template 'nope'",
    ),
    ("unknown-host", _set(("vms", 0, "host"), "esx99"), "vms[0].host: unknown host 'esx99'"),
    ("duplicate-host-name", _set(("hosts", 1, "name"), "esx01"), "duplicate name 'esx01' in hosts"),
    ("duplicate-vm-name", _set(("vms", 3, "name"), "mn-node1"), "duplicate name 'mn-node1' in vms"),
    (
        "duplicate-host-address",
        _set(("hosts", 3, "address"), "esx01.example.internal"),
        "duplicate host address",
    ),
    (
        "duplicate-pci",
        lambda d: _gpu(d, 3).update(pci="0000:b1:00.0", nvlink_peer=None),
        "PCI address 0000:b1:00.0 appears twice",
    ),
    (
        "asymmetric-peer",
        lambda d: _gpu(d, 1).update(nvlink_peer="0000:b1:00.0"),
        "nvlink_peer must be symmetric",
    ),
    (
        "peer-not-a-gpu",
        lambda d: _gpu(d, 0).update(nvlink_peer="0000:99:00.0"),
        "NVLink peer 0000:99:00.0 is not a GPU of this profile",
    ),
    (
        "too-many-gpus",
        lambda d: d["vms"].append(
            {
                "name": "extra",
                "template": "dl-2gpu-nvlink",
                "host": "esx01",
                "address": "10.10.0.99",
            }
        ),
        "host 'esx01' has 4 GPU(s) but its VMs ask for 5",
    ),
    (
        "gpu-in-two-vms",
        lambda d: (
            d["vms"][0].update(gpus=["0000:17:00.0"]),
            d["vms"][4].update(gpus=["0000:17:00.0", "0000:31:00.0"]),
        ),
        "GPU 0000:17:00.0 is already given to VM 'mn-node1'",
    ),
    (
        "nvlink-required-without-pair",
        lambda d: [g.update(nvlink_peer=None) for g in d["hardware_profiles"][0]["gpus"]],
        "cannot place VM 's1-pair' on host 'esx01': no free NVLink-bridged GPU pair",
    ),
    (
        "split-pair-without-override",
        lambda d: (
            d["vms"][5].update(allow_split_pair=False) or d["vms"][6].update(allow_split_pair=False)
        ),
        "without splitting an NVLink pair (set allow_split_pair: true",
    ),
    (
        "required-needs-two",
        _set(("vm_templates", 1, "gpus"), 4),
        "nvlink: required needs exactly 2 GPUs",
    ),
    (
        "inline-secret",
        _set(("vcenter", "password"), "hunter2hunter2"),
        "vcenter.password: inline secrets are not allowed",
    ),
    ("bad-pci", lambda d: _gpu(d, 0).update(pci="17:00"), "not a PCI address"),
    (
        "bad-thumbprint",
        _set(("vcenter", "tls"), {"thumbprint": "AB:CD"}),
        "thumbprint must be a SHA-256 fingerprint",
    ),
    (
        "wrong-type",
        _set(("vm_templates", 0, "vcpus"), "lots"),
        "vm_templates[0].vcpus: Input should be a valid integer",
    ),
    (
        "missing-field",
        lambda d: d["hosts"][0].pop("address"),
        "hosts[0].address: required field is missing",
    ),
    ("unknown-key", _set(("hosts", 0, "colour"), "blue"), "hosts[0].colour: unknown key"),
]


@pytest.mark.parametrize(("edit", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_fires_with_its_message(tmp_path, edit, expected):
    message = _error(tmp_path, mutated(example_data(), edit))
    assert expected in message
    assert message.startswith(str(tmp_path / "spec.yaml") + ":")


def test_each_rule_has_its_own_message():
    expected = [c[2] for c in CASES]
    assert len(set(expected)) == len(expected)


def test_error_names_the_line_of_the_field():
    text = R750.read_text()
    broken = text.replace("profile: r750xa-a100x4, esxi_version: 7.0.3}", "profile: r750}", 3)
    # The first three hosts are broken; the error names the first, on its own line.
    line = next(i for i, t in enumerate(broken.splitlines(), 1) if "profile: r750}" in t)
    with pytest.raises(SpecError) as info:
        parse_spec(broken, "inventories/x.yaml")
    assert str(info.value).startswith(f"inventories/x.yaml:{line}: hosts[0].profile:")
    assert "(and 2 more)" in str(info.value)


def test_nested_line_for_gpu_field():
    text = R750.read_text().replace(
        'memory_gb: 80, numa: 1, nvlink_peer: "0000:ca',
        'memory_gb: -1, numa: 1, nvlink_peer: "0000:ca',
        1,
    )
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "memory_gb: -1" in t)
    with pytest.raises(SpecError) as info:
        parse_spec(text, "a.yaml")
    assert str(info.value).startswith(f"a.yaml:{line}: hardware_profiles[0].gpus[2].memory_gb:")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the spec is empty"),
        ("   \n\n", "the spec is empty"),
        ("a: [\n", "malformed YAML"),
        ("- just\n- a list\n", "must be a mapping"),
        ("key: value\n", "required field is missing"),
        ("apiVersion: rackcert/v2\n", "apiVersion"),
        ("\tbad: tab\n", "malformed YAML"),
    ],
)
def test_garbage_is_one_line(text, expected):
    with pytest.raises(SpecError) as info:
        parse_spec(text, "g.yaml")
    assert expected in str(info.value)
    assert str(info.value).startswith("g.yaml:")
    assert "\n" not in str(info.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


def test_pci_addresses_are_normalised(tmp_path):
    data = example_data()
    data["hardware_profiles"][0]["gpus"][0]["pci"] = "17:00.0"
    data["hardware_profiles"][0]["gpus"][1]["nvlink_peer"] = "0000:17:00.0".upper()
    spec = load_spec(write_spec(tmp_path, data)).spec
    assert spec.hardware_profiles[0].gpus[0].pci == "0000:17:00.0"


def test_a_misspelt_guest_source_component_is_an_error_not_ignored(tmp_path):
    data = example_data()
    data.setdefault("guest", {})["sources"] = {
        "ofed": {"path": "/mnt/ofed"},
        "nvidia-driver": {"path": "/mnt/driver"},  # the component is nvidia_driver
    }
    message = _error(tmp_path, data)
    assert "guest.sources" in message and "nvidia-driver" in message, message
    assert "nvidia_driver" in message  # says which keys are allowed
    data["guest"]["sources"] = {"nvidia_driver": {"path": "/mnt/driver"}}
    assert load_spec(write_spec(tmp_path, data)).spec.guest.sources["nvidia_driver"].path
