"""The shipped alert rules: valid for promtool, their unit tests pass, and every rackcert
series they name is one rackcert writes (a renamed family would silently never alert)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.metrics_rules import RULES, SHIPPED_ALERTS


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], cwd=RULES, capture_output=True, text=True, timeout=60, check=False
    )


def test_promtool_checks_the_rules() -> None:
    done = _promtool("check", "rules", "rackcert.rules.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(SHIPPED_ALERTS)} rules found" in done.stdout, done.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    done = _promtool("test", "rules", "rackcert.rules.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_broken_rule_fails_its_unit_test(tmp_path: Path) -> None:
    """The unit tests can fail: the drift alert with the wrong comparison is caught."""
    (tmp_path / "rackcert.rules.test.yml").write_text(
        (RULES / "rackcert.rules.test.yml").read_text()
    )
    rules = (RULES / "rackcert.rules.yml").read_text()
    broken = rules.replace(
        "max by (spec, node) (rackcert_drift_items) > 0",
        "max by (spec, node) (rackcert_drift_items) > 5",
    )
    assert broken != rules
    (tmp_path / "rackcert.rules.yml").write_text(broken)
    done = subprocess.run(["promtool", "test", "rules", "rackcert.rules.test.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0 and "RackcertDriftFromCertified" in done.stdout + done.stderr
