"""VMware's own esxcli against the rack twin, through vCenter, on every host (issue 38).

An operator rehearsing their ESXi scripts runs `esxcli -r https://VC/sdk -h <host> ...`
(PyPI's vmware-esxcli, its own pyVmomi, its own virtual environment). The client finds the host
with SearchIndex.FindByIp, then FindByDnsName; reads the host's DynamicTypeManager (esxcli's
managed objects and their vmodl.reflect types) and the CLI info objects; then runs each command
with ExecuteSoap. Every served namespace runs on every host of the r750xa twin before and after
`rackcert provision` and after a host reboot, and its answers must agree with the vSphere API
view of the same host and with what rackcert recorded. One twin for the module; each host's
commands run as one esxcli batch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rackcert.core.observed import Inventory
from rackcert.lab import twin
from rackcert.lab.guest_agent import tools_rpc
from tests.support.esxcli_judge import READS, esxcli_batch, esxcli_one
from tests.support.plugins.vcsim import TwinFactory
from tests.support.twin_judges import find, task_fault
from tests.support.vsphere_helpers import cli, last_record
from validation.hypervisor_results import hypervisor_results

SPEC = "inventories/r750xa-4node.yaml"
ATS = "VMkernel.Boot.atsSupport"
LAB_RANGE = "198.18."  # hostidentity.go: management vmknics of hosts known by DNS name


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, vcsim_binary: Path) -> Iterator[Any]:
    factory = TwinFactory(tmp_path_factory.mktemp("esxcli"))
    try:
        yield factory(SPEC)
    finally:
        factory.stop_all()
    panics = factory.unexpected_panics()
    if panics:
        pytest.fail(f"the twin's SOAP handler panicked {len(panics)} time(s): {panics[0]}")


def api_view(lab: Any) -> dict[str, dict[str, Any]]:
    """What the vSphere API says of each host, in the terms esxcli answers in."""
    from pyVmomi import vim

    out: dict[str, dict[str, Any]] = {}
    with lab.connect() as si:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        for host in view.view:
            passthru = {p.id: p for p in host.config.pciPassthruInfo}
            options = host.configManager.advancedOption.QueryOptions(ATS)
            dns = host.config.network.dnsConfig
            out[host.name] = {
                "moid": host._moId,
                "version": host.config.product.version,
                "build": host.config.product.build,
                "ats": bool(options[0].value),
                "pci": {d.id: d for d in host.hardware.pciDevice},
                "passthru": passthru,
                "gpus": sorted(d.id for d in host.hardware.pciDevice if d.classId >> 8 == 0x03),
                "nic_ports": sorted(
                    d.id for d in host.hardware.pciDevice if d.classId >> 8 == 0x02
                ),
                "vgpu_types": list(host.config.sharedPassthruGpuTypes or []),
                "disks": {
                    lun.canonicalName: lun.vStorageSupport
                    for lun in host.config.storageDevice.scsiLun
                    if lun.lunType == "disk"
                },
                "fqdn": f"{dns.hostName}.{dns.domainName}" if dns.domainName else dns.hostName,
                "vmk0": next(v.spec.ip.ipAddress for v in host.config.network.vnic),
                "uuid": host.hardware.systemInfo.uuid,
                "boot": host.runtime.bootTime,
            }
        view.DestroyView()
    return out


def read_all(lab: Any, tmp: Path, vihost: str) -> dict[str, Any]:
    """Every served namespace on one host, one esxcli batch; a command that failed fails here."""
    answers = esxcli_batch(lab, vihost, list(READS.values()), tmp / vihost)
    failed = [(a.command, a.error) for a in answers if a.error]
    assert not failed, f"esxcli -h {vihost}: {failed}"
    return {key: a.value for key, a in zip(READS, answers, strict=True)}


def assert_agrees(name: str, esx: dict[str, Any], api: dict[str, Any]) -> None:
    """esxcli's answers and the API view are one host model."""
    assert esx["version"] == {
        "Product": "VMware ESXi",
        "Version": api["version"],
        "Build": f"Releasebuild-{api['build']}",
        "Update": api["version"].split(".")[2],
        "Patch": "20",
    }, name
    (kernel,) = [row for row in esx["kernel"] if row["Name"] == "atsSupport"]
    assert kernel["Configured"] == ("TRUE" if api["ats"] else "FALSE"), name
    pci = {row["Address"]: row for row in esx["pci"]}
    assert set(pci) == set(api["pci"]), name
    for pid, dev in api["pci"].items():
        row, p = pci[pid], api["passthru"][pid]
        assert int(row["VendorID"], 16) == dev.vendorId & 0xFFFF, (name, pid)
        assert int(row["DeviceID"], 16) == dev.deviceId & 0xFFFF, (name, pid)
        assert row["ConfiguredOwner"] == ("VM Passthru" if p.passthruEnabled else "VMkernel")
        assert row["CurrentOwner"] == ("VM Passthru" if p.passthruActive else "VMkernel")
    assert {r["DeviceID"]: r["Enabled"] for r in esx["passthru"]} == {
        pid: p.passthruEnabled for pid, p in api["passthru"].items() if p.passthruCapable
    }, name
    assert sorted(r["DeviceID"] for r in esx["graphics"]) == api["gpus"], name
    assert all(r["VendorName"] == "NVIDIA Corporation" for r in esx["graphics"])
    # A GPU kept by the VMkernel is driven by the vGPU manager; one in passthrough by none.
    manager = bool(api["vgpu_types"])
    assert {r["DeviceID"]: r["ModuleName"] for r in esx["graphics"]} == {
        gpu: "nvidia" if manager and not api["passthru"][gpu].passthruActive else "None"
        for gpu in api["gpus"]
    }, name
    kept = [pid for pid in api["nic_ports"] if not api["passthru"][pid].passthruActive]
    assert sorted(r["PCIDevice"] for r in esx["nics"]) == kept, name
    # RDMA: only what the host itself claims; a NIC given to VMs is not the host's.
    uplinks = {r["Name"]: r["PCIDevice"] for r in esx["nics"]}
    assert sorted(uplinks[r["PairedUplink"]] for r in esx["rdma"]) == kept, name
    words = {"vStorageSupported": "supported", "vStorageUnsupported": "unsupported"}
    assert {r["Device"]: r["ATSStatus"] for r in esx["vaai"]} == {
        disk: words.get(support, "unknown") for disk, support in api["disks"].items()
    }, name
    vibs = {r["Name"]: r for r in esx["vibs"]}
    assert vibs["esx-base"]["Version"].endswith(api["build"]), name
    assert {"nmlx5-core", "nmlx5-rdma"} <= set(vibs), name  # the rack's ConnectX-6
    # The vGPU manager VIB is there exactly where the host offers vGPU profiles.
    assert ("NVD-AIE_ESXi_7.0.2_Driver" in vibs) == bool(api["vgpu_types"]), name


