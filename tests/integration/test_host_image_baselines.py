"""Clusters managed by baselines: the host image per host through esxcli (issue 45, item 5).

Where vLCM does not manage the cluster by an image, the upgrade updates each host with
`esxcli software profile update -d <offline bundle> -p <image profile>` in maintenance mode,
then reboots it. The twin answers as ESXi does; rackcert's calls (provision/esxcli.py) and
VMware's own esxcli (the judge installed by .ci/setup.d/26-esxcli-judge.sh) both drive it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.apply import wait_task
from provision.esxcli import EsxcliError, host_facts, profile_update, vib_update
from provision.host_image import HostImage
from provision.hostboot import reboot_host
from tests.support.esxcli_judge import esxcli_one
from tests.support.twin_vlcm import H1, H2, LAB, NEW_BASE, NMLX_NEW, OLD_BASE
from tests.support.twin_vlcm import hosts_by_name as hosts_of

BUNDLE = "/vmfs/volumes/lab-ds/ESXi-7.0U3d-19482537-depot.zip"
OLD_BUNDLE = "/vmfs/volumes/lab-ds/ESXi-7.0U3c-19193900-depot.zip"
NEW_PROFILE, OLD_PROFILE = "ESXi-7.0U3d-19482537-standard", "ESXi-7.0U3c-19193900-standard"


def _vib(name: str, version: str, vendor: str) -> dict[str, Any]:
    level = "VMwareCertified" if vendor == "VMware" else "VMwareAccepted"
    return {"name": name, "version": version, "vendor": vendor, "acceptance_level": level}


DEPOTS = [
    {
        "path": BUNDLE,
        "vibs": [
            _vib("esx-base", NEW_BASE, "VMware"),
            _vib("nmlx5-core", NMLX_NEW, "MEL"),
            _vib("nmlx5-rdma", NMLX_NEW, "MEL"),
        ],
        "profiles": [{"name": NEW_PROFILE, "vibs": ["esx-base", "nmlx5-core", "nmlx5-rdma"]}],
    },
    {
        "path": OLD_BUNDLE,
        "vibs": [_vib("esx-base", OLD_BASE, "VMware")],
        "profiles": [{"name": OLD_PROFILE, "vibs": ["esx-base"]}],
    },
]


def _facts(si: Any, host: Any) -> tuple[str, dict[str, tuple[str, str]]]:
    facts, _ = host_facts(si, host._moId)
    assert facts.answered, facts.error
    return facts.build, {v.name: (v.version, v.vendor) for v in facts.vibs}


def test_a_baseline_host_takes_an_image_profile_in_maintenance_mode_then_a_reboot(rack_twin):
    lab = rack_twin(LAB, desc={"depots": DEPOTS})
    with HostImage(lab.spec) as image:
        assert image.managed("cluster0") is False  # 7.0.3 cluster: baselines
    with lab.connect() as si:
        host = hosts_of(si)[H1]
        with pytest.raises(EsxcliError) as outside:
            profile_update(host, BUNDLE, NEW_PROFILE)
        assert str(outside.value).startswith("[MaintenanceModeError] MaintenanceMode is required")
        assert f"VMware_bootbank_esx-base_{NEW_BASE}" in str(outside.value)
        with pytest.raises(EsxcliError, match=r"\[NoMatchError\] No image profile found"):
            profile_update(host, BUNDLE, "ESXi-9.9-standard")

        wait_task(host.EnterMaintenanceMode_Task(timeout=60), "enter maintenance")
        done = profile_update(host, BUNDLE, NEW_PROFILE)
        assert done.reboot_required
        assert sorted(done.installed) == sorted(
            [
                f"VMware_bootbank_esx-base_{NEW_BASE}",
                f"MEL_bootbank_nmlx5-core_{NMLX_NEW}",
                f"MEL_bootbank_nmlx5-rdma_{NMLX_NEW}",
            ]
        )
        assert host.config.product.build == "19193900"  # the new image runs after the reboot
        reboot_host(host, H1, lambda t, what: wait_task(t, what), expect_active=[], timeout=120)
        assert (host.config.product.version, host.config.product.build) == ("7.0.3", "19482537")
        build, vibs = _facts(si, host)
        assert build == "Releasebuild-19482537" and vibs["esx-base"][0] == NEW_BASE
        assert vibs["nmlx5-core"] == (NMLX_NEW, "MEL")

        # Rolling back needs --allow-downgrades: without it ESXi skips the older esx-base.
        kept = profile_update(host, OLD_BUNDLE, OLD_PROFILE)
        assert not kept.reboot_required and kept.skipped == [f"VMware_bootbank_esx-base_{OLD_BASE}"]
        back = profile_update(host, OLD_BUNDLE, OLD_PROFILE, allow_downgrades=True)
        assert back.installed == [f"VMware_bootbank_esx-base_{OLD_BASE}"]
        reboot_host(host, H1, lambda t, what: wait_task(t, what), expect_active=[], timeout=120)
        assert host.config.product.build == "19193900"
        # vib update adds nothing new: the other host has no MEL VIBs to update, only VMW's.
        other = hosts_of(si)[H2]
        untouched = vib_update(other, OLD_BUNDLE)
        assert untouched.installed == [] and untouched.message == "Host is not changed."


def test_vmwares_esxcli_runs_the_profile_update(rack_twin, tmp_path: Path):
    """The judge: VMware's esxcli parses the twin's published `software profile update` and
    prints ESXi's refusal and result."""
    lab = rack_twin(LAB, desc={"depots": DEPOTS})
    args = ["software", "profile", "update", "-d", BUNDLE, "-p", NEW_PROFILE]
    code, text = esxcli_one(lab, H2, args, tmp_path / "a")
    assert code != 0 and "[MaintenanceModeError]" in text
    with lab.connect() as si:
        wait_task(hosts_of(si)[H2].EnterMaintenanceMode_Task(timeout=60), "enter maintenance")
    code, text = esxcli_one(lab, H2, args, tmp_path / "b")
    assert code == 0, text
    assert "Reboot Required: true" in text and f"MEL_bootbank_nmlx5-core_{NMLX_NEW}" in text
    code, text = esxcli_one(lab, H2, ["software", "vib", "update", "-d", BUNDLE], tmp_path / "c")
    assert code == 0 and "Host is not changed." in text, text


