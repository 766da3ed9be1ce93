"""Item 4 of the twin's conformance: ATS in effect as ESXi says it (esxcli's Runtime column).

`esxcli system settings kernel list -o atsSupport` shows Configured and Runtime; Runtime
changes only at a reboot. vCenter clients reach it through the host's
RetrieveManagedMethodExecuter / ExecuteSoap, as `govc host.esxcli` does. rackcert's plan and
its hv.host.ats check judge the Runtime value: a reboot is planned only when ATS as the host runs
it is not what the spec wants, never because summary.rebootRequired is true for another reason
(an operator's same-value option write; VIB installs set it too). A host that does not answer
esxcli keeps the API's inference, and the record says so.
"""

from __future__ import annotations

from typing import Any

from provision.discovery import discover
from provision.esxcli import kernel_setting
from tests.support.twin_judges import find, task_fault
from tests.support.vsphere_helpers import cli, last_record, plan_json

LAB = "inventories/lab.yaml"
ESX1, ESX2 = "lab-esx01.lab.internal", "lab-esx02.lab.internal"
ATS = "VMkernel.Boot.atsSupport"


def _write_ats(lab: Any, host_name: str, value: bool) -> None:
    """What an operator does in the vSphere Client (Advanced System Settings): one option write."""
    from pyVmomi import vim

    with lab.connect() as si:
        host = find(si, vim.HostSystem, host_name)
        option = vim.option.OptionValue(key=ATS, value=value)
        host.configManager.advancedOption.UpdateOptions(changedValue=[option])


def _row(lab: Any, host_name: str) -> Any:
    from pyVmomi import vim

    with lab.connect() as si:
        return kernel_setting(si, find(si, vim.HostSystem, host_name)._moId, "atsSupport")


def test_esxcli_runtime_changes_only_at_a_reboot(rack_twin):
    from pyVmomi import vim

    lab = rack_twin(LAB)
    row = _row(lab, ESX1)
    assert (row.configured, row.runtime) == ("FALSE", "FALSE")
    _write_ats(lab, ESX1, True)
    row = _row(lab, ESX1)
    assert (row.configured, row.runtime) == ("TRUE", "FALSE")  # the next boot's value only
    with lab.connect() as si:
        host = find(si, vim.HostSystem, ESX1)
        assert task_fault(host.EnterMaintenanceMode_Task(timeout=0)) is None
        assert task_fault(host.RebootHost_Task(force=False)) is None
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = _row(lab, ESX1)
        if row is not None and row.runtime == "TRUE":
            break
        time.sleep(0.2)
    assert (row.configured, row.runtime) == ("TRUE", "TRUE")


def test_configured_but_not_running_is_planned_as_a_reboot_and_judged(rack_twin, capsys):
    from validation.hypervisor_results import hypervisor_results

    lab = rack_twin(LAB)
    _write_ats(lab, ESX1, True)
    with lab.connect() as si:
        inv = discover(si)
    host = inv.host(ESX1)
    assert (host.ats_enabled, host.ats_runtime) == (True, False)
    assert host.ats_runtime_source.startswith("esxcli")
    results = {(r.node, r.id): r for r in hypervisor_results(lab.spec, inv)}
    ats = results[("lab-esx01", "hv.host.ats")]
    assert ats.status == "fail" and "Runtime FALSE" in ats.observed
    actions = plan_json(lab, capsys)["actions"]
    mine = [a for a in actions if a["target"] == ESX1 and a["kind"].startswith("host.")]
    assert "host.ats" not in [a["kind"] for a in mine]  # configured already
    reboot = next(a for a in mine if a["kind"] == "host.reboot")
    assert "Runtime FALSE" in reboot["reason"]


def test_a_same_value_option_write_plans_no_reboot(rack_twin, capsys):
    """An operator writes atsSupport=true again: rebootRequired, but ATS runs; nothing to do."""
    from validation.hypervisor_results import hypervisor_results

    lab = rack_twin(LAB, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    _write_ats(lab, ESX1, True)
    with lab.connect() as si:
        inv = discover(si)
    host = inv.host(ESX1)
    assert host.reboot_required is True
    assert (host.ats_runtime, host.ats_runtime_source) == (
        True,
        "esxcli (Configured TRUE, Runtime TRUE)",
    )
    assert plan_json(lab, capsys)["actions"] == []  # no reboot of esx01, no power-cycles
    results = {(r.node, r.id): r for r in hypervisor_results(lab.spec, inv)}
    assert results[("lab-esx01", "hv.host.ats")].status == "pass"


def test_a_host_without_esxcli_keeps_the_inference_and_says_so(rack_twin, capsys):
    lab = rack_twin(LAB, host_desc={ESX1: {"no_esxcli": True}}, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    assert _row(lab, ESX1) is None and _row(lab, ESX2) is not None
    _write_ats(lab, ESX1, True)
    _write_ats(lab, ESX2, True)
    actions = plan_json(lab, capsys)["actions"]
    # esx02 answers esxcli: ATS runs, nothing to do. esx01 does not: a pending reboot is
    # taken at its word, as before.
    assert [(a["kind"], a["target"]) for a in actions if a["kind"] == "host.reboot"] == [
        ("host.reboot", ESX1)
    ]
    with lab.connect() as si:
        inv = discover(si)
    assert inv.host(ESX1).ats_runtime is None
    assert "did not answer esxcli" in inv.host(ESX1).ats_runtime_source
    record = last_record(lab, "provision")
    hosts = {h["name"]: h for h in record["data"]["observed_after"]["hosts"]}
    assert hosts[ESX2]["ats_runtime"] is True