def test_hosts_are_found_the_way_vcenter_finds_them(lab: Any):
    """DNS configuration and vmk0 match the inventory name; SearchIndex finds each host."""
    view = api_view(lab)
    assert set(view) == {h.address for h in lab.spec.hosts}
    with lab.connect() as si:
        index = si.RetrieveContent().searchIndex
        for name, host in view.items():
            assert host["fqdn"] == name
            assert host["vmk0"].startswith(LAB_RANGE)
            assert index.FindByDnsName(dnsName=name, vmSearch=False)._moId == host["moid"]
            assert index.FindByDnsName(dnsName=name.upper(), vmSearch=False)._moId == host["moid"]
            assert index.FindByIp(ip=host["vmk0"], vmSearch=False)._moId == host["moid"]
            assert index.FindByUuid(uuid=host["uuid"], vmSearch=False)._moId == host["moid"]
            assert [h._moId for h in index.FindAllByDnsName(dnsName=name, vmSearch=False)] == [
                host["moid"]
            ]
        assert len({h["vmk0"] for h in view.values()}) == len(view)
        assert index.FindByIp(ip="127.0.0.1", vmSearch=False) is None
        assert index.FindByDnsName(dnsName="localhost.localdomain", vmSearch=False) is None
        assert index.FindByDnsName(dnsName="esx01", vmSearch=False) is None  # not the FQDN


def test_esxcli_answers_every_namespace_on_every_host_before_provision(lab: Any, tmp_path: Path):
    view = api_view(lab)
    for name, api in view.items():
        esx = read_all(lab, tmp_path, name)
        assert_agrees(name, esx, api)
        assert esx["kernel"][0]["Runtime"] == "FALSE"
        assert all(r["Enabled"] is False for r in esx["passthru"])
        assert len(esx["rdma"]) == len(api["nic_ports"]) == 2
    # By the management address too (esxcli asks FindByIp first).
    some = next(iter(view.values()))
    code, out = esxcli_one(lab, some["vmk0"], ["system", "version", "get"], tmp_path / "ip")
    assert code == 0 and f"Build: Releasebuild-{some['build']}" in out, out


