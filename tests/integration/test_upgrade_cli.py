"""`rackcert upgrade SPEC --plan` on the lab's spec against a certified run directory: the
plan printed, the refusals as one line and exit 2, nothing written. The roll itself, and the
rollback's wiring (the node pinned to what its forward configure run recorded), run with the
real roles in tests/integration/test_upgrade_lab.py."""

from __future__ import annotations

import yaml

from rackcert.cli import main
from tests.support.plugins.upgrade_cli import new_spec as _new_spec


def test_a_roll_off_a_terminal_needs_a_scheduler_and_yes(tmp_path, certified, capsys):
    spec = _new_spec(tmp_path, "470.141.03", esxi=None)
    assert main(["upgrade", str(spec), "--yes", "--runs-dir", str(certified)]) == 2
    assert "no terminal to ask on; add upgrade.hooks" in capsys.readouterr().err
    data = yaml.safe_load(spec.read_text())
    data["upgrade"] = {
        "hooks": {
            "drain_command": ["true", "{node}"],
            "jobs_command": ["echo", "0"],
            "resume_command": ["true", "{node}"],
        }
    }
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["upgrade", str(spec), "--runs-dir", str(certified)]) == 2
    assert "pass --yes" in capsys.readouterr().err
    assert list((certified / "lab").iterdir()) == [next((certified / "lab").iterdir())]
