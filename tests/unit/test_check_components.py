"""One check-id -> component table (rackcert.core.check_components) for validate and the report.

validate's table and the report's differed (7 entries and 8, the eighth naming a check that
does not exist): each entry must name a registered check, and validate's recorded versions
and the report's matrix read the same observation as the same component.
"""

from __future__ import annotations

from rackcert.core.check_components import CHECK_COMPONENTS
from rackcert.core.results import CheckResult, Status
from rackcert.report.software import versions_from_checks
from validation.checks import load_all
from validation.runner import _versions


def test_every_entry_names_a_registered_check() -> None:
    registered = load_all()
    assert sorted(set(CHECK_COMPONENTS) - set(registered)) == []


def test_validate_and_the_report_read_each_check_as_the_same_component() -> None:
    results = [
        CheckResult(id=check, node="n1", status=Status.passed, observed=f"{i}.2.3")
        for i, check in enumerate(CHECK_COMPONENTS, start=1)
    ]
    recorded = _versions(results)
    shown = versions_from_checks(results)["n1"]
    assert recorded == shown == {c: f"{i}.2.3" for i, c in enumerate(CHECK_COMPONENTS.values(), 1)}