def test_esxcli_refuses_what_esxi_refuses(lab: Any, tmp_path: Path):
    host = lab.spec.hosts[0].address
    code, out = esxcli_one(lab, "esx99.example.internal", ["system", "version", "get"], tmp_path)
    assert code == 1 and "Cannot find ESX host esx99.example.internal on vCenter" in out
    answers = esxcli_batch(
        lab,
        host,
        [
            "system frobnicate get",
            "system version list",
            "system version get --verbose",
            "system settings kernel set -s noSuchSetting -v TRUE",
            "system settings kernel set -s atsSupport -v maybe",
            "hardware pci pcipassthru set -d 0000:99:00.0 -e true",
            "storage core device vaai status get -d naa.000000000000000000000000000000",
        ],
        tmp_path / "refusals",
    )
    errors = [a.error for a in answers]
    assert all(errors), [a.value for a in answers]
    assert errors[0].startswith("Unknown command or namespace system frobnicate get")
    assert errors[1].startswith("Unknown command or namespace system version list")
    assert errors[2].startswith("Invalid option --verbose")
    assert errors[3] == "Invalid Key Name: noSuchSetting"
    assert errors[4].startswith("Invalid value for setting atsSupport: maybe")
    assert errors[5] == "Device 0000:99:00.0 not found"
    assert errors[6] == "Unknown device naa.000000000000000000000000000000"


def _execute_soap_fault(lab: Any, host_name: str, moid: str, method: str, args: str) -> str:
    """A raw ExecuteSoap, the way govc's executor sends it: the fault's detail type, or ''."""
    from provision.esxcli import _post  # the hand-written SOAP path rackcert keeps

    with lab.connect() as si:
        from pyVmomi import vim

        host = find(si, vim.HostSystem, host_name)
        executer = _post(
            si,
            '<RetrieveManagedMethodExecuter xmlns="urn:vim25">'
            f'<_this type="HostSystem">{host._moId}</_this></RetrieveManagedMethodExecuter>',
        )
        result = _post(
            si,
            '<ExecuteSoap xmlns="urn:vim25">'
            f'<_this type="ReflectManagedMethodExecuter">{executer.text}</_this>'
            f"<moid>{moid}</moid><version>urn:vim25/5.0</version><method>{method}</method>"
            f"{args}</ExecuteSoap>",
        )
    detail = result.findtext("{urn:vim25}fault/{urn:vim25}faultDetail") or ""
    return detail.split('xsi:type="', 1)[1].split('"', 1)[0] if detail else ""


def test_execute_soap_faults_like_hostd(lab: Any):
    """Callers that skip discovery (govc's executor) get vmodl faults for bad calls."""
    host = lab.spec.hosts[0].address
    kernel = "ha-cli-handler-system-settings-kernel"
    option = (
        "<argument><name>option</name><val>&lt;option&gt;atsSupport&lt;/option&gt;</val></argument>"
    )
    bogus = "<argument><name>bogus</name><val>&lt;bogus&gt;1&lt;/bogus&gt;</val></argument>"
    assert (
        _execute_soap_fault(lab, host, kernel, "vim.EsxCLI.system.settings.kernel.list", option)
        == ""
    )
    assert (
        _execute_soap_fault(lab, host, "ha-cli-handler-no-such", "vim.EsxCLI.no.such.list", "")
        == "ManagedObjectNotFound"
    )
    assert (
        _execute_soap_fault(lab, host, kernel, "vim.EsxCLI.system.settings.kernel.frob", "")
        == "MethodNotFound"
    )
    assert (
        _execute_soap_fault(lab, host, kernel, "vim.EsxCLI.system.settings.kernel.list", bogus)
        == "InvalidRequest"
    )
    assert (
        _execute_soap_fault(lab, host, kernel, "vim.EsxCLI.system.settings.kernel.set", "")
        == "InvalidRequest"
    )


