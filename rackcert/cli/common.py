"""Shared pieces of the CLI: the app, consoles, and options every stage takes."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rackcert.core.errors import InputError
from rackcert.core.untrusted import SafeConsole

if TYPE_CHECKING:  # imported where used: every invocation imports this module (issue 55)
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import LoadedSpec

app = typer.Typer(
    name="rackcert",
    help=(
        "Provision and certify GPU racks on vSphere for distributed deep learning.\n\n"
        "One YAML spec describes the rack; each stage (plan, provision, configure,"
        " validate, bench, report) records what it saw under runs/<rack>/<timestamp>/."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# No emoji codes: ":ab:" inside a fingerprint or PCI address must print as typed.
# Off a terminal (CI logs, pipes) a line is never wrapped at 80 columns: soft wrap. Safe:
# no control character from a node or a run file reaches the terminal (rackcert.core.untrusted).
console = SafeConsole(highlight=False, emoji=False, soft_wrap=not sys.stdout.isatty())
err_console = SafeConsole(
    stderr=True, highlight=False, emoji=False, soft_wrap=not sys.stderr.isatty()
)

# The components whose versions decide what rackcert does; `--version` prints them all, the
# way a bug report needs them. Read from installed metadata: nothing heavy is imported.
VERSIONED = (
    "rackcert", "pyvmomi", "ansible-core", "ansible-runner", "mitogen", "pydantic", "torch",
)  # fmt: skip


def versions() -> dict[str, str]:
    """Installed versions of rackcert and its main components ("not installed" if absent)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for dist in VERSIONED:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _version_callback(value: bool) -> None:
    if value:
        for name, ver in versions().items():
            typer.echo(f"{name} {ver}")
        raise typer.Exit(0)


# Groups whose commands read only a spec (no run records, no benchmark options): they run
# without the benchmark units (see _global_options).
SPEC_ONLY = frozenset({"spec", "slurm"})


@app.callback()
def _global_options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Show the versions of rackcert, Python, pyVmomi, ansible-core, Mitogen and torch.",
        ),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="More detail; repeat for more (configure passes it to Ansible as -v, -vv...).",
        ),
    ] = 0,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print only errors; the exit code tells the result."),
    ] = False,
    log_file: Annotated[
        Path | None,
        typer.Option("--log-file", help="Also append a plain copy of the output to this file."),
    ] = None,
) -> None:
    """Options every command takes (given before the command: `rackcert -q validate ...`)."""
    from rackcert.cli.output import apply

    if ctx.invoked_subcommand not in SPEC_ONLY:
        # The benchmark units register, when imported, the blocks bench.json's records are
        # read through (stage_records.bench_parts_from) and BenchOptions' own options
        # (validation.bench.options.declarations_from): every command but the spec-only ones
        # runs with them. Here, not at the top: building the app and printing the top-level
        # help do without them (issue 55).
        import validation.bench.units  # noqa: F401

    apply({"out": console, "err": err_console}, verbosity=verbose, quiet=quiet, log=log_file)


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
MetricsTextfileOpt = Annotated[
    Path | None,
    typer.Option(
        "--metrics-textfile",
        help="Also write the verdict as Prometheus metrics here (*.prom, written atomically"
        " for node_exporter's textfile collector; docs/monitoring.md)",
    ),
]
RunOpt = Annotated[
    Path | None,
    typer.Option("--run", help="Add this stage to an existing run directory instead of a new one"),
]


def default_runs_root() -> Path:
    from rackcert.core.runs import DEFAULT_ROOT

    return Path(os.environ.get("RACKCERT_RUNS_DIR", DEFAULT_ROOT))


def load(spec_path: Path) -> LoadedSpec:
    from rackcert.core.spec_loader import load_spec

    return load_spec(spec_path)


def open_or_create_run(loaded: LoadedSpec, runs_root: Path, run: Path | None) -> RunDir:
    """The run a stage writes into: the one given with --run (made from this very spec,
    else an input error), else a new one."""
    from rackcert.core.runs import RunDir

    if run is not None:
        return RunDir.open(run, spec_sha256=loaded.sha256)
    return RunDir.create(runs_root, loaded.spec.metadata.name, loaded.sha256, loaded.text)


def confirm_apply(actions: list[Any]) -> bool:
    """Ask on a terminal before changing the rack; elsewhere say to pass --yes."""
    if not sys.stdin.isatty():
        raise InputError("provision changes the rack: pass --yes to apply without asking")
    if not typer.confirm(f"Apply {len(actions)} action(s)?", default=False):
        raise typer.Abort()
    return True


def print_json(obj: Any) -> None:
    """JSON on stdout, masked like every record (a secret that slipped in never prints)."""
    from rackcert.core.secrets import REDACTOR

    typer.echo(REDACTOR.scrub(json.dumps(obj, indent=2, default=str)))


@contextlib.contextmanager
def owned_lab(what: str) -> Iterator[None]:
    """Run a command that starts lab parts (demo, lab up --foreground) as their owner.

    SIGTERM, SIGINT and SIGHUP stop the command through its `finally` blocks, which stop the
    lab; a lab left by an earlier run whose process is gone is cleared first, in one line
    (rackcert.lab.lifetime). A signal ends the command with one line and 128 + its number
    (130 for Ctrl-C), as a shell reports it.
    """
    from rackcert.lab import lifetime

    def say(line: str) -> None:
        err_console.print(line, highlight=False, soft_wrap=True)

    try:
        with lifetime.owned(what, say=say):
            yield
    except lifetime.Terminated as stop:
        say(
            f"{what}: stopped by {lifetime.signal_name(stop.signum)}; the lab it started is"
            " stopped, records written so far are intact"
        )
        raise typer.Exit(stop.exit_code) from None
