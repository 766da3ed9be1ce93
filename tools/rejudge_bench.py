"""Judge recorded bench.json files again with today's verdict code, in place.

Why: a verdict is what `validation.bench.verdict` says about the recorded figures, never a
hand edit. When the verdict rules change (certification.required, "not judged" is never a
pass), committed evidence is re-judged with this, from the same spec it was measured
against; the figures are untouched. tests/unit/test_bench_verdict.py fails when a committed
record's verdict is not what the code judges.

Usage: .venv/bin/python tools/rejudge_bench.py docs/evidence/h200-spec.yaml \
    docs/evidence/h200-bench.json [more bench.json ...]
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import yaml

from rackcert.core.errors import RackcertError
from rackcert.core.runs import atomic_write_json, read_json
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import LoadedSpec
from validation.bench.verdict import rejudge


def rejudge_file(spec_path: Path, record_path: Path) -> str:
    """Re-judge one bench.json against the spec it was made from; returns the verdict word."""
    # The spec the record was measured with, read as data: rules added since may refuse it,
    # but its certification block is what judges the figures.
    text = spec_path.read_text()
    loaded = LoadedSpec(
        spec=Spec.model_validate(yaml.safe_load(text)),
        path=spec_path,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        text=text,
    )
    record = read_json(record_path)
    if record.get("stage") != "bench":
        raise RackcertError(f"{record_path}: not a bench record (stage {record.get('stage')!r})")
    if record.get("spec_sha256") != loaded.sha256:
        raise RackcertError(
            f"{record_path}: recorded for another spec (sha256 {record.get('spec_sha256')!s:.12}"
            f"..., {spec_path} is {loaded.sha256:.12}...)"
        )
    if record.get("status") != "ok" or not record.get("data", {}).get("verdict"):
        raise RackcertError(f"{record_path}: a {record.get('status')} bench has no verdict to redo")
    verdict = rejudge(loaded.spec, record["data"])
    record["data"]["verdict"] = verdict.model_dump(mode="json")
    atomic_write_json(record_path, record)
    return verdict.verdict


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    spec_path, records = Path(argv[0]), [Path(a) for a in argv[1:]]
    try:
        for path in records:
            print(f"{path}: {rejudge_file(spec_path, path)}")
    except RackcertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
