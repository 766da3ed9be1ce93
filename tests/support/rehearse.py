"""What more than one test module needs from the old test_rehearse.py:
tests/integration/test_hgx_provision.py, tests/integration/test_rehearse.py,
tests/unit/test_rehearse.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rackcert.core.capture.model import comparable, load_capture


def capture_cli(lab: Any, capsys: Any, path: Path, *more: str) -> dict[str, Any]:
    from rackcert.cli import main

    capsys.readouterr()
    code = main(["capture", str(lab.spec_path), "-o", str(path), *more])
    assert code == 0, capsys.readouterr().err
    return json.loads(path.read_text())


def round_trip(capsys: Any, tmp_path: Path, lab: Any) -> dict[str, Any]:
    """Capture `lab`, serve the capture with `lab up --capture`, capture that: both equal."""
    first = capture_cli(lab, capsys, tmp_path / "first.json")
    from provision.capture import capture
    from rackcert.rehearse import twin_of

    with twin_of(load_capture(tmp_path / "first.json"), lab.spec, tmp_path / "replay") as (
        _twin,
        spec,
    ):
        from provision.session import connect

        with connect(spec) as si:
            second, _ = capture(si)
    assert comparable(second) == comparable(load_capture(tmp_path / "first.json"))
    assert second.inventory_digest == first["inventory_digest"]
    return first
