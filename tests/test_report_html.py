"""The HTML report: self-contained, verdict on top, matrix, checks failures first, both plots."""

from __future__ import annotations

import re

from rackcert.report.assemble import assemble
from rackcert.report.html import checks_by_node, render_html


def _html(built_pair, which: int = 1) -> str:
    return (built_pair[which].path / "report.html").read_text()


def test_self_contained_nothing_fetched(built_pair):
    html = _html(built_pair)
    assert "<style>" in html and "<link" not in html and "<script" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", html)
    assert html.count("<svg") == 2  # both figures inline


def test_verdict_on_top_then_matrix_checks_plots(built_pair):
    html = _html(built_pair)
    order = [
        html.index(m)
        for m in (
            'id="verdict"',
            'id="matrix"',
            'id="hardware"',
            'id="checks"',
            'id="scaling-plot"',
            'id="allreduce-plot"',
            'id="metadata"',
        )
    ]
    assert order == sorted(order)
    assert 'data-verdict="PASS"' in html
    assert (
        "Reference data, not NVIDIA&#39;s list." in html
        or "Reference data, not NVIDIA's list" in html
    )


def test_table2_and_figure2_like_content(built_pair):
    html = _html(built_pair)
    table = html[html.index('id="throughput-table"') :]
    table = table[: table.index("</table>")]
    for figure in ("2,757.21", "5,391.75", "10,675.09"):
        assert figure in table
    assert "1.96x" in table and "3.87x" in table and "96.8%" in table
    svg = html[html.index('id="scaling-plot"') :]
    assert "linear" in svg[: svg.index("</svg>")] and "measured" in svg[: svg.index("</svg>")]
    ar = html[html.index('id="allreduce-plot"') :]
    assert "busbw" in ar[: ar.index("</svg>")] and "line rate 100 Gb/s" in ar


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


def test_the_header_says_what_the_spec_says_it_certifies(built_pair, tmp_path):
    html = _html(built_pair)
    header = html[: html.index("</header>")]
    assert 'id="description"' in header
    assert "Dell PowerEdge R750xa, 4 x A100 PCIe per host, vSphere 7.0.3" in header

    # A description is the spec author's text: escaped, stripped of control characters, capped.
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import load_spec
    from tests.plugins.report import SPEC

    loaded = load_spec(SPEC)
    hostile = "Horovod left out\x1b[31m <script>alert(1)</script> " + "x" * 1000
    text = loaded.text.replace(
        "description: Dell PowerEdge R750xa, 4 x A100 PCIe per host, vSphere 7.0.3",
        f"description: {hostile!r}".replace("\\x1b", "\\e").replace("'", '"'),
    )
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, text)
    record = assemble(run)
    assert record.run.description.startswith("Horovod left out[31m <script>")
    assert len(record.run.description) == 400
    page = render_html(record)
    assert "&lt;script&gt;alert(1)" in page and "<script>alert" not in page
