"""Hypervisor checks end to end: vcsim rack twin -> provision.json -> rackcert validate.

A provisioned twin passes every hypervisor check; a VM whose MMIO size and NUMA
affinity drift afterwards (changed behind rackcert's back, seen by a fresh
`rackcert plan`) fails exactly those two checks on that VM.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.support.vsphere_helpers import cli


def validate_hv(lab, capsys) -> tuple[int, dict]:
    code, _out, err = cli(lab, capsys, "validate", str(lab.spec_path), "--check", "hv")
    assert "Traceback" not in err
    record = sorted(lab.runs_dir.glob("*/*/validate.json"))[-1]
    return code, json.loads(record.read_text())["data"]


@pytest.mark.slow
def test_provisioned_twin_passes_then_drift_fails_exactly_its_checks(rack_twin, capsys):
    lab = rack_twin(guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    code, data = validate_hv(lab, capsys)
    bad = [r for r in data["results"] if r["status"] not in ("pass", "skip")]
    assert code == 0 and not bad, bad
    assert data["hypervisor_source"].endswith("provision.json")
    ids = {r["id"] for r in data["results"]}
    assert {"hv.host.ats", "hv.host.gpu_passthrough", "hv.vm.mmio", "hv.vm.p2p"} <= ids
    assert data["nodes"]["mn-node1"]["reachable"] is None  # no guest check ran

    from pyVmomi import vim

    with lab.connect() as si:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.VirtualMachine], True
        )
        vm = next(v for v in view.view if v.name == "s1-pair")
        spec = vim.vm.ConfigSpec(
            extraConfig=[
                vim.option.OptionValue(key="pciPassthru.64bitMMIOSizeGB", value="128"),
                vim.option.OptionValue(key="numa.nodeAffinity", value="0"),
            ]
        )
        task = vm.ReconfigVM_Task(spec)
        while task.info.state not in ("success", "error"):
            time.sleep(0.05)
        assert task.info.state == "success"
    code, _, err = cli(lab, capsys, "plan", str(lab.spec_path))  # records the drift
    code, data = validate_hv(lab, capsys)
    assert data["hypervisor_source"].endswith("plan.json")
    failing = {(r["node"], r["id"]) for r in data["results"] if r["status"] == "fail"}
    assert failing == {("s1-pair", "hv.vm.mmio"), ("s1-pair", "hv.vm.numa")}
    assert code == 1
    mmio = next(r for r in data["results"] if r["id"] == "hv.vm.mmio" and r["node"] == "s1-pair")
    assert "64bitMMIOSizeGB=128" in mmio["observed"] and "64bitMMIOSizeGB=512" in mmio["expected"]
