"""The validate stage below the CLI: checks on every node, one record, written once.

`run(loaded, run_dir, runs_root=...)` validates every node (validation.runner) and
returns validate.json's record. Failing checks are evidence, not breakage: `run`
returns the record either way and raises only for bad input. The comparison with the
rack's last certified run is the report layer's (rackcert.report.upgrade), which the
CLI calls after this stage.

    >>> record = run(load_spec("inventories/lab.yaml"), run_dir, runs_root=Path("runs"))
    >>> record.status, record.data.summary.failing
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import LoadedSpec
from rackcert.core.stage_records import ValidateRecord
from validation.runner import validate


def run(loaded: LoadedSpec, run_dir: RunDir, *, runs_root: Path, **options: Any) -> ValidateRecord:
    """Validate and record; `options` are validation.runner.validate's (nodes, checks, skip,
    local, tool_path, junit, ssh_config, facts, peers, console)."""
    return validate(loaded, run_dir, runs_root=runs_root, **options)
