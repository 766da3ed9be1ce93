"""A guest's address comes from VMware Tools in that guest, once it is up (issue 24, item 3).

vSphere API reference, GuestInfo: guest information is "collected by VMware Tools";
before Tools report, ipAddress is unset and toolsRunningStatus is guestToolsNotRunning,
and the guest information is reset when the VM powers off. The twin reads nothing of
the cloud-init guestinfo rackcert writes: only the lab's guest agent reports, over the
twin's Tools channel (twin/tools.go), once the VM's SSH host answers. So
`wait_for: tools` waits for a guest that booted, not for its own input echoed back.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import yaml

from rackcert.lab.guest_agent import tools_rpc
from tests.support.twin_judges import find
from tests.support.vsphere_helpers import cli, error_line, last_record

LAB = "inventories/lab.yaml"


def _guest(vm: Any) -> dict[str, Any]:
    """What a vSphere client reads of the VM's guest (GuestInfo and its summary)."""
    guest = vm.guest
    return {
        "ip": guest.ipAddress,
        "host": guest.hostName,
        "running": guest.toolsRunningStatus,
        "status": str(guest.toolsStatus),
        "state": guest.guestState,
        "net": [list(n.ipAddress or []) for n in guest.net or []],
        "summary_ip": vm.summary.guest.ipAddress,
    }


# Tools never ran in the VM (toolsNotInstalled: "has never been installed or has not run").
NEVER_RAN = {
    "ip": None,
    "host": None,
    "running": "guestToolsNotRunning",
    "status": "toolsNotInstalled",
    "state": "notRunning",
    "net": [[]],  # the VM's one NIC, no address known
    "summary_ip": None,
}
# Tools ran before and are not running now.
NOT_RUNNING = NEVER_RAN | {"status": "toolsNotRunning"}


def test_tools_report_only_what_the_guest_sends(rack_twin, capsys):
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    lab = rack_twin(LAB)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes", "--no-power-on")
    assert code == 0, err
    address = lab.spec.vms[0].address
    with lab.connect() as si:
        vm = find(si, vim.VirtualMachine, "lab-node1")
        extra = {o.key: o.value for o in vm.config.extraConfig}
        assert extra["guestinfo.metadata"]  # rackcert's cloud-init data is there...
        assert _guest(vm) == NEVER_RAN
        WaitForTask(vm.PowerOnVM_Task())
        time.sleep(1.0)
        assert _guest(vm) == NEVER_RAN  # ...and the twin does not echo it: no guest ran
        # Nor does the simulator's own shortcut set it (ESXi keeps such a key as plain data).
        shortcut = [vim.option.OptionValue(key="SET.guest.ipAddress", value="10.9.9.9")]
        WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(extraConfig=shortcut)))
        assert _guest(vm) == NEVER_RAN

        uuid = vm.config.uuid
        assert tools_rpc(lab.spec, uuid, "tools.set.version 12352") == "1 "
        seen = _guest(vm)
        assert (seen["running"], seen["status"], seen["state"], seen["ip"]) == (
            "guestToolsRunning",
            "toolsOk",
            "running",
            None,
        )
        assert tools_rpc(lab.spec, uuid, "SetGuestInfo  1 lab-node1") == "1 "
        assert tools_rpc(lab.spec, uuid, f"SetGuestInfo  2 {address}") == "1 "
        seen = _guest(vm)
        assert (seen["ip"], seen["summary_ip"], seen["host"], seen["net"]) == (
            address,
            address,
            "lab-node1",
            [[address]],
        )
        # The channel answers as the VMX does: "0 <why>" for what it cannot take.
        assert tools_rpc(lab.spec, uuid, "SetGuestInfo  2 not-an-address").startswith("0 ")
        assert tools_rpc(lab.spec, uuid, "reboot now").startswith("0 Unknown command")
        assert tools_rpc(lab.spec, "42" * 16, "tools.set.version 1").startswith("0 No virtual")
        WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(extraConfig=shortcut)))
        assert _guest(vm)["ip"] == address

        # Power-off resets what Tools reported; a powered-off VM has no Tools to speak.
        WaitForTask(vm.PowerOffVM_Task())
        assert _guest(vm) == NOT_RUNNING
        assert tools_rpc(lab.spec, uuid, "tools.set.version 12352").startswith("0 ")
        # A fresh boot starts with nothing known again.
        WaitForTask(vm.PowerOnVM_Task())
        assert _guest(vm) == NOT_RUNNING

        # A guest operation needs Tools in the guest (vSphere API reference, ShutdownGuest:
        # ToolsUnavailable "if VMware Tools is not running"); once they run, it is carried out.
        with pytest.raises(vim.fault.ToolsUnavailable):
            vm.ShutdownGuest()
        assert vm.runtime.powerState == "poweredOn"
        assert tools_rpc(lab.spec, uuid, "tools.set.version 12352") == "1 "
        vm.ShutdownGuest()
        assert vm.runtime.powerState == "poweredOff"
        assert _guest(vm) == NOT_RUNNING


