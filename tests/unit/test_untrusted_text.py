"""Text from nodes and run directories steers nothing: no Rich markup, no terminal escapes, no
ill-formed XML (issue "Hardening, second round", item 3).

Payloads as a hostile node or a planted run would send them: `[/]` (a markup close tag that
crashed `validate` and `runs list` with MarkupError), OSC 52 (clipboard write), OSC 8
(hyperlink), cursor movement and erase (a file name that painted a green "OK" over
`report verify`'s own failure), and an ESC byte in a check's observed value (junit.xml).
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.untrusted import _CONTROLS, _SEQUENCES, cap, strip_controls, visible, xml_text
from tests.support.plugins.report import write_run
from tests.support.untrusted_text import MARKUP, OSC52
from validation.junit import junit_xml
from validation.probes import BEGIN, END, split_output

OSC8 = "\x1b]8;;http://x.test/\x1b\\click\x1b]8;;\x1b\\"


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
