"""Text from nodes and run directories steers nothing: no Rich markup, no terminal escapes, no
ill-formed XML (issue "Hardening, second round", item 3).

Payloads as a hostile node or a planted run would send them: `[/]` (a markup close tag that
crashed `validate` and `runs list` with MarkupError), OSC 52 (clipboard write), OSC 8
(hyperlink), cursor movement and erase (a file name that painted a green "OK" over
`report verify`'s own failure), and an ESC byte in a check's observed value (junit.xml).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.untrusted import _CONTROLS, _SEQUENCES, cap, strip_controls, visible, xml_text
from tests.plugins.report import write_run
from validation.junit import junit_xml
from validation.probes import BEGIN, END, split_output

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
OSC8 = "\x1b]8;;http://x.test/\x1b\\click\x1b]8;;\x1b\\"
FORGE = "\x1b[2K\x1b[1A\rOK 13 files match"
MARKUP = "[/] [bold red]FAKE[/]"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def test_helpers_strip_show_and_cap():
    assert strip_controls(f"a{OSC52}b\tc\nd\x9b2J") == "ab\tc\nd"  # whole sequences go
    assert strip_controls("\t\x1b[4mGPU0\tGPU1\x1b[0m") == "\tGPU0\tGPU1"  # topo -m's header
    assert visible("x\x1b[1A\ny\u202e") == "x\\x1b[1A\\ny\\u202e"
    assert xml_text("ok\x1b\x00") == "ok\\x1b\\x00"
    assert cap("a" * 600, 512, "facts.json") == "a" * 512 + "... [88 more characters in facts.json]"
    assert cap("short") == "short"


_TRICKY = "ab\t\n\r\x00\x07\x0b\x1b[]0;4m\\\x7f\x80\x9b\x9c\x9d\x9f\xa0\u00e9\x1f "


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_TRICKY, max_size=30) | st.text(st.characters(max_codepoint=127)))
def test_strip_controls_fast_path_removes_what_the_expressions_remove(text: str):
    # ASCII text without ESC takes bytes.translate (the probe output's usual case); the
    # answer must be the one the two regular expressions give, whatever the text.
    assert strip_controls(text) == _CONTROLS.sub("", _SEQUENCES.sub("", text))


def test_probe_output_loses_its_control_characters_where_it_is_parsed():
    stdout = f"{BEGIN} gpus@@\nNVIDIA A100{OSC52}{OSC8}\x1b[31mX\r\n{END} gpus 0@@\n"
    text = split_output(stdout)["gpus"].text
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert text.startswith("NVIDIA A100")


def test_junit_stays_well_formed_with_escapes_from_a_node():
    result = CheckResult(
        id="gpu.model",
        node="node1",
        severity=Severity.error,
        status=Status.failed,
        observed=f"A100{OSC52}\x00",
        expected="A100",
        reason=f"saw \x1b[2J{MARKUP}",
    )
    root = ET.fromstring(junit_xml([result]))  # ill-formed XML raises here
    failure = root.find("./testsuite/testcase/failure")
    assert failure is not None and "\\x1b" in failure.text and "\\x1b" in failure.get("message")


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


def test_validate_summary_prints_markup_from_a_node_as_text(tmp_path):
    from rackcert.cli import common
    from rackcert.cli.display import show_validate

    run = write_run(tmp_path / "runs", fail={"gpu.model@mn-node1": f"A100 {MARKUP}{OSC8}"})
    record = run.read_record("validate")
    buffer = io.StringIO()
    terminal = type(common.console)(file=buffer, force_terminal=True, width=200)
    show_validate(terminal, record, run.path / "validate.json", run.path / "junit.xml")
    out = buffer.getvalue()
    assert f"A100 {MARKUP}" in out and "\\x1b]8;;http://x.test/" in out
    assert "\x1b]" not in out  # the terminal gets colours only, no OSC sequence


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
    spec = Path(__file__).resolve().parents[1] / "inventories" / "h200-local.yaml"
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
