"""RetrievePropertiesEx pages like a real vCenter; discovery follows (and survives) them."""

from __future__ import annotations

from provision.discovery import discover

R750 = "inventories/r750xa-4node.yaml"


def test_twin_honours_max_objects_and_its_own_page_limit(rack_twin):
    from pyVmomi import vim, vmodl

    lab = rack_twin(R750, desc={"page_size": 5})
    with lab.connect() as si:
        content = si.content
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        pc = vmodl.query.PropertyCollector
        spec = pc.FilterSpec(
            objectSet=[
                pc.ObjectSpec(
                    obj=view,
                    skip=True,
                    selectSet=[pc.TraversalSpec(path="view", type=vim.view.ContainerView)],
                )
            ],
            propSet=[pc.PropertySpec(type=vim.HostSystem, pathSet=["name"])],
        )
        first = content.propertyCollector.RetrievePropertiesEx(
            [spec], pc.RetrieveOptions(maxObjects=3)
        )
        assert len(first.objects) == 3 and first.token
        rest = content.propertyCollector.ContinueRetrievePropertiesEx(first.token)
        assert len(rest.objects) == 1 and not rest.token
        view.DestroyView()


def test_discovery_follows_pages_and_restarts_after_a_drop(rack_twin):
    # 4 hosts + 3 vCLS VMs = 7 objects in pages of 3; the first continuation drops.
    lab = rack_twin(
        R750,
        desc={"page_size": 3},
        faults={"drop": [{"method": "ContinueRetrievePropertiesEx", "count": 1}]},
    )
    with lab.connect() as si:
        inv = discover(si)
    assert len(inv.hosts) == 4 and len(inv.vms) == 3
    # the view holds hosts, VMs (templates too), datastores and port groups
    stores = {d for h in inv.hosts for d in h.datastores}
    networks = {n for h in inv.hosts for n in h.networks}
    objects = len(inv.hosts) + len(inv.vms) + len(inv.templates) + len(stores) + len(networks)
    assert inv.pages == -(-objects // 3) > 1, objects
    assert all(h.ats_enabled is False and h.ats_option_type == "bool" for h in inv.hosts)


def test_round_trips_grow_with_pages_only(rack_twin):
    lab = rack_twin(R750, hosts=40, desc={"page_size": 20})
    with lab.connect() as si:
        inv = discover(si)
    assert len(inv.hosts) == 40 and inv.pages == 5  # 83 objects
    assert inv.round_trips == 4 + inv.pages
