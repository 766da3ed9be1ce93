"""The shipped alert rules: valid for promtool, their unit tests pass, and every rackcert
series they name is one rackcert writes (a renamed family would silently never alert)."""

from __future__ import annotations

import json
import re

import yaml

from rackcert.metrics.bench_figures import METRICS
from rackcert.metrics.families import (
    PREFIX,
    bench_families,
    health_families,
    validate_families,
)
from tests.support.metrics_rules import ROOT, RULES


def _written_names() -> set[str]:
    """Every family name rackcert can write (the families' own definitions, with no data)."""
    from rackcert.core.burnin_record import BurninData
    from rackcert.core.stage_records import (
        BenchData,
        BenchRecord,
        BurninRecord,
        ValidateData,
        ValidateRecord,
    )
    from rackcert.metrics.burnin import burnin_families

    at = "2026-01-01T00:00:00Z"
    stamp = {"rack": "r", "spec_sha256": "0", "status": "ok", "started_at": at, "finished_at": at}
    families = [
        *validate_families(ValidateRecord(**stamp, data=ValidateData()), "r", drift=[]),
        *bench_families(BenchRecord(**stamp, data=BenchData()), "r"),
        *health_families([], "r", "n", seconds=0.0, finished=0.0, action="none"),
        *burnin_families(
            BurninRecord(
                **stamp,
                data=BurninData(
                    duration_s=1.0, quick=True, launcher="ssh", mix=[], rules={}, verdict="PASS"
                ),
            )
        ),  # fmt: skip
    ]
    return {f.name for f in families} | {PREFIX + "bench_" + m for m in METRICS}


def test_every_rackcert_series_in_the_rules_and_the_dashboard_is_written() -> None:
    doc = yaml.safe_load((RULES / "rackcert.rules.yml").read_text())
    exprs = [r["expr"] for g in doc["groups"] for r in g["rules"]]
    dash = json.loads((ROOT / "monitoring" / "grafana" / "rackcert-dashboard.json").read_text())
    exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
    named = {m for e in exprs for m in re.findall(r"\brackcert_[a-z0-9_]+", e)}
    assert named and named <= _written_names(), named - _written_names()
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
