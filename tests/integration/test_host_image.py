"""rackcert's host image client (provision/host_image.py) against the twin's vLCM.

The same twin the SDK judges (tests/integration/test_twin_vlcm.py): stage, scan, apply to a host
subset,
read back, roll back; TLS as the spec says even with every CA variable of the environment
pointing at the right certificate; no secret in logs or errors.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import pytest

from provision.esxcli import host_facts
from provision.host_image import HostImage, HostImageError, Image
from provision.session import SessionError
from rackcert.core.spec_loader import load_spec
from tests.support.twin_vlcm import (
    H1,
    H2,
    LAB,
    NEW_BASE,
    NMLX,
    NMLX_NEW,
    OLD_BASE,
    VGPU,
    VGPU_NEW,
    VLCM,
)
from tests.support.twin_vlcm import hosts_by_name as hosts_of


def test_stage_apply_to_a_subset_read_back_and_roll_back(rack_twin, caplog):
    caplog.set_level(logging.DEBUG)
    busy = {"name": "busy", "host": H2, "cpus": 2, "memory_mb": 2048, "power_on": True}
    lab = rack_twin(LAB, vms=[busy], desc={"vlcm": VLCM})
    password = Path(lab.twin.files.password_file).read_text().strip()
    with lab.connect() as si:
        from pyVim.task import WaitForTask

        WaitForTask(hosts_of(si)[H1].EnterMaintenanceMode_Task(timeout=0))  # the upgrade's step 4

    with HostImage(lab.spec, poll_s=0.05) as image:
        assert image.managed("cluster0")
        before = image.desired("cluster0")
        assert before.base == OLD_BASE and NMLX not in before.components
        staged = image.stage("cluster0", base=NEW_BASE, components={VGPU: VGPU_NEW, NMLX: NMLX_NEW})
        assert staged.previous == before
        assert staged.image == Image(NEW_BASE, before.components | {VGPU: VGPU_NEW, NMLX: NMLX_NEW})
        seen = image.compliance("cluster0")
        assert {h: (c.status, c.impact) for h, c in seen.items()} == {
            H1: ("NON_COMPLIANT", "REBOOT_REQUIRED"),
            H2: ("NON_COMPLIANT", "REBOOT_REQUIRED"),
        }
        assert seen[H1].running == before

        progress: list[int] = []
        started = time.monotonic()
        done = image.apply(
            "cluster0", [H1], deadline=time.monotonic() + 120, on_progress=progress.append
        )
        took = time.monotonic() - started
        # The twin's modelled time: 180 s of install at 1/800, then the lab's reboot (0.75 s).
        assert 0.9 < took < 30, took
        print(f"vLCM apply of one host: {took:.2f} s")
        assert done.remediated == [H1] and done.skipped == [] and done.commit == staged.commit
        assert progress and progress[-1] == 100
        seen = image.compliance("cluster0")
        assert seen[H1].status == "COMPLIANT" and seen[H1].running == staged.image
        assert seen[H2].status == "NON_COMPLIANT" and seen[H2].running == before

        # H2 runs a VM that cannot move: vLCM's refusal comes back as one line naming both.
        with pytest.raises(HostImageError) as refused:
            image.apply("cluster0", [H2], deadline=time.monotonic() + 120)
        assert "\n" not in str(refused.value)
        assert H2 in str(refused.value) and "busy" in str(refused.value)

        with lab.connect() as si:
            h1 = hosts_of(si)[H1]
            assert h1.config.product.build == "19482537" and h1.runtime.inMaintenanceMode
            facts, _ = host_facts(si, h1._moId)
            assert facts.build == "Releasebuild-19482537"
            assert {v.name: v.vendor for v in facts.vibs}["nmlx5-core"] == "MEL"

        back = image.rollback("cluster0", staged.previous)
        assert back.image == before and back.previous == staged.image
        image.apply("cluster0", [H1], deadline=time.monotonic() + 120)
        seen = image.compliance("cluster0")
        assert seen[H1].status == "COMPLIANT" and seen[H1].running == before

    with lab.connect() as si:
        h1 = hosts_of(si)[H1]
        assert h1.config.product.build == "19193900"
        facts, _ = host_facts(si, h1._moId)
        vibs = {v.name: (v.version, v.vendor) for v in facts.vibs}
        assert vibs["esx-base"][0] == OLD_BASE
        assert vibs["nmlx5-core"][1] == "VMW"  # the inbox driver is back with the base image
        assert vibs.get(VGPU, ("", ""))[0] != VGPU_NEW
    assert password not in caplog.text
    assert password not in str(refused.value)


def test_a_deadline_ends_the_wait_not_the_remediation(rack_twin):
    lab = rack_twin(LAB, desc={"vlcm": VLCM})
    with HostImage(lab.spec, poll_s=0.05) as image:
        with pytest.raises(HostImageError, match="not found in the depot"):
            image.stage("cluster0", base="9.9.9-0.0.1", components={})
        # The draft that failed validation is ours: the next stage replaces it.
        image.stage("cluster0", base=NEW_BASE, components={})
        with pytest.raises(HostImageError, match="still running at the deadline"):
            image.apply("cluster0", [H1], deadline=time.monotonic() + 0.05)
        with pytest.raises(HostImageError, match="not hosts of cluster cluster0"):
            image.apply("cluster0", ["esx99"], deadline=time.monotonic() + 5)
        # vLCM goes on after the wait ended: a second remediation is refused meanwhile.
        with pytest.raises(HostImageError, match="not_allowed_in_current_state") as refused:
            image.apply("cluster0", [H2], deadline=time.monotonic() + 5)
        assert refused.value.kind == "not_allowed_in_current_state"  # what the roll waits on


def test_a_cluster_managed_by_baselines_is_told_apart(rack_twin):
    lab = rack_twin(LAB)
    with HostImage(lab.spec) as image:
        assert image.managed("cluster0") is False
        with pytest.raises(HostImageError, match="not_found"):
            image.desired("cluster0")


def _self_signed(where: Path) -> Path:
    key, cert = where / "wrong.key", where / "wrong.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=wrong",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert


def test_tls_is_the_specs_even_with_the_environment_trusting_the_twin(
    rack_twin, tmp_path, monkeypatch
):
    """A wrong tls.ca_file is refused although REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and
    SSL_CERT_FILE all name the twin's own CA; the right pin connects, a wrong one is refused."""
    lab = rack_twin(LAB, desc={"vlcm": VLCM})
    right = str(lab.twin.files.cert_file)
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.setenv(var, right)
    wrong = load_spec(
        lab.with_vcenter("wrong.yaml", tls={"ca_file": str(_self_signed(tmp_path))})
    ).spec
    with pytest.raises(SessionError, match="TLS certificate does not verify"), HostImage(wrong):
        pass

    pinned = load_spec(
        lab.with_vcenter("pin.yaml", tls={"ca_file": None, "thumbprint": lab.twin.thumbprint})
    ).spec
    with HostImage(pinned) as image:
        assert image.desired("cluster0").base == OLD_BASE
    bad_pin = ":".join(["AB"] * 32)
    badly = load_spec(
        lab.with_vcenter("badpin.yaml", tls={"ca_file": None, "thumbprint": bad_pin})
    ).spec
    with pytest.raises(SessionError, match="does not match the pinned"), HostImage(badly):
        pass

    monkeypatch.setenv("RACKCERT_VC_PASSWORD", "not-the-password")
    wrong_pw = load_spec(
        lab.with_vcenter("pw.yaml", password_file=None, password_env="RACKCERT_VC_PASSWORD")
    ).spec
    with pytest.raises(SessionError, match="login refused") as refused, HostImage(wrong_pw):
        pass
    assert "not-the-password" not in str(refused.value)


