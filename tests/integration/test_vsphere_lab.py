"""`rackcert lab up|status|down` start and stop a detached twin from a spec."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import yaml

from rackcert.cli import main
from rackcert.core.paths import REPO_ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_up_plan_provision_down(tmp_path: Path, capsys, vcsim_binary):
    data = yaml.safe_load((REPO_ROOT / "inventories" / "lab.yaml").read_text())
    port = _free_port()
    data["vcenter"].update(port=port, password_file=str(tmp_path / "lab" / "vcenter.password"))
    data["vcenter"]["tls"]["ca_file"] = str(tmp_path / "lab" / "vcsim-cert.pem")
    data["guest"]["ssh"]["key_file"] = str(tmp_path / "lab" / "id_ed25519")
    # No guest agent here (--no-ssh-hosts): no VM would ever boot, so provision leaves them off.
    spec = tmp_path / "lab.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    runs = ["--runs-dir", str(tmp_path / "runs")]
    try:
        assert main(["lab", "up", str(spec), "--no-ssh-hosts"]) == 0
        assert (tmp_path / "lab" / "vcsim-cert.pem").is_file()
        assert oct((tmp_path / "lab" / "vcenter.password").stat().st_mode & 0o777) == "0o600"
        capsys.readouterr()
        assert main(["lab", "status", str(spec), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["running"] and status["port"] == port
        assert (tmp_path / "lab" / "id_ed25519.pub").is_file()  # lab up made the guests' key
        assert main(["provision", str(spec), "--yes", "--no-power-on", *runs]) == 0
        capsys.readouterr()
        assert main(["plan", str(spec), "--json", *runs]) == 0
        actions = json.loads(capsys.readouterr().out)["actions"]
        # Built and configured: what is left is to power the VMs on and wait for their guests.
        assert [(a["kind"], a["target"]) for a in actions] == [
            ("vm.power_on", "lab-node1"),
            ("vm.power_on", "lab-node2"),
            ("vm.wait", "lab-node1"),
            ("vm.wait", "lab-node2"),
        ]
    finally:
        assert main(["lab", "down", str(spec), "--no-ssh-hosts"]) == 0
    capsys.readouterr()
    main(["lab", "status", str(spec), "--json"])
    assert json.loads(capsys.readouterr().out)["running"] is False
