"""`rackcert serve` over a runs directory someone else could write: what a planted run cannot do.

One real `rackcert serve` process over a runs root holding a genuine failed run and planted
ones: a spec whose password_file is a FIFO, a spec whose password_file holds the word FAIL,
a report.html and an SVG with scripts, malformed records (meta.json a list, a stage record
a number, a 3,000-deep spec.yaml). Requests are sent with the Host header a DNS-rebinding
page would send.
"""

from __future__ import annotations

import json

from rackcert.report.build import build_report
from tests.support.plugins.report import write_run
from tests.support.plugins.report_serve_hostile import plant_spec as _plant_spec


def test_what_one_run_teaches_the_redactor_masks_no_other_run(tmp_path):
    """Building a planted run's report first must not mask the word FAIL in the next one."""
    (tmp_path / "word").write_text("FAIL\n")
    planted = write_run(tmp_path / "runs")
    _plant_spec(planted, str(tmp_path / "word"))
    failed = write_run(tmp_path / "runs", fail={"net.mtu@mn-node1": "1500"})
    build_report(planted, formats=("json", "html"))
    outcome = build_report(failed, formats=("json", "html"))
    assert outcome.verdict == "FAIL"
    assert 'data-verdict="FAIL"' in (failed.path / "report.html").read_text()
    assert json.loads((failed.path / "run.json").read_text())["verdict"]["verdict"] == "FAIL"