def test_esxcli_and_the_api_change_one_host_model(lab: Any, tmp_path: Path):
    """passthru set shows in config.pciPassthruInfo and back; kernel set is Configured only."""
    from pyVmomi import vim

    name = lab.spec.hosts[3].address
    gpu = api_view(lab)[name]["gpus"][0]
    answers = esxcli_batch(
        lab,
        name,
        [
            f"hardware pci pcipassthru set -d {gpu} -e true",
            "system settings kernel set -s atsSupport -v TRUE",
            "system settings kernel list -o atsSupport",
        ],
        tmp_path / "set",
    )
    assert [a.error for a in answers] == ["", "", ""]
    assert answers[2].value[0]["Configured"] == "TRUE" and answers[2].value[0]["Runtime"] == "FALSE"
    with lab.connect() as si:
        host = find(si, vim.HostSystem, name)
        info = {p.id: p for p in host.config.pciPassthruInfo}
        assert (info[gpu].passthruEnabled, info[gpu].passthruActive) == (True, False)
        assert host.summary.rebootRequired is True
        assert host.configManager.advancedOption.QueryOptions(ATS)[0].value is True
        # The reverse: the API turns it off again; esxcli sees it.
        off = vim.host.PciPassthruConfig(id=gpu, passthruEnabled=False)
        host.configManager.pciPassthruSystem.UpdatePassthruConfig([off])
        host.configManager.advancedOption.UpdateOptions(
            changedValue=[vim.option.OptionValue(key=ATS, value=False)]
        )
    esx = read_all(lab, tmp_path, name)
    assert {r["DeviceID"]: r["Enabled"] for r in esx["passthru"]}[gpu] is False
    assert esx["kernel"][0]["Configured"] == "FALSE"
    assert_agrees(name, esx, api_view(lab)[name])


