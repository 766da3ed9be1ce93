"""One test per (node, check): judge the gathered outputs, record the CheckResult.

Not part of rackcert's own test suite (tests/ is): the validate runner starts
pytest on this file with the plugin validation.suite.plugin.
"""

from __future__ import annotations

import pytest

from rackcert.results import Status
from validation.checks import REGISTRY, NodeView, Outcome, result, run_check


def test_check(host, rackcert_case, rackcert_gathered, rackcert_events) -> None:
    defn = REGISTRY[rackcert_case.check_id]
    got = rackcert_gathered[rackcert_case.node]
    if not got.reachable:
        if defn.id == "node.reachable":
            outcome = Outcome(
                Status.failed, "unreachable", str(host.backend.get_pytest_id()), got.error
            )
        else:
            outcome = Outcome(Status.skipped, reason="not run: node unreachable")
        res = result(defn, rackcert_case.node, outcome)
    else:
        res = run_check(defn, NodeView(rackcert_case.target.expect, got.outputs))
    rackcert_events.emit(event="result", result=res.model_dump(mode="json"))
    if res.status is Status.skipped:
        pytest.skip(res.reason)
    assert res.status is Status.passed, f"{res.id} on {res.node}: {res.reason} (fix: {res.fix})"
