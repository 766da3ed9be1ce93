"""What more than one test module needs from the old test_vsphere_session_faults.py:
tests/integration/test_vsphere_session_faults.py, tests/unit/test_vsphere_session_faults.py.
"""

from __future__ import annotations

from rackcert.core.paths import REPO_ROOT

LAB = REPO_ROOT / "inventories" / "lab.yaml"


def spec_at(tmp_path, host: str, port: int, extra: str = "") -> str:
    text = LAB.read_text()
    text = text.replace(
        "host: 127.0.0.1\n  port: 18989\n  protocol: https",
        f"host: {host}\n  port: {port}\n  protocol: http{extra}",
    )
    assert f"host: {host}" in text
    (tmp_path / "pw").write_text("a-long-password\n")
    text = text.replace("~/.cache/rackcert/lab/vcenter.password", str(tmp_path / "pw"))
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)