def test_wait_for_tools_waits_for_the_guest_and_times_out_on_one_that_never_boots(
    agent_lab, capsys
):
    """lab-node1's guest hangs in boot for a while, lab-node2's for ever: the wait for
    Tools waits for the first until its SSH host answers and the agent reports, and gives
    up on the second with one error line."""
    from pyVmomi import vim

    lab = agent_lab(wait_for="tools")
    data = yaml.safe_load(lab.spec_path.read_text())
    # lab-node1 answers ~2.3 s after power-on here (the 1 s hold, the agent's 1 s watch
    # round, its SSH host's start): 6 s leaves it more than twice that, and lab-node2's
    # wait, which must run out, costs 6 s instead of 10.
    data["network"]["management"]["boot_timeout_s"] = 6
    lab.spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    node1, node2 = lab.spec.vms
    lab.agent.hang.update({"lab-node1", "lab-node2"})
    held = 1.0
    before: list[dict[str, Any]] = []

    def guest_boots_late() -> None:
        with lab.connect() as si:
            deadline = time.monotonic() + 120
            vm = None
            while time.monotonic() < deadline:
                vm = vm or next((v for v in _vms(si, vim) if v.name == "lab-node1"), None)
                if vm is not None and vm.runtime.powerState == "poweredOn":
                    break
                time.sleep(0.1)
            assert vm is not None
            before.append(_guest(vm))
            time.sleep(held)
            before.append(_guest(vm))
        lab.agent.hang.discard("lab-node1")

    booter = threading.Thread(target=guest_boots_late, daemon=True)
    booter.start()
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    booter.join(timeout=60)
    assert code == 1
    line = error_line(err)  # one line, no traceback
    assert line.startswith("error: VM(s) did not answer after power-on: lab-node2 (")
    assert node2.address in line and "lab-node1" not in line

    # Powered on, SSH host not up yet: vCenter knew nothing, during the whole hold.
    assert before == [NEVER_RAN, NEVER_RAN]
    states = last_record(lab, "provision")["data"]["vms"]
    assert states["lab-node1"]["answered"] == "tools"
    assert states["lab-node1"]["seconds"] >= held  # the wait waited for the guest
    assert states["lab-node2"]["answered"] is None
    assert (states["lab-node2"]["power_state"], states["lab-node2"]["guest_ip"]) == (
        "poweredOn",
        "",
    )
    assert ("lab-node1", f"tools: reported {node1.address}") in lab.agent.events
    with lab.connect() as si:
        vm1 = find(si, vim.VirtualMachine, "lab-node1")
        vm2 = find(si, vim.VirtualMachine, "lab-node2")
        seen = _guest(vm1)
        assert (seen["ip"], seen["host"], seen["running"], seen["state"]) == (
            node1.address,
            "lab-node1",
            "guestToolsRunning",
            "running",
        )
        assert _guest(vm2) == NEVER_RAN


def _vms(si: Any, vim: Any) -> list[Any]:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    try:
        return list(view.view)
    finally:
        view.DestroyView()
