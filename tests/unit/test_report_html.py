"""The HTML report: self-contained, verdict on top, matrix, checks failures first, both plots."""

from __future__ import annotations

from rackcert.report.assemble import assemble
from rackcert.report.html import checks_by_node, render_html


def test_failed_checks_first_with_fix_hints(report_runs):
    run = report_runs(
        fail={
            "gpu.driver@mn-node3": "470.57.02",
            "net.mtu@mn-node3": "1500",
            "storage.mount@mn-node2": "not mounted",
        }
    )
    rec = assemble(run)
    groups = checks_by_node(rec.checks)
    assert [g["node"] for g in groups][:2] == ["mn-node3", "mn-node2"]
    assert [c.status.value for c in groups[0]["checks"][:3]] == ["fail", "fail", "pass"]
    html = render_html(rec)
    checks = html[html.index('id="checks"') :]
    first = checks.index('data-node="mn-node3"')
    assert first < checks.index('data-node="mn-node2"') < checks.index('data-node="esx01"')
    assert "Install the pinned driver (rackcert configure)" in checks
    assert "Set MTU 9000 (role network)" in checks
    # a passing check's fix hint is not shown
    node1 = checks[checks.index('data-node="mn-node1"') :]
    node1 = node1[: node1.index("</table>")]
    assert "Set MTU 9000" not in node1
    assert 'data-verdict="FAIL"' in html


def test_partial_run_report_names_missing_stages(report_runs):
    html = render_html(assemble(report_runs(stages=("plan",))))
    assert 'data-verdict="INCOMPLETE"' in html
    assert "Stages not recorded in this run: provision, configure, validate, bench." in html
    assert "No ResNet50 figures recorded (stage bench missing)" in html
    assert "No check results recorded (stage validate missing)" in html
    assert html.count("<svg") == 0


def test_recorded_text_is_escaped(report_runs):
    run = report_runs(fail={"gpu.model@mn-node1": "<script>alert(1)</script>"})
    html = render_html(assemble(run))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_dollar_signs_in_recorded_names_are_drawn_as_text(report_runs):
    """matplotlib read `$...$` in a model name as mathtext: an odd count crashed the plot."""
    import json

    run = report_runs()
    bench = json.loads((run.path / "bench.json").read_text())
    bench["data"]["resnet50"]["model"] = "resnet50 $\\frac{$ v2"  # unbalanced braces
    bench["data"]["allreduce"]["backend"] = "gloo $x^$"
    (run.path / "bench.json").write_text(json.dumps(bench))
    html = render_html(assemble(run))
    assert html.count("<svg") == 2
    assert "resnet50 $\\frac{$ v2 weak-scaling speedup" in html
