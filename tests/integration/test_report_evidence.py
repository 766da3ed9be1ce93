"""The report reads the real records other stages committed as evidence (docs/evidence/)."""

from __future__ import annotations

from rackcert.report.assemble import assemble
from rackcert.report.html import render_html
from tests.support.plugins.report_evidence import REF


def test_h200_evidence_renders(h200_run):
    rec = assemble(h200_run, reference=REF)
    html = render_html(rec)
    ips = rec.bench.resnet50.points[0].images_per_sec
    assert f"{ips:,.2f}" in html
    assert html.count("<svg") == 2
    if rec.bench.allreduce.note:
        assert rec.bench.allreduce.note.split(":")[0] in html
    assert "not shown: this benchmark did not run on the reference's GPU model" in html
