"""ATS as ESXi 7.0.3 has it: read per host, typed as the host declares, in effect after a boot."""

from __future__ import annotations

import pytest

from provision.discovery import discover
from tests.support.vsphere_helpers import cli, error_line, plan_json, read_hosts

LAB = "inventories/lab.yaml"
ESX1, ESX2 = "lab-esx01.lab.internal", "lab-esx02.lab.internal"


def _options(lab, host_name):
    from pyVmomi import vim

    si_cm = lab.connect()
    si = si_cm.__enter__()
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
    host = next(h for h in view.view if h.name == host_name)
    return si_cm, host.configManager.advancedOption


def test_twin_options_fault_like_esxi(rack_twin):
    from pyVmomi import vim

    lab = rack_twin(LAB, host_desc={ESX2: {"ats_option": False}})
    cm, options = _options(lab, ESX1)
    try:
        with pytest.raises(vim.fault.InvalidName):
            options.UpdateOptions(changedValue=[vim.option.OptionValue(key="No.Such.opt", value=1)])
        with pytest.raises(vmodl_fault("InvalidArgument")):
            bad = vim.option.OptionValue(key="VMkernel.Boot.atsSupport", value="TRUE")
            options.UpdateOptions(changedValue=[bad])
        assert options.QueryOptions("VMkernel.Boot.atsSupport")[0].value is False
    finally:
        cm.__exit__(None, None, None)
    cm, options = _options(lab, ESX2)
    try:
        with pytest.raises(vim.fault.InvalidName):
            options.QueryOptions("VMkernel.Boot.atsSupport")
    finally:
        cm.__exit__(None, None, None)


def vmodl_fault(name):
    from pyVmomi import vmodl

    return getattr(vmodl.fault, name)


def test_a_build_without_the_option_gets_a_blocked_action_not_a_reboot_every_run(rack_twin, capsys):
    lab = rack_twin(LAB, host_desc={ESX2: {"ats_option": False}}, guests=True)
    with lab.connect() as si:
        inv = discover(si)
    assert inv.host(ESX2).ats_option_type == "" and inv.host(ESX2).ats_enabled is None
    assert inv.host(ESX1).ats_option_type == "bool"
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1
    assert "esxcli system settings kernel set -s atsSupport -v TRUE" in error_line(err)
    hosts = read_hosts(lab)
    assert hosts[ESX1]["ats"] is True and hosts[ESX2]["ats"] is None
    again = plan_json(lab, capsys)["actions"]
    # only the blocked ATS action is left: no reboot planned for an option that is not there
    assert [(a["kind"], a["target"]) for a in again] == [("host.ats", ESX2)]
    assert "esxcli system settings kernel set" in again[0]["blocked"]


def test_the_declared_type_is_what_gets_written(rack_twin, capsys):
    lab = rack_twin(LAB, host_desc={"*": {"ats_type": "string"}}, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    assert {h["ats"] for h in read_hosts(lab).values()} == {"TRUE"}
    assert plan_json(lab, capsys)["actions"] == []


def test_ats_counts_as_in_effect_only_after_a_boot(rack_twin):
    from pyVmomi import vim

    from validation.hypervisor_results import hypervisor_results

    lab = rack_twin(LAB)
    cm, options = _options(lab, ESX1)
    try:
        on = vim.option.OptionValue(key="VMkernel.Boot.atsSupport", value=True)
        options.UpdateOptions(changedValue=[on])
    finally:
        cm.__exit__(None, None, None)
    with lab.connect() as si:
        inv = discover(si)
    assert inv.host(ESX1).ats_enabled is True and inv.host(ESX1).reboot_required
    results = {(r.node, r.id): r for r in hypervisor_results(lab.spec, inv)}
    ats = results[("lab-esx01", "hv.host.ats")]
    assert ats.status == "fail" and "reboot pending" in ats.observed
