"""What rackcert keeps of a host's esxcli answers: report rows, diff entries, the checks.

Unit tests on recorded data (no twin): the twin-backed path is
tests/integration/test_twin_esxcli.py.
"""

from __future__ import annotations

from pathlib import Path

from rackcert.core.observed import EsxcliDevice, EsxcliHost, EsxcliVib, ObservedHost
from rackcert.core.results import Status
from rackcert.core.spec_loader import load_spec
from rackcert.report.assemble import _esxcli_record
from rackcert.report.diff import _host_versions
from rackcert.report.record import Hardware, HostRecord, RunRecord
from validation.checks.hypervisor import HostCtx, host_esxcli_passthrough, host_vaai_ats

ROOT = Path(__file__).resolve().parents[2]


ANSWERED = EsxcliHost(
    answered=True,
    build="Releasebuild-19193900",
    version="7.0.3",
    vibs=[
        EsxcliVib(name="esx-base", version="7.0.3-0.20.19193900", vendor="VMware"),
        EsxcliVib(name="nmlx5-core", version="4.19.16.11-1vmw", vendor="VMW"),
        EsxcliVib(name="NVD-AIE_ESXi_7.0.2_Driver", version="535.154.02-1OEM", vendor="NVD"),
    ],
    vaai=[EsxcliDevice(device="naa.1", ats_status="supported")],
    passthru={"0000:17:00.0": True},
)


def _host(esxcli: EsxcliHost | None) -> ObservedHost:
    return ObservedHost(name="esx01", moid="host-1", esxcli=esxcli)


def test_report_keeps_build_and_driver_vibs_or_says_unknown():
    row = _esxcli_record(_host(ANSWERED))
    assert row == {
        "esxcli": "answered",
        "esxcli_build": "Releasebuild-19193900",
        "driver_vibs": [
            "nmlx5-core 4.19.16.11-1vmw (VMW)",
            "NVD-AIE_ESXi_7.0.2_Driver 535.154.02-1OEM (NVD)",
        ],
    }
    silent = EsxcliHost(answered=False, error="no esxcli answer (HTTP 500)")
    assert _esxcli_record(_host(silent)) == {"esxcli": "unknown: no esxcli answer (HTTP 500)"}
    assert _esxcli_record(_host(None)) == {"esxcli": "unknown: not asked"}
    # A hostile build string is capped like every node string.
    long = ANSWERED.model_copy(update={"build": "B" * 10_000})
    assert len(_esxcli_record(_host(long))["esxcli_build"]) < 1_000


def test_report_diff_names_a_driver_vib_upgrade():
    def record(vibs: list[str]) -> RunRecord:
        host = HostRecord(name="esx01", esxi_build="19193900", driver_vibs=vibs)
        return RunRecord.model_construct(hardware=Hardware(hosts=[host]))

    before = _host_versions(record(["nmlx5-core 4.19.16.10-1vmw (VMW)"]))
    after = _host_versions(record(["nmlx5-core 4.19.16.11-1vmw (VMW)"]))
    assert before["esx01"]["vib nmlx5-core"] == "4.19.16.10-1vmw (VMW)"
    assert after["esx01"]["vib nmlx5-core"] == "4.19.16.11-1vmw (VMW)"
    assert before["esx01"]["esxi_build"] == after["esx01"]["esxi_build"]


def _ctx(esxcli: EsxcliHost | None, gpus: list[str]) -> HostCtx:
    spec = load_spec(ROOT / "inventories" / "lab.yaml").spec
    return HostCtx(spec, "esx01", _host(esxcli), gpus=gpus, nics=[])


def test_checks_judge_esxcli_and_never_pass_a_host_that_did_not_answer():
    gpu = ["0000:17:00.0"]
    assert host_esxcli_passthrough(_ctx(ANSWERED, gpu)).status is Status.passed
    off = ANSWERED.model_copy(update={"passthru": {"0000:17:00.0": False}})
    outcome = host_esxcli_passthrough(_ctx(off, gpu))
    assert outcome.status is Status.failed and "0000:17:00.0 disabled" in outcome.observed
    missing = host_esxcli_passthrough(_ctx(ANSWERED, ["0000:31:00.0"]))
    assert missing.status is Status.failed and "not listed" in missing.observed
    assert host_esxcli_passthrough(_ctx(ANSWERED, [])).status is Status.skipped
    assert host_vaai_ats(_ctx(ANSWERED, gpu)).status is Status.passed
    unread = ANSWERED.model_copy(update={"vaai": [EsxcliDevice(device="naa.2", ats_status="")]})
    assert host_vaai_ats(_ctx(unread, gpu)).status is Status.failed
    silent = EsxcliHost(answered=False, error="no esxcli answer (HTTP 500)")
    for check in (host_esxcli_passthrough, host_vaai_ats):
        outcome = check(_ctx(silent, gpu))
        assert (outcome.status, outcome.observed) == (Status.error, "unknown")
        assert outcome.reason == "no esxcli answer (HTTP 500)"
        assert check(_ctx(None, gpu)).status is Status.skipped  # a record that never asked