def test_the_upgrades_port_speaks_the_specs_terms_and_waits_its_turn(rack_twin):
    """VlcmHostImage: current() and apply() in the spec's terms (esxi release, vgpu_manager,
    a component's short name), translated through vLCM's depot; two hosts applied at once
    are remediated one after the other, as vLCM runs one remediation per cluster."""
    import threading

    from pyVim.task import WaitForTask

    from provision.host_image_port import VlcmHostImage

    lab = rack_twin(LAB, desc={"vlcm": VLCM})
    with lab.connect() as si:
        for host in hosts_of(si).values():
            WaitForTask(host.EnterMaintenanceMode_Task(timeout=0))
    port = VlcmHostImage(lab.spec, timeout_s=60)
    names = [h.name for h in lab.spec.hosts]  # the spec's host names, as the roll knows them
    before = port.current(names[0])
    assert before["esxi"] == "7.0.3" and "nmlx5" not in before
    target = {"esxi": NEW_BASE, "vgpu_manager": "535.161.05", "nmlx5": "4.23.0.66"}
    errors: list[BaseException] = []

    def apply(name: str) -> None:
        try:
            port.apply(name, target)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=apply, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert errors == []
    for name in names:
        now = port.current(name)
        assert {k: now.get(k) for k in target} == {
            "esxi": "7.0.3",  # the spec asks a release: the host's is told as one
            "vgpu_manager": "535.161.05",
            "nmlx5": "4.23.0.66",
        }
        assert now[NMLX] == NMLX_NEW  # and vLCM's own name and version
    with HostImage(lab.spec) as image:
        assert image.desired("cluster0").base == NEW_BASE
        with pytest.raises(HostImageError, match="not in the depot"):
            VlcmHostImage(lab.spec)._vlcm_terms(image, image.desired("cluster0"), {"esxi": "6.7.0"})
