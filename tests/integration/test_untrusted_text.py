"""Text from nodes and run directories steers nothing: no Rich markup, no terminal escapes, no
ill-formed XML (issue "Hardening, second round", item 3).

Payloads as a hostile node or a planted run would send them: `[/]` (a markup close tag that
crashed `validate` and `runs list` with MarkupError), OSC 52 (clipboard write), OSC 8
(hyperlink), cursor movement and erase (a file name that painted a green "OK" over
`report verify`'s own failure), and an ESC byte in a check's observed value (junit.xml).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.support.plugins.report import write_run
from tests.support.untrusted_text import MARKUP, OSC52

FORGE = "\x1b[2K\x1b[1A\rOK 13 files match"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def test_runs_list_shows_a_hostile_meta_json_as_text(tmp_path):
    run = write_run(tmp_path / "runs", stages=("plan",))
    meta = json.loads((run.path / "meta.json").read_text())
    meta["created_at"] = f"[/]{OSC52}"
    (run.path / "meta.json").write_text(json.dumps(meta))
    done = _cli("runs", "list", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "[/]" in done.stdout and "\\x1b]52" in done.stdout
    assert "\x1b" not in done.stdout + done.stderr and "internal error" not in done.stderr


def test_report_verify_cannot_paint_ok_over_its_own_failure(tmp_path):
    from rackcert.report.build import build_report

    run = write_run(tmp_path / "runs")
    build_report(run, formats=("json",))
    (run.path / f"x{FORGE}\n[green]OK").write_text("planted")
    done = _cli("report", "verify", str(run.path))
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "\x1b" not in out
    assert not any(line.startswith(("OK", "\rOK")) for line in out.splitlines()), out
    assert "added: x\\x1b[2K" in done.stdout


def test_report_diff_prints_markup_from_a_node_as_text(tmp_path):
    root = tmp_path / "runs"
    a = write_run(root)
    b = write_run(root, drivers={"mn-node1": f"470 {MARKUP}{OSC52}"})
    done = _cli("report", "diff", str(a.path), str(b.path))
    assert "internal error" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stderr
    assert MARKUP in done.stdout and "\x1b" not in done.stdout
    shutil.rmtree(root)


def test_validate_with_a_hostile_gpu_name_records_it_cut_and_prints_it_inert(
    tmp_path, fake_gpu_tools
):
    """A node's GPU name of 10,000 characters with markup and escapes (a fake nvidia-smi on
    this machine, `validate --local`): no crash, no escape on the terminal, cut in the record."""
    from pathlib import Path

    name = f"NVIDIA Z100 {MARKUP}{OSC52}" + "X" * 10_000  # not the H200 the spec wants
    tools = fake_gpu_tools({"h200-node1": {"name": name}})
    runs = tmp_path / "runs"
    spec = Path(__file__).resolve().parents[2] / "inventories" / "h200-local.yaml"
    done = _cli(
        "validate", str(spec), "--local", "--runs-dir", str(runs), "--check", "gpu.model",
        "--tool-path", tools, "--no-facts",
    )  # fmt: skip
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and "\x1b" not in done.stdout + done.stderr
    assert f"NVIDIA Z100 {MARKUP}XXXX" in done.stdout  # the OSC 52 sequence gone where parsed
    record = json.loads(next(runs.glob("*/*/validate.json")).read_text())
    observed = next(r for r in record["data"]["results"] if r["id"] == "gpu.model")["observed"]
    assert len(observed) < 700
    assert observed.endswith("more characters in artifacts/validate/events.jsonl]")
    events = next(runs.glob("*/*/artifacts/validate/events.jsonl")).read_text()
    assert "X" * 10_000 in events  # the whole value is kept where the record says
