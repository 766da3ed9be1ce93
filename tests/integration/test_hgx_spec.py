"""HGX boards and vendor device groups in the spec: each refused case gives its one-line error.

The example is inventories/hgx-h200-4node.yaml; each case breaks one thing in a copy and
asserts the whole error line: file, line, field and the statement it follows.
"""

from __future__ import annotations

import subprocess
import sys

from tests.support.hgx_spec import HGX
from tests.support.hgx_spec import hgx_data as _hgx
from tests.support.spec_helpers import mutated, write_spec


def test_spec_check_cli_says_one_line_and_exits_non_zero(tmp_path):
    bad = write_spec(tmp_path, mutated(_hgx(), lambda d: d["vcenter"].update(version="7.0.3")))
    done = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "spec", "check", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    out = (done.stdout + done.stderr).strip()
    assert "Traceback" not in out
    assert "vcenter.version: VM 'train8-a'" in out
    assert len([line for line in out.splitlines() if "vcenter.version" in line]) == 1


def test_spec_check_shows_each_vms_partition():
    done = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "spec", "check", str(HGX)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "pair-f | hgx04 | partition-6 (modules 6, 8): device group of 2 x vGPU grid_h200x-141c"
        in done.stdout
    )
    assert "train8-a | hgx01 | partition-0 (modules 1, 2, 3, 4, 5, 6, 7, 8)" in done.stdout
