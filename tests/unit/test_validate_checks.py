"""Checks judged on real H200 outputs and on variations of them; expectations from the spec."""

from __future__ import annotations

import pytest

from rackcert.core.results import Status
from tests.support.validate_checks import h200_expect, h200_outputs, judge
from validation.checks import load_all, select
from validation.expect import MountExpect, Peer
from validation.facts.system import Hostname
from validation.probes import ProbeOutput


@pytest.mark.parametrize(
    "check_id",
    [
        "gpu.count",
        "gpu.model",
        "gpu.driver",
        "gpu.cuda.driver",
        "gpu.cuda.toolkit",
        "gpu.persistence",
        "gpu.ecc.mode",
        "gpu.ecc.errors",
        "gpu.pcie.link",
        "gpu.xid",
        "os.release",
    ],
)
def test_real_h200_passes_with_a_matching_spec(check_id):
    res = judge(check_id, h200_expect())
    assert res.status is Status.passed, res
    assert res.fix == ""


def test_wrong_driver_fails_with_fix_hint():
    res = judge("gpu.driver", h200_expect(driver="470.82.01"))
    assert res.status is Status.failed
    assert res.observed == "580.159.04" and res.expected == "470.82.01"
    assert "nvidia_driver" in res.fix


def test_branch_and_model_and_count_expectations():
    assert judge("gpu.driver", h200_expect(driver="580")).status is Status.passed
    assert judge("gpu.driver", h200_expect(driver="58")).status is Status.failed
    assert (
        judge("gpu.model", h200_expect(gpu_models=["NVIDIA H100 80GB HBM3"])).status
        is Status.failed
    )
    assert judge("gpu.count", h200_expect(gpus=2)).observed == "1 GPU(s)"
    assert judge("gpu.cuda.driver", h200_expect(cuda="13.1")).status is Status.failed


def test_missing_tool_is_a_failed_check_with_that_reason():
    outs = h200_outputs()
    outs["gpus"] = ProbeOutput("gpus", 127, "", missing="nvidia-smi")
    res = judge("gpu.count", h200_expect(), outs)
    assert (res.status, res.reason) == (Status.failed, "nvidia-smi not found")
    res = judge("ofed.version", h200_expect(ofed="5.4-3.1.0.0"))
    assert (res.status, res.reason) == (Status.failed, "ofed_info not found")


def test_nvlink_pair_expected_on_single_gpu_fails():
    res = judge("gpu.nvlink.active", h200_expect(nvlink_pair=True))
    assert res.status is Status.failed and "NVLink" in res.reason


def test_ecc_and_pcie_problems_fail():
    outs = h200_outputs()
    text = outs["gpus"].text.replace(", 0, 0, [N/A], No, No,", ", 3, 3, [N/A], Yes, No,")
    outs["gpus"] = ProbeOutput("gpus", 0, text)
    res = judge("gpu.ecc.errors", h200_expect(), outs)
    assert res.status is Status.failed and "3 uncorrectable" in res.observed
    text2 = h200_outputs()["gpus"].text.replace("[N/A], 16, 16,", "[N/A], 8, 16,")
    outs["gpus"] = ProbeOutput("gpus", 0, text2)
    assert judge("gpu.pcie.link", h200_expect(), outs).status is Status.failed


def test_xid_in_kernel_log_fails_and_names_fatal():
    outs = h200_outputs()
    outs["xid_events"] = ProbeOutput("xid_events", 0, "NVRM: Xid (PCI:0000:00:06): 79, pid=1, x")
    res = judge("gpu.xid", h200_expect(), outs)
    assert res.status is Status.failed and "fatal: [79]" in res.reason


def test_rdma_checks_skip_without_passthrough_nic_and_fail_without_tools():
    assert judge("rdma.ports", h200_expect()).status is Status.skipped
    res = judge("rdma.ports", h200_expect(rdma=True, nic_speed_gbps=100))
    assert (res.status, res.reason) == (Status.failed, "ibdev2netdev not found")
    assert judge("rdma.speed", h200_expect(rdma=True, nic_speed_gbps=100)).status is Status.failed


def test_mount_checks_source_and_options():
    want = MountExpect(
        mount_point="/usr/local/nvidia", source="/dev/vdb", fstype="nfs", options=["ro"]
    )
    res = judge("storage.mount", h200_expect(mount=want))
    assert res.status is Status.failed and "not NFS" in res.reason
    absent = MountExpect(mount_point="/mnt/data", source="s:/e", fstype="nfs", options=["vers=3"])
    res = judge("storage.mount", h200_expect(mount=absent))
    assert res.reason == "mount missing" and "storage_nfs" in res.fix


def test_peers_parse_and_fail():
    outs = h200_outputs()
    outs["ssh_peers"] = ProbeOutput("ssh_peers", 0, "peer a rc=0 \npeer b rc=255 Permission denied")
    peers = [Peer(name="a", address="1"), Peer(name="b", address="2")]
    res = judge("ssh.peers", h200_expect(peers=peers), outs)
    assert res.status is Status.failed and "b (Permission denied)" in res.reason


def test_every_check_has_id_summary_fix_and_select_patterns():
    defs = load_all()
    assert len(defs) >= 25
    for d in defs.values():
        assert d.summary and d.fix and "." in d.id
    assert {d.id for d in select(["gpu"])} == {i for i in defs if i.startswith("gpu.")}
    assert [d.id for d in select(["gpu.driver"])] == ["gpu.driver"]
    from rackcert.core.errors import InputError

    with pytest.raises(InputError, match="unknown check id nope"):
        select(["nope"])


def test_crashing_check_is_an_error_result():
    outs = h200_outputs()
    outs["nvidia_smi"] = ProbeOutput("nvidia_smi", 0, "garbage")
    res = judge("gpu.cuda.driver", h200_expect(), outs)
    assert res.status is Status.error and "unexpected output" in res.reason


def test_hypervisor_checks_share_the_registry_with_a_scope(capsys):
    """One @check registry: guest checks are scope node, hypervisor checks host/vm/rack;
    the guest suite selects only node checks; --list shows every check with its scope."""
    from rackcert.cli import main
    from validation.checks import GUEST, check, listed
    from validation.hypervisor_results import hv_ids

    defs = load_all()
    scopes = {d.id: d.scope for d in defs.values()}
    assert {scopes[i] for i in hv_ids()} == {"host", "vm", "rack"}
    assert set(hv_ids()) >= {"hv.host.ats", "hv.vm.mmio", "hv.vm.present", "hv.discovery"}
    assert all(d.scope in GUEST and d.facts for d in select(None))
    assert not {d.id for d in select(None)} & set(hv_ids())
    assert [d.id for d in listed()][-len(hv_ids()) :] == [
        d.id for d in listed() if d.scope != "node"
    ]

    def bad(ctx):
        """A host check that asks for guest probes.

        Fix: none, it is refused.
        """

    with pytest.raises(ValueError, match="scope 'host' with facts"):
        check("hv.test.bad", facts=(Hostname,), scope="host")(bad)
    with pytest.raises(ValueError, match="scope 'node' with facts"):
        check("node.test.bad", scope="node")(bad)
    assert "hv.test.bad" not in load_all() and "node.test.bad" not in load_all()
    capsys.readouterr()
    assert main(["validate", "--list"]) == 0
    out = capsys.readouterr().out
    rows = {ln.split("|")[0].strip(): ln for ln in out.splitlines() if "|" in ln}
    assert "| host |" in rows["hv.host.ats"] and "| vm |" in rows["hv.vm.mmio"]
    assert "| node |" in rows["gpu.driver"]
