"""gpu.vgpu.branch: a vGPU guest's driver is of its host's vGPU manager branch.

The guest side is the fake nvidia-smi of an HGX partition VM (tests/support/fakes, NVIDIA's `-q`
layout); the host side is what discovery recorded from esxcli `software vib list`, built here
as discovery records it, and read from the twin's hosts (ESXi 8.0: vGPU 17.x, R550; ESXi 7.0:
vGPU 16.x, R535) through a real `rackcert plan`.
"""

from __future__ import annotations

from rackcert.core.observed import EsxcliHost, EsxcliVib, Inventory
from rackcert.core.spec_loader import load_spec
from tests.support.discover_helpers import inventory_of
from tests.support.vgpu_branch import HGX, R535, R550
from validation.checks.match import driver_branch as branch
from validation.expect import VgpuManager
from validation.host_software import vgpu_manager


def test_branch_is_the_major_number():
    assert branch("550.127.05") == "R550"
    assert branch(R535) == "R535"
    assert branch("") == "" and branch("N/A") == ""


def _inventory(esxcli: EsxcliHost | None) -> tuple[Inventory, object]:
    spec = load_spec(HGX).spec
    inventory = inventory_of(spec)
    for host in inventory.hosts:
        host.esxcli = esxcli
    return inventory, spec


def test_the_managers_vib_is_read_from_esxclis_vib_list():
    vibs = [
        EsxcliVib(name="esx-base", version="8.0.3-0.20.24022510", vendor="VMware"),
        EsxcliVib(name="NVD-AIE-800_ESXi_8.0.0_Driver", version=R550, vendor="NVD"),
    ]
    inventory, spec = _inventory(EsxcliHost(answered=True, vibs=vibs))
    assert vgpu_manager(spec, inventory, "hgx01") == VgpuManager(
        host="hgx01", answered=True, version=R550
    )
    inventory, spec = _inventory(EsxcliHost(answered=True, vibs=vibs[:1]))
    assert vgpu_manager(spec, inventory, "hgx01") == VgpuManager(host="hgx01", answered=True)
    inventory, spec = _inventory(EsxcliHost(answered=False, error="no esxcli answer (fault)"))
    manager = vgpu_manager(spec, inventory, "hgx01")
    assert manager is not None and not manager.answered and manager.why.endswith("(fault)")
    inventory, spec = _inventory(None)
    assert vgpu_manager(spec, inventory, "hgx01") is None
