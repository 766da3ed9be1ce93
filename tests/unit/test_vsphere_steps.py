"""Every action kind the planner can emit has its step in provision's one table, or is a
finding the planner always blocks: a new kind without a step fails here, not on a rack."""

from __future__ import annotations

import re

from provision import planner
from provision.apply import STEPS
from rackcert.core.paths import REPO_ROOT


def _emitted_kinds() -> set[str]:
    source = (REPO_ROOT / "provision" / "planner.py").read_text()
    return set(re.findall(r'kind="([a-z_]+\.[a-z_]+)"', source))


def test_every_planned_kind_has_a_step_or_is_report_only():
    kinds = _emitted_kinds()
    assert {"host.ats", "vm.clone", "vm.wait"} <= kinds  # the scan reads the planner
    missing = kinds - set(STEPS) - set(planner.REPORT_ONLY_KINDS)
    assert missing == set()
    assert not set(STEPS) & set(planner.REPORT_ONLY_KINDS)


def test_report_only_kinds_are_always_blocked():
    source = (REPO_ROOT / "provision" / "planner.py").read_text()
    for kind in planner.REPORT_ONLY_KINDS:
        start = source.index(f'kind="{kind}"')
        call = source[start : source.index("\n    )", start)]
        assert "blocked=" in call, kind