def test_esxcli_agrees_with_rackcerts_record_after_provision_and_a_reboot(
    lab: Any, tmp_path: Path, capsys
):
    from pyVmomi import vim

    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    # No guest boots in this twin (no guest agent): only the VMs' waits are left undone.
    record = last_record(lab, "provision")
    assert code != 0 and "did not answer after power-on" in err
    assert {s["kind"] for s in record["data"]["skipped"]} == {"vm.wait"}
    observed = {h["name"]: h for h in record["data"]["observed_after"]["hosts"]}
    view = api_view(lab)
    for name, api in view.items():
        esx = read_all(lab, tmp_path / "after", name)
        assert_agrees(name, esx, api)
        seen = observed[name]
        assert esx["version"]["Build"] == f"Releasebuild-{seen['esxi_build']}"
        assert esx["kernel"][0]["Runtime"] == ("TRUE" if seen["ats_runtime"] else "FALSE") == "TRUE"
        enabled = {r["DeviceID"]: r["Enabled"] for r in esx["passthru"]}
        assert enabled == {
            d["id"]: d["passthru_enabled"] for d in seen["pci_devices"] if d["passthru_capable"]
        }
        # What the spec gives to VMs is no longer the host's: no vmnic, no RDMA device.
        given = {d["id"] for d in seen["pci_devices"] if d["passthru_active"]}
        assert given and not given & {r["PCIDevice"] for r in esx["nics"]}
        uplinks = {r["Name"]: r["PCIDevice"] for r in esx["nics"]}
        assert not given & {uplinks[r["PairedUplink"]] for r in esx["rdma"]}
        # rackcert's own esxcli reads (its hand-written SOAP) agree with VMware's client.
        facts = seen["esxcli"]
        assert facts["answered"] is True and facts["build"] == esx["version"]["Build"]
        assert [(v["name"], v["version"]) for v in facts["vibs"]] == [
            (r["Name"], r["Version"]) for r in esx["vibs"]
        ]
        assert {d["device"]: d["ats_status"] for d in facts["vaai"]} == {
            r["Device"]: r["ATSStatus"] for r in esx["vaai"]
        }
        assert facts["passthru"] == enabled
    # Validate judges the recorded esxcli view; the report keeps build and driver VIBs.
    inventory = Inventory.model_validate(record["data"]["observed_after"])
    results = {(r.id, r.node): r for r in hypervisor_results(lab.spec, inventory)}
    for h in lab.spec.hosts:
        assert results[("hv.host.esxcli_passthrough", h.name)].status == "pass", h.name
        vaai = results[("hv.host.vaai_ats", h.name)]
        assert vaai.status == "pass" and "ATS unsupported" in vaai.observed
    run_dir = sorted(lab.runs_dir.glob("*/*/provision.json"))[-1].parent
    code, _, err = cli(lab, capsys, "report", str(run_dir), "--format", "json")
    assert code == 0, err
    hosts = {
        h["name"]: h for h in json.loads((run_dir / "run.json").read_text())["hardware"]["hosts"]
    }
    for name in view:
        assert hosts[name]["esxcli"] == "answered"
        assert hosts[name]["esxcli_build"] == f"Releasebuild-{observed[name]['esxi_build']}"
        assert any(v.startswith("nmlx5-core ") for v in hosts[name]["driver_vibs"])
        assert not any(v.startswith("esx-base ") for v in hosts[name]["driver_vibs"])
    # Guests report through Tools; with vmSearch the index finds the VM by its guest name and IP.
    vm_spec = lab.spec.vms[0]
    with lab.connect() as si:
        index = si.RetrieveContent().searchIndex
        vm = find(si, vim.VirtualMachine, vm_spec.name)
        assert index.FindByIp(ip=vm_spec.address, vmSearch=True) is None  # no Tools yet
        uuid = vm.config.uuid
        assert tools_rpc(lab.spec, uuid, "tools.set.version 12352") == "1 "
        assert tools_rpc(lab.spec, uuid, f"SetGuestInfo  1 {vm_spec.name}") == "1 "
        assert tools_rpc(lab.spec, uuid, f"SetGuestInfo  2 {vm_spec.address}") == "1 "
        assert index.FindByIp(ip=vm_spec.address, vmSearch=True)._moId == vm._moId
        assert index.FindByDnsName(dnsName=vm_spec.name, vmSearch=True)._moId == vm._moId
        assert index.FindByUuid(uuid=uuid, vmSearch=True)._moId == vm._moId
        assert index.FindByIp(ip=vm_spec.address, vmSearch=False) is None
    # A host reboot: esxcli answers again afterwards, from the same model.
    name = lab.spec.hosts[2].address
    with lab.connect() as si:
        host = find(si, vim.HostSystem, name)
        for vm in host.vm:
            if vm.runtime.powerState == "poweredOn" and not vm.config.managedBy:
                assert task_fault(vm.PowerOffVM_Task()) is None
        assert task_fault(host.EnterMaintenanceMode_Task(timeout=0)) is None
        assert task_fault(host.RebootHost_Task(force=False)) is None
    # Property reads are vCenter's cache (they answer while the host is down); calls to the
    # host fault until it is back: wait for a later bootTime and the host connected again.
    deadline = time.monotonic() + 60
    with lab.connect() as si:
        host = find(si, vim.HostSystem, name)
        while not (
            host.runtime.bootTime > view[name]["boot"]
            and host.runtime.connectionState == "connected"
        ):
            assert time.monotonic() < deadline, f"{name} did not come back"
            time.sleep(0.2)
    esx = read_all(lab, tmp_path / "rebooted", name)
    assert_agrees(name, esx, api_view(lab)[name])
    assert esx["kernel"][0]["Runtime"] == "TRUE"
    assert twin.handler_panics(lab.twin.files.workdir) == []


def test_a_host_that_does_not_answer_esxcli_stays_unknown(rack_twin, tmp_path: Path):
    """No esxcli answer (hostd refuses the executer): rackcert records unknown, never a pass."""
    from provision.discovery import discover

    lab = rack_twin(
        "inventories/lab.yaml", host_desc={"lab-esx02.lab.internal": {"no_esxcli": True}}
    )
    with lab.connect() as si:
        inventory = discover(si, esxcli=True)
    facts = {h.name: h.esxcli for h in inventory.hosts}
    assert facts["lab-esx01.lab.internal"] is not None and facts["lab-esx01.lab.internal"].answered
    silent = facts["lab-esx02.lab.internal"]
    assert silent is not None and not silent.answered and "no esxcli answer" in silent.error
    results = {(r.id, r.node): r for r in hypervisor_results(lab.spec, inventory)}
    (esx2,) = [h.name for h in lab.spec.hosts if h.address == "lab-esx02.lab.internal"]
    for check_id in ("hv.host.vaai_ats", "hv.host.esxcli_passthrough"):
        outcome = results[(check_id, esx2)]
        assert outcome.status == "error" and outcome.observed == "unknown", check_id
    code, out = esxcli_one(lab, "lab-esx02.lab.internal", ["system", "version", "get"], tmp_path)
    assert code != 0 and "Releasebuild" not in out
