"""One test per (node, check): report the node's judged result, record the CheckResult.

Not part of rackcert's own test suite (tests/ is): the validate runner starts
pytest on this file with the plugin validation.suite.plugin.
"""

from __future__ import annotations

from rackcert.core.results import Status
from validation.suite.plugin import CheckFailed, CheckSkipped


def test_check(rackcert_case, rackcert_gathered, rackcert_events) -> None:
    res = rackcert_gathered[rackcert_case.node].results[rackcert_case.check_id]
    rackcert_events.emit(event="result", result=res.model_dump(mode="json"))
    if res.status is Status.skipped:
        raise CheckSkipped(res.reason)
    if res.status is not Status.passed:
        raise CheckFailed(f"{res.id} on {res.node}: {res.reason} (fix: {res.fix})")
