"""The report stage end to end: run.json, report.html, report.pdf, report.json, MANIFEST.sha256.

Order matters: the report files first, then the stage record (report.json,
whose data.verdict `rackcert runs list` shows), then the manifest over
everything, so the manifest covers the report too. A failure after some files
were written still records the stage (status partial) and the manifest before
the error surfaces: nothing already recorded is lost.

Example:
    outcome = build_report(RunDir.open(path), formats=("json", "html", "pdf"))
    outcome.verdict, outcome.files, outcome.manifest_sha256
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.errors import InputError, RackcertError, RecordError
from rackcert.core.runs import RunDir, atomic_write_bytes, atomic_write_json, read_capped, utc_now
from rackcert.core.secrets import REDACTOR, Redactor, read_secret_file
from rackcert.core.spec_loader import MAX_SPEC_BYTES
from rackcert.core.stage_records import ReportRecord
from rackcert.report.assemble import assemble
from rackcert.report.manifest import MANIFEST_NAME, write_manifest
from rackcert.report.record import RunRecord

FORMATS = ("json", "html", "pdf")
FILE_NAMES = {"json": "run.json", "html": "report.html", "pdf": "report.pdf"}


@dataclass
class Outcome:
    """What the report stage made: the audit record (run.json), its files, report.json typed.

    Not a twin of ReportRecord: `record` is the whole audit record the files are rendered
    from; `stage` is the stage record (report.json) written from it.
    """

    record: RunRecord
    files: list[str] = field(default_factory=list)
    manifest_sha256: str = ""
    stage: ReportRecord | None = None

    @property
    def verdict(self) -> str:
        return self.record.verdict.verdict


def parse_formats(text: str) -> tuple[str, ...]:
    wanted = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in wanted if f not in FORMATS]
    if bad or not wanted:
        raise InputError(
            f"--format: unknown format {', '.join(bad) or '(none)'}; choose from"
            f" {','.join(FORMATS)}"
        )
    return wanted


def learn_secrets(run: RunDir, redactor: Redactor = REDACTOR) -> None:
    """Teach the redactor the secrets the run's spec points at, where this process can read them.

    A fresh `rackcert report` process has resolved no secret yet; without this,
    a password that slipped into an artifact would pass the scrubber unseen.
    The run's spec is not trusted: files are read only when they are small
    regular files (a FIFO would hang, a device stream forever), and secrets too
    short to mask are ignored. `rackcert serve` never calls this.
    """
    try:
        spec = yaml.safe_load(read_capped(run.path / "spec.yaml", MAX_SPEC_BYTES))
    except (OSError, yaml.YAMLError, RecursionError, RecordError):
        return
    if not isinstance(spec, dict):
        return
    vc: dict[str, Any] = spec["vcenter"] if isinstance(spec.get("vcenter"), dict) else {}
    ssh = (
        ((spec.get("guest") or {}).get("ssh") or {}) if isinstance(spec.get("guest"), dict) else {}
    )
    if isinstance(vc.get("password_env"), str):
        redactor.add(os.environ.get(vc["password_env"]))
    for ref in (vc.get("password_file"), ssh.get("key_file") if isinstance(ssh, dict) else None):
        if not isinstance(ref, str):
            continue
        try:
            text = read_secret_file(ref, "secret")
        except InputError:
            continue
        redactor.add(text)
        for line in text.splitlines():  # key material line by line, not the PEM armour
            if len(line) >= 16 and not line.startswith("-----"):
                redactor.add(line.strip())


def add_health_records(run: RunDir, records: list[Path]) -> list[Path]:
    """Copy nodes' health-check records into the run (artifacts/health/), so the report and
    the manifest cover them; a missing or unreadable file is an input error, nothing copied."""
    import shutil

    from rackcert.core.errors import InputError
    from rackcert.report.assemble import HEALTH_DIR

    for path in records:
        if not path.is_file():
            raise InputError(f"--health-record {path}: no such file")
    where = run.artifacts(HEALTH_DIR)
    copied = []
    for i, path in enumerate(records):
        target = where / f"{i:02d}-{path.stem}.jsonl"
        shutil.copyfile(path, target)
        copied.append(target)
    return copied


def build_report(
    run: RunDir,
    *,
    formats: tuple[str, ...] = FORMATS,
    reference: str | None = None,
    matrix_dir: Path | None = None,
) -> Outcome:
    """Write the report files, the report stage record and the manifest into `run`."""
    started = utc_now()
    redactor = REDACTOR.copy()  # this run's secrets mask this run's files only
    learn_secrets(run, redactor)
    outcome = Outcome(record=assemble(run, reference=reference, matrix_dir=matrix_dir))
    try:
        _write_files(run, outcome, formats, redactor)
    except RackcertError as exc:
        _finish(run, outcome, started, status="partial", error=str(exc))
        raise
    _finish(run, outcome, started)
    return outcome


def _write_files(
    run: RunDir, outcome: Outcome, formats: tuple[str, ...], redactor: Redactor
) -> None:
    record = outcome.record
    if "json" in formats:
        atomic_write_json(run.path / FILE_NAMES["json"], redactor.scrub(record.to_json()))
        outcome.files.append(FILE_NAMES["json"])
    if "html" in formats or "pdf" in formats:
        from rackcert.report.html import render_html

        html = render_html(record, redactor)
        if "html" in formats:
            _write(run.path / FILE_NAMES["html"], html.encode())
            outcome.files.append(FILE_NAMES["html"])
        if "pdf" in formats:
            from rackcert.report.pdf import render_pdf

            # A stale PDF of an earlier build would contradict the new HTML: gone first, so
            # a render that overruns leaves no PDF rather than the wrong one.
            (run.path / FILE_NAMES["pdf"]).unlink(missing_ok=True)
            _write(run.path / FILE_NAMES["pdf"], render_pdf(html))
            outcome.files.append(FILE_NAMES["pdf"])


def _write(path: Path, data: bytes) -> None:
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise RackcertError(f"cannot write {path}: {exc.strerror or exc}") from None


def _finish(
    run: RunDir, outcome: Outcome, started: str, *, status: str = "ok", error: str | None = None
) -> None:
    record = outcome.record
    written = run.write_stage(
        "report",
        {
            "verdict": record.verdict.verdict,
            "reasons": record.verdict.reasons,
            "not_judged": record.verdict.not_judged,
            "files": [*outcome.files, "report.json", MANIFEST_NAME],
            "matrix": {"reference": record.matrix.reference, **record.matrix.counts},
            "checks": record.check_counts.model_dump(),
            "missing_stages": record.missing_stages,
        },
        status=status,
        error=error,
        started_at=started,
    )
    assert isinstance(written, ReportRecord)
    outcome.stage = written
    _path, outcome.manifest_sha256 = write_manifest(run.path)
