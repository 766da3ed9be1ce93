"""The vgpu_license role for real: the licence token reaches the node, and nowhere else.

The spec points to an NVIDIA License System client configuration token on the controller
(guest.vgpu_license_token_file); Ansible copies it to the node's token directory with mode
744 (NVIDIA License System User Guide) under no_log. The token's content must be in no
record, event or artifact of the run, and a second run changes nothing.
"""

from __future__ import annotations

import secrets
import stat
from pathlib import Path

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from tests.support.plugins.configure import spec_for_hosts

TOKEN_PATH = "/etc/nvidia/ClientConfigToken/client_configuration_token.tok"


def test_the_token_reaches_the_node_and_no_record(ssh_hosts, tmp_path: Path) -> None:
    (node,) = ssh_hosts(["node1"])
    content = "eyJ-fake-client-token-" + secrets.token_hex(16)
    token = tmp_path / "client_configuration_token.tok"
    token.write_text(content)
    token.chmod(0o600)
    loaded = spec_for_hosts(
        [node], tmp_path / "spec", guest={"vgpu_license_token_file": str(token)}
    )
    runs = tmp_path / "runs"
    first_run = RunDir.create(runs, "lab", loaded.sha256, loaded.text)
    first = configure(loaded, first_run, tags=["vgpu_license"])
    assert first.status == "ok", first.error
    installed = node.path(TOKEN_PATH)
    assert installed.read_text() == content
    assert stat.S_IMODE(installed.stat().st_mode) == 0o744
    assert not Path(TOKEN_PATH).exists() or Path(TOKEN_PATH).read_text() != content
    second_run = RunDir.create(runs, "lab", loaded.sha256, loaded.text)
    second = configure(loaded, second_run, tags=["vgpu_license"])
    assert second.status == "ok" and second.data.totals.changed == 0, second.data.totals
    leaked = [
        p
        for run in (first_run, second_run)
        for p in run.path.rglob("*")
        if p.is_file() and content in p.read_text(errors="ignore")
    ]
    assert leaked == []


def test_without_a_token_the_licence_is_left_alone(ssh_hosts, tmp_path: Path) -> None:
    (node,) = ssh_hosts(["node1"])
    loaded = spec_for_hosts([node], tmp_path / "spec")
    run = RunDir.create(tmp_path / "runs", "lab", loaded.sha256, loaded.text)
    result = configure(loaded, run, tags=["vgpu_license"])
    assert result.status == "ok" and result.data.totals.changed == 0
    assert not node.path(TOKEN_PATH).exists()
