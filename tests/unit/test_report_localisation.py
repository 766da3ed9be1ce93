"""The report's localisation parts (issue 34): the per-node table, the n x n link heat map with
the named link and node marked, and `report diff` naming a link or node that got worse.

From records: a run written by tests/support/plugins/report.py, its bench part given a localisation
part the way the bench stage records it (8 nodes, every pair measured)."""

from __future__ import annotations

import itertools
import json
import random
import re
from typing import Any

import pytest

from rackcert.core.localisation import read_localisation
from rackcert.core.stage_records import LocaliseRecord
from rackcert.report.assemble import assemble
from rackcert.report.diff import diff_records, format_diff
from rackcert.report.html import render_html
from rackcert.report.plots import _RED

NODES = [f"lab-node{i}" for i in range(1, 9)]
RATE = 9.6  # Gb/s: every lab link's shaped line rate in this record


def localisation(
    *, seed: int, slow_link: tuple[str, str] | None = None, slow_node: str | None = None
) -> dict[str, Any]:
    """bench.json's data.localise (schema 1) with 2 % jitter; a planted slow link at 0.3x, a
    planted slow node's compute at 0.45x; findings for what was planted, as the verdict would
    name them."""
    rnd = random.Random(seed)
    links = []
    for a, b in itertools.combinations(NODES, 2):
        gbps = RATE * (1 + rnd.uniform(-0.02, 0.02))
        if slow_link and {a, b} == set(slow_link):
            gbps = RATE * 0.3
        links.append({"a": a, "b": b, "gbps": round(gbps, 3), "latency_us": 30.0})
    nodes = []
    for n in NODES:
        gemm = 80.0 * (1 + rnd.uniform(-0.02, 0.02)) * (0.45 if n == slow_node else 1)
        units = [
            {"unit": "cpu", "pci": None, "gemm_gflops": round(gemm, 2), "memcpy_gb_s": 4.2},
            {"unit": "GPU0", "pci": "0000:17:00.0", "h2d_gb_s": 24.0, "d2h_gb_s": 25.0},
        ]
        nodes.append({"node": n, "device": "cpu", "units": units, "allreduce": None})
    findings = []
    if slow_link:
        a, b = slow_link
        findings.append(
            {"kind": "link", "nodes": [a, b], "metric": "gbps", "value": RATE * 0.3,
             "id": f"bench.link[{a}<->{b}]", "target": f"{a}<->{b}", "unit": "Gb/s",
             "observed": "2.88 Gb/s", "expected": ">= 6.72 Gb/s",
             "message": f"bench.link[{a}<->{b}]: 2.88 Gb/s, 0.30x rack median 9.60 Gb/s"}
        )  # fmt: skip
    if slow_node:
        findings.append(
            {"kind": "compute", "nodes": [slow_node], "metric": "gemm_gflops",
             "id": f"bench.compute[{slow_node}]", "target": slow_node, "value": 36.0,
             "unit": "GFLOP/s", "observed": "36 GFLOP/s", "expected": ">= 56 GFLOP/s",
             "message": f"bench.compute[{slow_node}]: 36 GFLOP/s, 0.45x rack median 80"}
        )  # fmt: skip
    rules = {"link": {"metric": "bandwidth", "unit": "Gb/s", "median_fraction": 0.7}}
    return {"schema": 1, "pattern": "round-robin", "nodes_measured": NODES, "nodes": nodes,
            "links": links, "rules": rules, "findings": findings}  # fmt: skip


@pytest.fixture(scope="module")
def base_record(tmp_path_factory):  # noqa: ANN001, ANN201
    from tests.support.plugins.report import write_run

    return assemble(write_run(tmp_path_factory.mktemp("loc") / "runs"))


def _with(record, part: dict[str, Any]):  # noqa: ANN001, ANN202
    copy = record.model_copy(deep=True)
    copy.bench.localise = LocaliseRecord.model_validate(part)
    return copy


def _section(html: str, ident: str, end: str) -> str:
    start = html.index(f'id="{ident}"')
    return html[start : html.index(end, start)]


def test_heat_map_marks_the_planted_link_and_node_and_nothing_else(base_record) -> None:  # noqa: ANN001
    part = localisation(seed=1, slow_link=("lab-node2", "lab-node5"), slow_node="lab-node7")
    html = render_html(_with(base_record, part))
    svg = _section(html, "link-heatmap", "</svg>")
    # Both cells of the named link outlined (a red rectangle each), nothing else red but the
    # named node's two axis labels.
    assert len(re.findall(rf"stroke: {_RED}", svg)) == 2, svg.count(_RED)
    red_labels = re.findall(rf"<text[^>]*fill: {_RED}[^>]*>([^<]+)</text>", svg)
    assert sorted(red_labels) == ["lab-node7", "lab-node7"]
    assert "2.88" in svg  # the slow pair's own figure, shown in its cells
    findings = _section(html, "findings", "</ul>")
    assert "bench.link[lab-node2&lt;-&gt;lab-node5]: 2.88 Gb/s" in findings
    assert "bench.compute[lab-node7]" in findings


