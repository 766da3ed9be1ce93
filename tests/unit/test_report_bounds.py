"""What a run directory holds cannot hang, exhaust or crash the report and serve (issue
"Hardening, second round", items 2, 4, 8 and 10).

Each test plants what a hostile node or a copied run could hold: one very long value, a
sparse 1 GB MANIFEST or spec.yaml (no disk used), a big tree for serve's manifest column,
a 700-level nested record, a NUL in a URL. Figures (how long, how much memory) are in
benchmarks/hostile_inputs.py; these tests assert the behaviour.
"""

from __future__ import annotations

import json

import pytest

from rackcert import serve
from rackcert.core.errors import RecordError
from rackcert.core.secrets import Redactor
from rackcert.report.assemble import assemble
from rackcert.report.build import build_report
from rackcert.report.manifest import verify
from tests.support.plugins.report import facts, write_run

LONG = ("NVIDIA-A100-" * 900)[:10_000]


def _long_gpu_run(root):
    gpus = facts("470.82.01")["nodes"]["mn-node1"]["gpus"]
    gpus[0]["name"] = LONG
    return write_run(
        root, fail={"gpu.model@mn-node1": LONG}, extra_facts={"mn-node1": {"gpus": gpus}}
    )


def test_a_long_node_value_is_cut_in_run_json_and_in_the_page(tmp_path):
    run = _long_gpu_run(tmp_path / "runs")
    build_report(run, formats=("json", "html"))
    record = json.loads((run.path / "run.json").read_text())
    gpu = record["software"]["mn-node1"]["gpu_model"]
    assert len(gpu) < 600 and gpu.endswith("more characters in facts.json]"), gpu[-80:]
    page = (run.path / "report.html").read_text()
    assert LONG[:1000] not in page  # cut everywhere it shows, the check's observed value too
    assert "more characters in run.json]" in page


def test_the_redactor_builds_its_forms_once_not_per_string():
    class Counting(Redactor):
        calls = 0

        def forms(self, secret: str) -> set[str]:
            Counting.calls += 1
            return super().forms(secret)

    redactor = Counting()
    redactor.add("s3cret&<pw>")
    redactor.add("another-secret")
    data = {"results": [{"observed": f"value {i} s3cret&<pw>"} for i in range(2000)]}
    scrubbed = redactor.scrub(data)
    assert scrubbed["results"][7]["observed"] == "value 7 ********"
    assert Counting.calls == 2  # once per secret, not once per string (49 MB: 71 s)
    assert redactor.scrub("x s3cret&amp;&lt;pw&gt; another-secret") == "x ******** ********"


def test_a_sparse_gigabyte_manifest_and_spec_are_refused_unread(tmp_path):
    run = write_run(tmp_path / "runs", stages=("plan",))
    build_report(run, formats=("json",))
    with (run.path / "MANIFEST.sha256").open("r+b") as handle:
        handle.truncate(1 << 30)
    with pytest.raises(RecordError, match="larger than"):
        verify(run.path)
    assert serve.manifest_state(run.path) == "changed"
    with (run.path / "spec.yaml").open("r+b") as handle:
        handle.truncate(1 << 30)
    info = assemble(run).run
    assert info.spec_intact is False and info.spec_file_sha256.startswith("unreadable")


def test_serve_hashes_a_run_once_and_not_past_its_bound(tmp_path, monkeypatch):
    run = write_run(tmp_path / "runs", stages=("plan",))
    build_report(run, formats=("json",))
    calls = []
    from rackcert.report import manifest

    def counted(path, real=manifest.verify):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(manifest, "verify", counted)
    assert serve.manifest_state(run.path) == "intact"
    assert serve.manifest_state(run.path) == "intact"
    assert len(calls) == 1  # cached on the tree's lstat signature
    (run.path / "facts.json").write_text("{}")
    assert serve.manifest_state(run.path) == "changed" and len(calls) == 2
    monkeypatch.setattr(serve, "MAX_HASHED", 1000)
    (run.path / "artifacts").mkdir(exist_ok=True)
    (run.path / "artifacts" / "big.bin").write_bytes(b"\0" * 2000)
    assert serve.manifest_state(run.path) == "unchecked" and len(calls) == 2


def test_report_html_carries_its_own_content_security_policy(tmp_path):
    run = write_run(tmp_path / "runs", stages=("plan",))
    build_report(run, formats=("html",))
    page = (run.path / "report.html").read_text()
    head = page[: page.index("</head>")]
    assert '<meta http-equiv="Content-Security-Policy"' in head
    assert "default-src &#39;none&#39;" in head or "default-src 'none'" in head
    assert "form-action" in head and "base-uri" in head


def test_a_runs_file_page_walks_a_bounded_number_of_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(serve, "MAX_LISTED", 50)
    run = tmp_path / "run"
    (run / "artifacts").mkdir(parents=True)
    (run / "plan.json").write_text("{}")
    (run / "artifacts" / "b.txt").write_text("b")
    names, cut = serve._listed_files(run)
    assert (names, cut) == (["artifacts/b.txt", "plan.json"], False)

    # Padding with empty folders: the walk stops at the bound and the page says so.
    for i in range(200):
        (run / "pad" / f"d{i:03}").mkdir(parents=True)
    names, cut = serve._listed_files(run)
    assert cut and len(names) <= 50
    page = serve._files_page(run, "/runs/r/run/")
    assert "listing cut at 50 entries" in page
