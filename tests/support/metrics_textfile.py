"""What more than one test module needs from the old test_metrics_textfile.py:
tests/integration/test_metrics_textfile.py, tests/unit/test_metrics_textfile.py.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from rackcert.core.results import CheckResult
from rackcert.core.stage_records import ValidateData, ValidateNode, ValidateRecord


def samples(text: bytes | str) -> list[tuple[str, dict[str, str], float]]:
    body = text.decode() if isinstance(text, bytes) else text
    return [
        (s.name, s.labels, s.value)
        for fam in text_string_to_metric_families(body)
        for s in fam.samples
    ]


def validate_record(results: list[CheckResult], nodes: dict[str, ValidateNode]) -> ValidateRecord:
    return ValidateRecord(
        rack="lab",
        spec_sha256="0" * 64,
        status="failed",
        started_at="2026-12-04T10:00:00.000000Z",
        finished_at="2026-12-04T10:00:05.500000Z",
        data=ValidateData(results=results, nodes=nodes),
    )
