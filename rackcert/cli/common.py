"""Shared pieces of the CLI: the app, consoles, and options every stage takes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from rackcert.runs import DEFAULT_ROOT, RunDir
from rackcert.spec_loader import LoadedSpec, load_spec

app = typer.Typer(
    name="rackcert",
    help=(
        "Provision and certify GPU racks on vSphere for distributed deep learning.\n\n"
        "One YAML spec describes the rack; each stage (plan, provision, configure,"
        " validate, bench, report) records what it saw under runs/<rack>/<timestamp>/."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# No emoji codes: ":ab:" inside a fingerprint or PCI address must print as typed.
console = Console(highlight=False, emoji=False)
err_console = Console(stderr=True, highlight=False, emoji=False)

SpecArg = Annotated[
    Path, typer.Argument(help="Rack spec (YAML), e.g. inventories/lab.yaml", show_default=False)
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead")]
RunsRootOpt = Annotated[
    Path,
    typer.Option(
        "--runs-dir",
        envvar="RACKCERT_RUNS_DIR",
        help="Where run directories live (runs/<rack>/<timestamp>/)",
    ),
]
RunOpt = Annotated[
    Path | None,
    typer.Option("--run", help="Add this stage to an existing run directory instead of a new one"),
]


def default_runs_root() -> Path:
    return Path(os.environ.get("RACKCERT_RUNS_DIR", DEFAULT_ROOT))


def load(spec_path: Path) -> LoadedSpec:
    return load_spec(spec_path)


def open_or_create_run(loaded: LoadedSpec, runs_root: Path, run: Path | None) -> RunDir:
    """The run a stage writes into: the one given with --run (made from this very spec,
    else an input error), else a new one."""
    if run is not None:
        return RunDir.open(run, spec_sha256=loaded.sha256)
    return RunDir.create(runs_root, loaded.spec.metadata.name, loaded.sha256, loaded.text)


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, default=str))
