"""Installing the NVIDIA vGPU manager VIB from the spec's depot, as NVIDIA's vGPU guide does it.

Maintenance mode, `esxcli software vib install -d <bundle>`, reboot: the planner plans it
where host_software.vgpu_manager.depot names the bundle, the twin refuses as ESXi does (not
in maintenance mode, a bundle it cannot read), and after provision the host runs the manager
and the VMs their vGPUs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from provision.planner import plan
from rackcert.core.errors import SpecError
from rackcert.core.observed import EsxcliHost, EsxcliVib
from rackcert.core.spec_loader import load_spec
from tests.support.discover_helpers import inventory_of, spec_of
from tests.support.spec_helpers import example_data, write_spec
from tests.support.vgpu_manager_install import DEPOT, H2, HGX, MANAGER


def _data(depot: str | None = DEPOT) -> dict[str, Any]:
    data = example_data(HGX)
    for tmpl in data["vm_templates"]:
        tmpl["source"] = None  # the pure planner tests: no template to find
    if depot:
        data["host_software"] = {"vgpu_manager": {"depot": depot}}
    return data


def _plan_without_manager(esxcli: EsxcliHost | None = None, *, reboot_pending: bool = False):
    spec = spec_of(_data())
    inventory = inventory_of(spec)
    host = inventory.hosts[1]
    # Provisioned but for the manager: ATS on, devices in passthrough, Shared Direct.
    host.ats_enabled = host.ats_runtime = True
    host.graphics_type = "sharedDirect"
    for dev in host.pci_devices:
        dev.passthru_enabled = dev.passthru_active = dev.passthru_capable
    host.vgpu_types, host.esxcli, host.reboot_required = [], esxcli, reboot_pending
    return [a for a in plan(spec, inventory) if a.host == H2 and a.kind.startswith("host.")]


def test_a_named_depot_plans_the_install_then_a_reboot():
    actions = _plan_without_manager()
    assert [a.kind for a in actions] == ["host.vgpu_manager", "host.reboot"]
    install = actions[0]
    assert install.blocked is None and install.params["depot"] == DEPOT
    assert install.change.endswith(f"install the NVIDIA vGPU manager from {DEPOT}")
    assert actions[1].reason == "the NVIDIA vGPU manager VIB: in effect only after a reboot"


def test_an_installed_manager_waiting_for_its_boot_plans_only_the_reboot():
    vib = EsxcliVib(name=MANAGER["name"], version=MANAGER["version"], vendor="NVD")
    answered = EsxcliHost(answered=True, vibs=[vib])
    actions = _plan_without_manager(answered, reboot_pending=True)
    assert [a.kind for a in actions] == ["host.reboot"]
    # Running it, and still no profile: nothing to install, a finding to look into.
    actions = _plan_without_manager(answered, reboot_pending=False)
    assert actions[0].kind == "host.vgpu_manager"
    assert actions[0].blocked is not None
    assert actions[0].blocked.startswith(f"the host runs {MANAGER['name']} {MANAGER['version']}")


@pytest.mark.parametrize("depot", ["NVD-AIE.zip", "/vmfs/volumes/ds/driver.vib", "ftp://x/y.zip"])
def test_a_depot_esxcli_cannot_read_is_one_line_with_where(tmp_path, depot):
    path = write_spec(tmp_path, _data(depot))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert "\n" not in message
    assert re.match(rf"^{re.escape(str(path))}:\d+: host_software\.vgpu_manager\.depot: ", message)
    assert "absolute .zip path on the host (/vmfs/volumes/...) or a depot URL" in message
