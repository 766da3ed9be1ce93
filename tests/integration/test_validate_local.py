"""`rackcert validate --local` on this machine, the CLI's errors, its records and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.validate_local import H200_SPEC, ROOT, rackcert


def record(runs: Path) -> dict:
    return json.loads(sorted(runs.glob("*/*/validate.json"))[-1].read_text())


def test_local_with_fake_h200_passes_the_gpu_checks(tmp_path, fake_gpu_tools):
    """The fake built from the H200's real output satisfies the H200 spec's GPU checks."""
    tools = fake_gpu_tools({"h200-node1": {}})
    runs = tmp_path / "runs"
    done = rackcert(
        "validate",
        str(H200_SPEC),
        "--local",
        "--runs-dir",
        str(runs),
        "--check",
        "gpu",
        "--tool-path",
        tools,
        "--no-facts",
    )
    assert "Traceback" not in done.stderr
    rec = record(runs)
    by = {r["id"]: r for r in rec["data"]["results"]}
    for cid in (
        "gpu.count",
        "gpu.model",
        "gpu.driver",
        "gpu.cuda.driver",
        "gpu.persistence",
        "gpu.ecc.mode",
        "gpu.ecc.errors",
        "gpu.pcie.link",
    ):
        assert by[cid]["status"] == "pass", by[cid]
    assert by["gpu.nvlink.active"]["status"] == "skip"
    assert rec["stage"] == "validate" and rec["data"]["local"] is True


def test_local_wrong_driver_via_env_tool_path_fails_and_exits_1(tmp_path, fake_gpu_tools):
    tools = fake_gpu_tools(
        {"h200-node1": {"driver": "535.54.03", "fields": {"persistence_mode": "Disabled"}}}
    )
    runs, junit = tmp_path / "runs", tmp_path / "out" / "junit.xml"
    done = rackcert(
        "validate",
        str(H200_SPEC),
        "--local",
        "--runs-dir",
        str(runs),
        "--check",
        "gpu",
        "--junit",
        str(junit),
        "--no-facts",
        env={"RACKCERT_TOOL_PATH": tools},
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip().splitlines()[-1].startswith("error: validate failed: 2 error-severity")
    )
    assert "h200-node1:gpu.driver" in done.stderr and "h200-node1:gpu.persistence" in done.stderr
    assert "fix: install the pinned driver" in done.stdout
    rec = record(runs)
    assert rec["status"] == "failed" and rec["data"]["tool_path"] == tools
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases["gpu.driver"].find("failure") is not None
    assert cases["gpu.model"].find("failure") is None


def test_local_without_gpu_tools_fails_gpu_checks_with_reason_not_crash(tmp_path):
    runs = tmp_path / "runs"
    done = rackcert(
        "validate",
        str(H200_SPEC),
        "--local",
        "--runs-dir",
        str(runs),
        "--tool-path",
        str(tmp_path / "empty"),
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr + done.stdout
    data = record(runs)["data"]
    by = {r["id"]: r for r in data["results"]}
    assert by["node.reachable"]["status"] == "pass"
    if by["gpu.count"]["status"] != "pass":  # a machine with a real GPU passes; this one fails
        assert by["gpu.count"]["reason"] == "nvidia-smi not found"
    assert by["ofed.version"]["status"] == "skip"  # the H200 spec pins no OFED
    assert data["facts"] == "facts.json"
    facts = json.loads((sorted(runs.glob("*/*/facts.json"))[-1]).read_text())
    node = facts["nodes"]["h200-node1"]
    assert node["kernel"] and "hostname" in node and isinstance(node["gpus"], list)


def test_cli_errors_are_one_line(tmp_path):
    done = rackcert("validate", str(H200_SPEC), "--node", "nope", "--runs-dir", str(tmp_path))
    assert done.returncode == 2 and done.stderr.startswith("error: unknown node nope")
    done = rackcert("validate", str(H200_SPEC), "--check", "gpu.nope", "--runs-dir", str(tmp_path))
    assert done.returncode == 2 and done.stderr.startswith("error: unknown check id gpu.nope")
    done = rackcert(
        "validate",
        str(ROOT / "inventories" / "r750xa-4node.yaml"),
        "--runs-dir",
        str(tmp_path),
        env={"HOME": str(tmp_path)},
    )
    assert done.returncode == 2 and "guest.ssh.key_file" in done.stderr
    assert "Traceback" not in done.stderr


def test_list_shows_every_check_with_fix():
    done = rackcert("validate", str(H200_SPEC), "--list")
    assert done.returncode == 0
    for cid in ("gpu.nvlink.active", "storage.mount", "ssh.peers", "hv.vm.mmio", "hv.host.ats"):
        assert cid in done.stdout


def test_rdma_vm_with_fake_ofed_tools(tmp_path, fake_gpu_tools):
    """A passthrough-NIC VM of the Dell design: OFED pinned, RDMA ports, ATS, peermem."""
    spec = ROOT / "inventories" / "r750xa-4node.yaml"
    a100 = {"name": "NVIDIA A100 80GB PCIe", "driver": "470.82.01", "cuda": "11.4"}
    tools = fake_gpu_tools({"mn-node1": {**a100, "ofed": {"ATS": "False(0)"}}})
    runs = tmp_path / "runs"
    done = rackcert(
        "validate",
        str(spec),
        "--local",
        "--node",
        "mn-node1",
        "--runs-dir",
        str(runs),
        "--tool-path",
        tools,
        "--no-facts",
        "--check",
        "ofed",
        "--check",
        "rdma",
        "--check",
        "nic",
        "--check",
        "gpu.driver",
        "--check",
        "gpu.peermem",
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    by = {r["id"]: r for r in record(runs)["data"]["results"]}
    assert (
        by["ofed.version"]["status"] == "pass" and by["ofed.version"]["observed"] == "5.4-3.1.0.0"
    )
    assert by["rdma.ports"]["status"] == "pass" and "ens1f0np0 Up" in by["rdma.ports"]["observed"]
    assert by["nic.ats"]["status"] == "fail" and "mlx_ats" in by["nic.ats"]["fix"]
    assert by["gpu.driver"]["status"] == "pass"
    # No InfiniBand in this machine's /sys and no nvidia_peermem module: said, not crashed.
    assert by["rdma.speed"]["status"] == "fail" and by["rdma.speed"]["observed"] == "no RDMA ports"
    assert by["gpu.peermem"]["status"] == "fail"


def test_a_failing_warning_check_prints_warn_exits_0_and_junit_agrees(tmp_path):
    """os.release has severity warning: a different OS is WARN, not FAIL, and not 'failed'."""
    import yaml

    spec = yaml.safe_load(H200_SPEC.read_text())
    spec["guest"]["os"] = "rhel-9"  # this machine is not RHEL 9
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    runs, junit = tmp_path / "runs", tmp_path / "junit.xml"
    done = rackcert(
        "validate", str(path), "--local", "--runs-dir", str(runs), "--check", "os.release",
        "--no-facts", "--junit", str(junit), env={"COLUMNS": "250"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARN h200-node1 os.release: OS differs from the spec" in done.stdout
    assert "FAIL h200-node1" not in done.stdout
    (summary,) = [ln for ln in done.stdout.splitlines() if ln.startswith("OK ")]
    assert summary.startswith("OK 0 passed, 0 failed, 0 errors, 1 warnings"), summary
    data = record(runs)["data"]
    assert data["summary"]["failed"] == 0 and data["summary"]["warnings"] == 1
    root = ET.parse(junit).getroot()
    assert all(s.get("failures") == "0" and s.get("errors") == "0" for s in root)
    (case,) = root.iter("testcase")
    assert case.find("failure") is None and case.find("system-err").text.startswith("WARN ")


def test_junit_failures_are_exactly_the_error_severity_ones():
    from rackcert.core.results import CheckResult, Severity, Status
    from validation.junit import junit_xml

    results = [
        CheckResult(id="gpu.driver", node="n1", status=Status.failed, reason="old"),
        CheckResult(id="time.sync", node="n1", severity=Severity.warning, status=Status.failed),
        CheckResult(id="os.release", node="n1", severity=Severity.warning, status=Status.error),
    ]
    (suite,) = ET.fromstring(junit_xml(results))
    assert (suite.get("failures"), suite.get("errors")) == ("1", "0")
    cases = {c.get("name"): c for c in suite}
    assert cases["gpu.driver"].find("failure") is not None
    assert cases["time.sync"].find("failure") is None
    assert cases["os.release"].find("error") is None
