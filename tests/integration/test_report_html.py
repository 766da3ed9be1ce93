"""The HTML report: self-contained, verdict on top, matrix, checks failures first, both plots."""

from __future__ import annotations

import re

from rackcert.report.assemble import assemble
from rackcert.report.html import render_html


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


def test_the_header_says_what_the_spec_says_it_certifies(built_pair, tmp_path):
    html = _html(built_pair)
    header = html[: html.index("</header>")]
    assert 'id="description"' in header
    assert "Dell PowerEdge R750xa, 4 x A100 PCIe per host, vSphere 7.0.3" in header

    # A description is the spec author's text: escaped, stripped of control characters, capped.
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import load_spec
    from tests.support.plugins.report import SPEC

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