def test_the_upgrades_port_on_baselines_moves_the_vgpu_manager_through_esxcli(rack_twin):
    """VlcmHostImage on a cluster managed by baselines: current() from esxcli; apply() installs
    the spec's vGPU manager bundle (the reboot is the roll's); anything else is one line
    saying the cluster needs an image."""
    from pyVim.task import WaitForTask

    from provision.host_image import HostImageError
    from provision.host_image_port import VlcmHostImage

    manager = "/vmfs/volumes/lab-ds/NVD-AIE_ESXi_7.0.2_Driver_535.161.05.zip"
    vgpu = _vib("NVD-AIE_ESXi_7.0.2_Driver", "535.161.05-1OEM.702.0.0.17630552", "NVD")
    lab = rack_twin(
        LAB,
        desc={"depots": [*DEPOTS, {"path": manager, "vibs": [vgpu]}]},
        edit=lambda d: d.setdefault("host_software", {"vgpu_manager": {"depot": manager}}),
    )
    name = lab.spec.hosts[0].name
    port = VlcmHostImage(lab.spec, timeout_s=60)
    before = port.current(name)
    assert before["esxi"] == "7.0.3" and before.get("vgpu_manager") != "535.161.05"
    with lab.connect() as si:
        WaitForTask(hosts_of(si)[lab.spec.hosts[0].address].EnterMaintenanceMode_Task(timeout=0))
    port.apply(name, {"esxi": "7.0.3", "vgpu_manager": "535.161.05"})
    assert port.current(name)["vgpu_manager"] == "535.161.05"
    with pytest.raises(HostImageError) as refused:
        port.apply(name, {"esxi": NEW_BASE})
    assert "managed by baselines" in str(refused.value) and "\n" not in str(refused.value)
