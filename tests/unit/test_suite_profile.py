"""tools/suite_profile.py: where a run's time went, per module, from what the run recorded."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import REPO


def _tool() -> ModuleType:
    """tools/ is scripts, not a package: load the file (registered, as dataclasses need)."""
    if "suite_profile" not in sys.modules:
        path = REPO / "tools" / "suite_profile.py"
        spec = importlib.util.spec_from_file_location("suite_profile", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["suite_profile"] = module
        spec.loader.exec_module(module)
    return sys.modules["suite_profile"]


DURATIONS = """\
============================= slowest durations ==============================
30.00s call     tests/integration/test_a.py::test_one
10.00s setup    tests/integration/test_a.py::test_one
 5.00s call     tests/integration/test_a.py::test_two[x-1]
 4.00s call     tests/unit/test_b.py::test_three
 1.00s teardown tests/unit/test_b.py::test_three
=========================== 3 passed in 25.00s ===========================
"""


def test_durations_are_summed_per_module_with_tests_and_share(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run.txt"
    run.write_text(DURATIONS)
    assert _tool().main([str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["module", "tests", "seconds", "share"]
    assert lines[1].split() == ["tests/integration/test_a.py", "2", "45.0", "90.0%"]
    assert lines[2].split() == ["tests/unit/test_b.py", "1", "5.0", "10.0%"]
    assert lines[3].split() == ["total", "3", "50.0", "100.0%"]


def test_junit_times_count_per_module_and_top_folds_the_rest(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run.xml"
    run.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.unit.test_b" name="test_x" time="1.5"/>'
        '<testcase classname="tests.integration.test_a" name="test_y" time="6"/>'
        '<testcase classname="tests.integration.test_a.TestGroup" name="test_z" time="2.5"/>'
        "</testsuite></testsuites>"
    )
    assert _tool().main([str(run), "--top", "1", "--schedule", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["tests/integration/test_a.py", "2", "8.5", "85.0%"]
    assert lines[2].split() == ["(1", "more", "modules)", "1", "1.5", "15.0%"]
    assert lines[-1] == '    "tests/integration/test_a.py": 8,'


@pytest.mark.parametrize("text", ["", "no durations here\n"])
def test_a_run_without_durations_is_one_line_exit_2(tmp_path: Path, capsys, text: str) -> None:
    run = tmp_path / "run.txt"
    run.write_text(text)
    assert _tool().main([str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--durations=0" in err
