"""JUnit XML from CheckResults, for CI systems: one testsuite per node, one case per check.

JUnit agrees with validate's exit code: only a check of severity error that fails or
errors is a <failure>/<error>. A failing warning (or info) check does not fail the run,
so it is a passing case whose <system-err> starts with WARN; CI shows it, and does not go
red for it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from rackcert.core.results import CheckResult, Severity, Status, Verdict
from rackcert.core.runs import atomic_write_bytes_checked
from rackcert.core.untrusted import xml_text


def junit_xml(results: list[CheckResult], name: str = "rackcert.validate") -> bytes:
    by_node: dict[str, list[CheckResult]] = defaultdict(list)
    for r in results:
        by_node[r.node].append(r)
    root = ET.Element("testsuites", name=name)
    for node, items in by_node.items():
        fatal = [r for r in items if r.severity is Severity.error]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=node,
            tests=str(len(items)),
            failures=str(sum(r.status is Status.failed for r in fatal)),
            errors=str(sum(r.status is Status.error for r in fatal)),
            skipped=str(sum(r.status is Status.skipped for r in items)),
        )
        for r in items:
            case = ET.SubElement(suite, "testcase", classname=node, name=r.id)
            detail = f"observed: {r.observed}\nexpected: {r.expected}\nfix: {r.fix}"
            message = f"[{r.severity.value}] {r.reason}"
            if r.status in (Status.failed, Status.error) and r.severity is not Severity.error:
                ET.SubElement(case, "system-err").text = f"WARN {r.reason}\n{detail}"
            elif r.status is Status.failed:
                ET.SubElement(case, "failure", message=message).text = detail
            elif r.status is Status.error:
                ET.SubElement(case, "error", message=message).text = detail
            elif r.status is Status.skipped:
                ET.SubElement(case, "skipped", message=r.reason)
            else:
                ET.SubElement(case, "system-out").text = f"observed: {r.observed}"
    for element in root.iter():  # node text may hold ESC or NUL, which XML 1.0 cannot
        element.text = xml_text(element.text) if element.text else element.text
        element.attrib = {k: xml_text(v) for k, v in element.attrib.items()}
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(path: Path, results: list[CheckResult]) -> Path:
    atomic_write_bytes_checked(Path(path), junit_xml(results))
    return Path(path)


def bench_results(verdict: Verdict) -> list[CheckResult]:
    """Bench's verdict checks as CheckResults, so JUnit agrees with bench's exit code.

    bench exits 1 on FAIL and on INCOMPLETE: a failed check, and a check that
    `certification.required` names but that was not judged, are failures; a check that is
    neither required nor judged is skipped, never a pass.
    """
    out = []
    for c in verdict.checks:
        status = c.status
        reason = c.reason
        if c.status is Status.skipped and c.required:
            status, reason = Status.failed, f"required but not judged: {c.reason}"
        out.append(
            CheckResult(
                id=c.id,
                node="bench",
                severity=Severity.error,
                status=status,
                observed=c.observed,
                expected=c.expected,
                reason=reason,
            )
        )
    if not verdict.checks:  # nothing judged at all: INCOMPLETE, so a failing case says so
        out.append(
            CheckResult(
                id="bench.judged",
                node="bench",
                status=Status.failed,
                expected="at least one check judged",
                reason="the bench judged nothing",
            )
        )
    return out


def write_bench_junit(path: Path, verdict: Verdict) -> Path:
    atomic_write_bytes_checked(Path(path), junit_xml(bench_results(verdict), "rackcert.bench"))
    return Path(path)
