"""Session: TLS verified by CA file or pinned SHA-256, one-line refusals with exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys
import warnings

import pytest

from provision.discovery import discover
from provision.session import InsecureSessionWarning, SessionError, connect
from rackcert.core.paths import REPO_ROOT
from rackcert.core.spec_loader import load_spec
from tests.support.vsphere_helpers import cli, error_line

LAB = "inventories/lab.yaml"


def test_ca_file_session_discovers_and_logs_out(rack_twin):
    lab = rack_twin(LAB)
    with connect(lab.spec) as si:
        inventory = discover(si)
        session = si.content.sessionManager
    assert [h.name for h in inventory.hosts] == ["lab-esx01.lab.internal", "lab-esx02.lab.internal"]
    from pyVmomi import vim

    with pytest.raises(vim.fault.NotAuthenticated):
        session.currentSession  # noqa: B018 - the property read is the check: logged out


def test_pinned_thumbprint_is_accepted(rack_twin, capsys):
    lab = rack_twin(LAB, tls="thumbprint")
    assert lab.spec.vcenter.tls.ca_file is None
    code, _, err = cli(lab, capsys, "plan", str(lab.spec_path), "--json")
    assert code == 0, err


def test_wrong_thumbprint_is_refused(rack_twin, capsys):
    lab = rack_twin(LAB)
    wrong = ":".join(["AB"] * 32)
    path = lab.with_vcenter("wrong-pin.yaml", tls={"verify": True, "thumbprint": wrong})
    code, _, err = cli(lab, capsys, "plan", str(path))
    assert code == 2
    line = error_line(err)
    assert "does not match the pinned tls.thumbprint" in line
    assert lab.twin.thumbprint.replace(":", "") in line and "AB" * 32 in line


def test_unknown_certificate_is_refused(rack_twin, capsys):
    lab = rack_twin(LAB)
    path = lab.with_vcenter("no-trust.yaml", tls={"verify": True})
    code, _, err = cli(lab, capsys, "plan", str(path))
    assert code == 2
    assert "TLS certificate does not verify" in error_line(err)


def test_verify_false_warns_but_connects(rack_twin):
    lab = rack_twin(LAB, tls="insecure")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with connect(lab.spec) as si:
            assert discover(si).hosts
    assert any(issubclass(w.category, InsecureSessionWarning) for w in seen)


def test_wrong_password_is_one_line_exit_2(rack_twin, tmp_path):
    lab = rack_twin(LAB)
    bad = tmp_path / "bad.password"
    bad.write_text("not-the-password\n")
    path = lab.with_vcenter("bad-password.yaml", password_file=str(bad))
    proc = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "plan", str(path), "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "login refused for user 'rackcert'" in lines[0], proc.stderr
    assert "not-the-password" not in proc.stderr + proc.stdout
    assert not list(tmp_path.glob("lab/*/plan.json")), "a refused login records no plan"


def test_unreachable_vcenter_is_one_line_exit_2(rack_twin, capsys):
    lab = rack_twin(LAB)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = lab.with_vcenter("closed.yaml", port=port)
    code, _, err = cli(lab, capsys, "plan", str(path))
    assert code == 2
    assert f"cannot reach vCenter 127.0.0.1:{port}" in error_line(err)


def test_session_error_is_input_like():
    assert SessionError("x").exit_code == 2


def test_dropped_connection_during_discovery_is_retried(rack_twin):
    lab = rack_twin(LAB, faults={"drop": [{"method": "RetrievePropertiesEx", "count": 1}]})
    with connect(lab.spec) as si:
        inventory = discover(si)
    assert len(inventory.hosts) == 2
    assert inventory.round_trips == 6  # one more RetrievePropertiesEx than usual


def test_connection_that_keeps_dropping_is_one_line(rack_twin, capsys):
    lab = rack_twin(LAB, faults={"drop": [{"method": "RetrievePropertiesEx", "count": -1}]})
    code, _, err = cli(lab, capsys, "plan", str(lab.spec_path))
    assert code == 1
    assert "connection dropped" in error_line(err)


def test_spec_without_password_source_fails_cleanly(tmp_path):
    spec = load_spec(REPO_ROOT / LAB).spec
    spec.vcenter.password_file = None
    spec.vcenter.password_env = None
    with pytest.raises(Exception) as info, connect(spec):
        pass
    assert "no password_env or password_file" in str(info.value)


def test_login_survives_one_dropped_connection(rack_twin):
    lab = rack_twin(LAB, faults={"drop": [{"method": "Login", "count": 1}]})
    with connect(lab.spec) as si:
        assert len(discover(si).hosts) == 2
