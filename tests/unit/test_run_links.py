"""Symbolic links in a run directory reach nothing outside it (issue "Hardening, second
round", item 5).

A run directory may come from elsewhere. Planted links made `--run DIR` overwrite their
targets (pytest.log, the inventory, extra vars, launch logs) and made the manifest publish
the sha256 of the file behind them (a password file). A run with a link leaving it is
refused in one line, before anything is written; a link inside the run is hashed as a link.
"""

from __future__ import annotations

import hashlib
import os

from rackcert.core.runs import RunDir
from rackcert.report.manifest import file_digests
from tests.support.plugins.report import write_run


def test_a_link_inside_the_run_is_hashed_as_a_link_not_as_its_target(tmp_path):
    run = write_run(tmp_path / "runs", stages=("plan",))
    (run.path / "spec-link.yaml").symlink_to("spec.yaml")
    RunDir.open(run.path)  # a link that stays inside is allowed
    digests = file_digests(run.path)
    content = hashlib.sha256((run.path / "spec.yaml").read_bytes()).hexdigest()
    assert digests["spec.yaml"] == content
    assert digests["spec-link.yaml"] != content
    assert (
        digests["spec-link.yaml"]
        == hashlib.sha256(
            f"rackcert-special:link->{os.readlink(run.path / 'spec-link.yaml')}".encode()
        ).hexdigest()
    )