def test_node_table_has_every_node_its_figures_and_what_names_it(base_record) -> None:  # noqa: ANN001
    part = localisation(seed=2, slow_node="lab-node3")
    html = render_html(_with(base_record, part))
    table = _section(html, "node-table", "</table>")
    rows = re.findall(r"<tr(?: class=\"c-fail\")?><td class=\"mono\">(lab-node\d)</td>", table)
    assert rows == NODES
    failing = re.findall(r"<tr class=\"c-fail\"><td class=\"mono\">(lab-node\d)</td>", table)
    assert failing == ["lab-node3"]
    row3 = table[table.index(">lab-node3<") :]
    row3 = row3[: row3.index("</tr>")]
    assert '<td class="bad">' in row3 and "bench.compute[lab-node3]" in row3
    assert "7" in row3  # 7 links per node at 8 nodes
    gpus = _section(html, "gpu-table", "</table>")
    assert gpus.count("0000:17:00.0") == len(NODES) and "c-fail" not in gpus


def test_clean_run_marks_nothing(base_record) -> None:  # noqa: ANN001
    html = render_html(_with(base_record, localisation(seed=3)))
    svg = _section(html, "link-heatmap", "</svg>")
    assert _RED not in svg
    assert "No node, GPU or link stands out" in html
    assert 'class="c-fail"><td class="mono">lab-node' not in html


def test_hostile_node_names_stay_text(base_record) -> None:  # noqa: ANN001
    part = localisation(seed=4, slow_link=("lab-node1", "lab-node2"))
    evil = "<script>x</script>$\\frac{1}{2}$"
    part = json.loads(json.dumps(part).replace("lab-node1", json.dumps(evil)[1:-1]))
    html = render_html(_with(base_record, part))
    assert "<script>" not in html
    assert "&lt;script&gt;" in _section(html, "link-heatmap", "</svg>")


def test_without_localisation_the_report_has_no_such_section(base_record) -> None:  # noqa: ANN001
    html = render_html(base_record)
    assert 'id="link-heatmap"' not in html and 'id="node-table"' not in html


def test_diff_names_the_link_and_node_that_got_worse_only(base_record) -> None:  # noqa: ANN001
    before = _with(base_record, localisation(seed=5))
    after = _with(
        base_record,
        localisation(seed=6, slow_link=("lab-node4", "lab-node8"), slow_node="lab-node6"),
    )
    d = diff_records(before, after)
    worse = sorted(m.figure for m in d.figures if m.worse)
    assert worse == ["link lab-node4<->lab-node8 Gb/s", "node lab-node6 gemm_gflops"]
    assert d.regressed
    assert any(
        r.startswith("newly named: bench.link[lab-node4<->lab-node8]") for r in d.regressions
    )
    assert any(r.startswith("newly named: bench.compute[lab-node6]") for r in d.regressions)
    text = "\n".join(format_diff(d))
    assert re.search(r"worse link lab-node4<->lab-node8 Gb/s: 9\.\d+ -> 2\.88 \(-69\.\d%", text)


def test_diff_of_two_clean_runs_is_no_regression(base_record) -> None:  # noqa: ANN001
    for seed in range(10):  # 2 % jitter on 28 links and 8 nodes: none beyond the 5 % floor
        d = diff_records(
            _with(base_record, localisation(seed=100 + seed)),
            _with(base_record, localisation(seed=200 + seed)),
        )
        assert not [m.figure for m in d.figures if m.worse], seed
        assert not d.named and not d.regressed, d.regressions


def test_the_same_culprit_again_is_not_newly_named(base_record) -> None:  # noqa: ANN001
    part = localisation(seed=7, slow_link=("lab-node2", "lab-node3"))
    d = diff_records(
        _with(base_record, part),
        _with(base_record, localisation(seed=8, slow_link=("lab-node2", "lab-node3"))),
    )
    assert d.named == [] and not d.regressed, d.regressions


def test_reader_leaves_out_what_it_cannot_read() -> None:
    """A probe's own figures are kept only when they are finite numbers; a link from a node
    to itself is no link; a finding that names no node names nothing."""
    part = LocaliseRecord.model_validate(
        {
            "nodes": [
                {"node": "a", "units": [{"unit": "cpu", "x": "fast", "y": float("nan"), "z": 2}]}
            ],
            "links": [{"a": "a", "b": "a", "gbps": 1}, {"a": "a", "b": "b", "gbps": None}],
            "findings": [
                {"kind": "node", "nodes": [], "id": "x", "target": "a", "metric": "m",
                 "value": 1.0, "unit": "u", "observed": "", "expected": "", "message": ""}
            ],
        }
    )  # fmt: skip
    loc = read_localisation(part)
    assert loc is not None
    assert [n.figures for n in loc.nodes] == [{"z": 2.0}]
    assert [(x.a, x.b, x.gbps) for x in loc.links] == [("a", "b", None)]
    assert loc.findings == []
    assert read_localisation(None) is None
