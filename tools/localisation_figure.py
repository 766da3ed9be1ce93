"""Draw the report's link heat map as a PNG for the docs, from a bench.json's localisation part.

Why a tool: docs/report.md shows the picture the HTML/PDF report draws (the same
rackcert.report.plots code), and the picture must come from a record, never be drawn by
hand. With `--example` it draws an illustrative 8-node record instead: every link at
9.6 Gb/s with 2 % seeded jitter, one link planted at 0.3x, one node's compute at 0.45x,
and the findings the verdict would name for them; the docs caption says so.

Usage:
    .venv/bin/python tools/localisation_figure.py runs/lab/<run>/bench.json docs/x.png
    .venv/bin/python tools/localisation_figure.py --example docs/localisation-heatmap.png
"""

from __future__ import annotations

import itertools
import json
import random
import sys
from pathlib import Path
from typing import Any

from rackcert.core.localisation import read_localisation
from rackcert.core.stage_records import LocaliseRecord
from rackcert.report.plots import link_heatmap_figure

NODES = [f"lab-node{i}" for i in range(1, 9)]
RATE = 9.6


def example() -> dict[str, Any]:
    """The illustrative record: a slow link lab-node2<->lab-node5, a slow node lab-node7."""
    rnd = random.Random(34)
    links = []
    for a, b in itertools.combinations(NODES, 2):
        gbps = RATE * (
            0.3 if {a, b} == {"lab-node2", "lab-node5"} else 1 + rnd.uniform(-0.02, 0.02)
        )
        links.append({"a": a, "b": b, "gbps": round(gbps, 2)})
    nodes = [
        {"node": n, "units": [{"unit": "cpu", "gemm_gflops": 36.0 if n == "lab-node7" else 80.0}]}
        for n in NODES
    ]
    findings = [
        {"kind": "link", "nodes": ["lab-node2", "lab-node5"], "target": "lab-node2<->lab-node5",
         "id": "bench.link[lab-node2<->lab-node5]", "metric": "bandwidth", "value": 2.88,
         "unit": "Gb/s", "reference": 9.6, "observed": "2.88 Gb/s", "expected": ">= 6.72 Gb/s",
         "message": "bench.link[lab-node2<->lab-node5]: 2.88 Gb/s, 0.30x rack median 9.6 Gb/s"},
        {"kind": "compute", "nodes": ["lab-node7"], "id": "bench.compute[lab-node7]",
         "target": "lab-node7", "metric": "gemm_gflops", "value": 36.0, "unit": "GFLOP/s",
         "reference": 80.0, "observed": "36 GFLOP/s", "expected": ">= 56 GFLOP/s",
         "message": "bench.compute[lab-node7]: 36 GFLOP/s, 0.45x rack median 80 GFLOP/s"},
    ]  # fmt: skip
    return {"localise": {"schema": 1, "nodes_measured": NODES, "nodes": nodes, "links": links,
                         "findings": findings}}  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("Usage:")[1].rstrip(), file=sys.stderr)
        return 2
    source, out = argv
    if source == "--example":
        data = example()
    else:
        record = json.loads(Path(source).read_text())
        data = record.get("data", record)
    part = data.get("localise")
    loc = read_localisation(LocaliseRecord.model_validate(part) if part else None)
    if loc is None or not loc.links:
        print(f"error: {source}: no localisation part with links", file=sys.stderr)
        return 1
    link_heatmap_figure(loc).savefig(out, dpi=110, bbox_inches="tight", metadata={"Software": None})
    print(
        f"wrote {out}: {len(loc.names())} nodes, {len(loc.links)} links,"
        f" {len(loc.findings)} findings"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
