"""Compare two bench.json records apart from timings: their shape and their verdicts.

Why: a change that moves the bench's code around must leave what it records alone. Two runs
of the same bench never give the same figures, so this compares what must not move: every
key path with the type of its value (numbers as "number"), the verdict, each check's id and
status, what was not judged, the launches' labels and tasks, the skipped parts and why.

    python tools/bench_shape.py BEFORE/bench.json AFTER/bench.json   # exit 1 on a difference
    python tools/bench_shape.py bench.json                            # print one's shape
    python tools/bench_shape.py --spec SPEC BEFORE/bench.json AFTER/bench.json
    python tools/bench_shape.py --output BEFORE.txt AFTER.txt        # a command's printed output

With --spec, each record is also judged again by this tree's code (validation.bench.verdict
.rejudge) and must get the verdict it recorded: on a busy machine two runs' figures (and so
their verdicts) may differ, while the judging of the same figures must not.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any

# Values that are timings, paths or host-dependent text: compared by type only.
LOOSE = {"log", "commands", "started_at", "finished_at", "path", "note", "reason", "observed"}


def shape(value: Any, path: str = "") -> dict[str, str]:
    """Every key path -> its value's kind; list items merged under `[]`."""
    out: dict[str, str] = {}
    if isinstance(value, dict):
        out[path or "."] = "object"
        for k, v in value.items():
            out.update(shape(v, f"{path}.{k}"))
    elif isinstance(value, list):
        out[path or "."] = "array"
        for v in value:
            out.update(shape(v, f"{path}[]"))
    elif isinstance(value, bool):
        out[path] = "bool"
    elif isinstance(value, (int, float)):
        out[path] = "number"
    elif value is None:
        out[path] = "null"
    else:
        out[path] = "string"
    return out


def verdicts(record: dict[str, Any]) -> dict[str, Any]:
    """What the bench concluded, without its figures."""
    data = record.get("data", record)
    verdict = data.get("verdict") or {}
    return {
        "status": record.get("status"),
        "mode": data.get("mode"),
        "verdict": verdict.get("verdict"),
        "checks": sorted((c["id"], c["status"]) for c in verdict.get("checks", [])),
        "not_judged": sorted(verdict.get("not_judged", [])),
        "launches": [(x["label"], x["tasks"]) for x in data.get("launches", [])],
        "skipped": {
            k: (v or {}).get("skipped")
            for k, v in data.items()
            if isinstance(v, dict) and "skipped" in v
        },
        "engine": data.get("engine"),
        "launch": {k: v for k, v in (data.get("launch") or {}).items() if k != "jobs"},
    }


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The differences, one line each; empty when the two agree apart from timings."""
    diffs = []
    sa, sb = shape(before), shape(after)
    for key in sorted(set(sa) | set(sb)):
        if sa.get(key) == sb.get(key):
            continue
        kinds = {sa.get(key), sb.get(key)}
        if key.rsplit(".", 1)[-1] in LOOSE or kinds <= {"number", "null"}:
            continue  # a figure that one run measured and the other not: not a shape
        if kinds <= {None, "null"}:
            continue  # an optional field one record has not heard of, empty in the other
        diffs.append(f"shape {key}: {sa.get(key)} -> {sb.get(key)}")
    va, vb = verdicts(before), verdicts(after)
    for key in va:
        if va[key] != vb[key]:
            diffs.append(f"{key}: {va[key]!r} -> {vb[key]!r}")
    return diffs


def rejudged(spec_path: str, record: dict[str, Any]) -> list[str]:
    """Where this tree's code judges the record's figures otherwise than it recorded."""
    from rackcert.core.spec_loader import load_spec
    from validation.bench.verdict import rejudge

    again = rejudge(load_spec(spec_path).spec, record["data"]).model_dump(mode="json")
    was = record["data"]["verdict"]
    return [
        f"rejudged {key}: {was[key]!r} -> {again[key]!r}"
        for key in ("verdict", "checks", "not_judged", "reasons")
        if was[key] != again[key]
    ]


def screen(text: str) -> list[str]:
    """A command's output without what differs between two runs: figures, times, paths,
    run ids (each becomes `#` or `<path>`), and blank or progress-bar lines."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"(/[\w.@+-]+)+/?", "<path>", line)
        line = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line)
        line = re.sub(r"\s+", " ", line).strip()
        if line and not set(line) <= set("━─═│╭╮╰╯ #%/<>path"):
            out.append(line)
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--output"] and len(argv) == 3:
        a, b = (screen(Path(x).read_text(errors="replace")) for x in argv[1:])
        diff = list(difflib.unified_diff(a, b, "before", "after", lineterm="", n=1))
        print("\n".join(diff) if diff else "same apart from figures, times and paths")
        return 1 if diff else 0
    spec = None
    if argv[:1] == ["--spec"] and len(argv) > 1:
        spec, argv = argv[1], argv[2:]
    if len(argv) == 1:
        record = json.loads(Path(argv[0]).read_text())
        for key, kind in shape(record).items():
            print(f"{key}: {kind}")
        print(json.dumps(verdicts(record), indent=1))
        return 0
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    before, after = (json.loads(Path(a).read_text()) for a in argv)
    diffs = compare(before, after)
    if spec:
        same = [
            d for d in diffs if not d.startswith(("verdict:", "checks:", "shape .data.verdict"))
        ]
        judged = rejudged(spec, before) + rejudged(spec, after)
        if verdicts(before)["checks"] != verdicts(after)["checks"]:
            ids = [sorted(c for c, _s in verdicts(r)["checks"]) for r in (before, after)]
            if ids[0] != ids[1]:
                judged.append(f"check ids: {ids[0]} -> {ids[1]}")
        for line in diffs:
            if line not in same:
                print(f"(figures differ, judged alike) {line}")
        diffs = same + judged
    for line in diffs:
        print(line)
    print("same apart from timings" if not diffs else f"{len(diffs)} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
