"""`rackcert report ...` and `rackcert serve`: the audit report, its evidence checks, history page.

`rackcert report RUN` builds the report (same as `rackcert report build RUN`);
`report verify RUN` checks the manifest; `report diff RUN_A RUN_B` compares two
runs; `report schema` prints run.json's JSON Schema; `serve` starts the local
history page. Heavy libraries (matplotlib, weasyprint) load only when a
command needs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup

from rackcert.cli.common import JsonOpt, RunsRootOpt, app, console, default_runs_root, print_json
from rackcert.core.errors import InputError, RackcertError, RecordError
from rackcert.core.secrets import REDACTOR
from rackcert.core.untrusted import markup

if TYPE_CHECKING:  # imported where used: every invocation imports this module (issue 55)
    from rackcert.core.runs import RunDir


def say(text: str) -> None:
    """Print without wrapping (paths and digests stay on one line), secrets masked."""
    console.print(REDACTOR.scrub(text), soft_wrap=True)


def emit_json(obj: object) -> None:
    print_json(REDACTOR.scrub(obj))


class _DefaultBuild(TyperGroup):
    """`rackcert report RUN` means `rackcert report build RUN` when RUN is no subcommand."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["build", *args]
        return super().parse_args(ctx, args)


report_app = typer.Typer(
    cls=_DefaultBuild,
    help=(
        "Audit report of a run: run.json, HTML and PDF with the certified-matrix comparison,"
        " checks and benchmark plots; tamper-evident manifest; diff of two runs.\n\n"
        "`rackcert report RUN` is short for `rackcert report build RUN`."
    ),
    no_args_is_help=True,
)
app.add_typer(report_app, name="report")

MatrixDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--matrix-dir",
        envvar="RACKCERT_CERTIFIED_DIR",
        help="Directory of certified-matrix YAML files (default: validation/certified)",
    ),
]
RunArg = Annotated[
    str,
    typer.Argument(
        help="Run directory (runs/<rack>/<timestamp>), or a rack name for its latest run",
        show_default=False,
    ),
]


def resolve_run(arg: str, runs_root: Path | None) -> RunDir:
    """A run directory from a path, a path under the runs root, or a rack's latest run."""
    from rackcert.core.runs import RunDir, list_runs
    from rackcert.report.build import learn_secrets

    root = runs_root or default_runs_root()
    found = next((c for c in (Path(arg), root / arg) if (c / "meta.json").is_file()), None)
    if found is None and (runs := list_runs(root, arg)):
        found = runs[-1].path
    if found is not None:
        run = RunDir.open(found)
        learn_secrets(run)  # whatever this command prints about the run gets masked
        return run
    raise InputError(
        f"{arg}: not a run directory and no runs of a rack named so under {root}"
        " (give runs/<rack>/<timestamp> or a rack name)"
    )


@report_app.command("build")
def build_cmd(
    run: RunArg,
    fmt: str = typer.Option(
        "json,html,pdf", "--format", help="Comma-separated: json (run.json), html, pdf"
    ),
    reference: str | None = typer.Option(
        None,
        "--reference",
        help="Certified-matrix entry to compare with (default: the spec's certification.reference)",
    ),
    matrix_dir: MatrixDirOpt = None,
    health_record: list[Path] = typer.Option(  # noqa: B008 - typer's way
        [],
        "--health-record",
        help="A node's Slurm health-check record (validate --health-check) to include; repeatable",
    ),
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
) -> None:
    """Build the report of a run from its recorded stages, then write MANIFEST.sha256.

    Writes run.json, report.html and report.pdf (as --format asks), the report stage record
    and the manifest. Exit 0 once written, whatever the verdict; the verdict is printed.
    """
    from rackcert.report.build import build_report, parse_formats
    from rackcert.report.matrix import load_references

    formats = parse_formats(fmt)
    target = resolve_run(run, runs_dir)
    if reference and reference not in load_references(matrix_dir):
        raise InputError(f"--reference {reference}: no such certified-matrix entry")
    if health_record:
        from rackcert.report.build import add_health_records

        add_health_records(target, health_record)
    outcome = build_report(target, formats=formats, reference=reference, matrix_dir=matrix_dir)
    record = outcome.record
    if as_json:
        emit_json(
            {
                "run": str(target.path),
                "verdict": outcome.verdict,
                "reasons": record.verdict.reasons,
                "files": [str(target.path / f) for f in outcome.files],
                "manifest_sha256": outcome.manifest_sha256,
            }
        )
        return
    colour = {"PASS": "green", "FAIL": "red"}.get(outcome.verdict, "yellow")
    say(
        f"[bold {colour}]{outcome.verdict}[/] {markup(record.run.rack)} {markup(record.run.run_id)}"
    )
    for reason in record.verdict.reasons:
        say(f"  - {markup(reason)}")
    if record.missing_stages:
        say(f"  stages not recorded: {markup(', '.join(record.missing_stages))}")
    counts = record.matrix.counts
    if record.matrix.rows:
        say(
            f"  certified matrix {markup(record.matrix.reference)}:"
            f" {counts.get('matches', 0)} match,"
            f" {counts.get('differs', 0)} differ, {counts.get('unknown', 0)} unknown"
            " (user's reference data, not NVIDIA's list)"
        )
    for name in outcome.files:
        say(f"  wrote {markup(target.path / name)}")
    say(f"  manifest {markup(target.path / 'MANIFEST.sha256')} sha256 {outcome.manifest_sha256}")


@report_app.command("sign")
def sign_cmd(
    run: RunArg,
    key: Annotated[
        Path,
        typer.Option("--key", help="SSH private key that vouches for the run", show_default=False),
    ],
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
) -> None:
    """Sign a run's MANIFEST.sha256 with an SSH key (ssh-keygen -Y sign, namespace rackcert).

    The signature goes to MANIFEST.sha256.sig beside the manifest (not inside it). Run it after `rackcert report`; check it with `rackcert report verify RUN --key KEY.pub`.
    """  # noqa: E501 - typer rewraps; one line per paragraph reads best in --help
    from rackcert.report.manifest import verify
    from rackcert.report.signing import sign

    target = resolve_run(run, runs_dir)
    result = verify(target.path)
    if not result.ok:
        raise RecordError(
            f"{target.path}: differs from MANIFEST.sha256 ({'; '.join(result.problems()[:3])});"
            " refusing to sign a changed run"
        )
    path = sign(target.path, key)
    say(
        f"[green]signed[/] {markup(target.path)}: {path.name} over rack"
        f" {markup(target.path.parent.name)}, run {markup(target.path.name)}, MANIFEST.sha256"
        f" sha256 {result.manifest_sha256} ({result.files} files)"
    )


@report_app.command("verify")
def verify_cmd(
    run: RunArg,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            help="SSH public key the run must be signed with (report sign)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check every file of a run directory against its MANIFEST.sha256 (and its signature).

    Exit 0 when nothing changed; exit 1 listing every changed, added or removed file. With --key, the manifest must also carry a valid signature by that key: without one, anyone who can write the run could recompute the manifest.
    """  # noqa: E501 - typer rewraps; one line per paragraph reads best in --help
    from rackcert.report.manifest import verify

    target = resolve_run(run, runs_dir)
    result = verify(target.path)
    signed = None
    if key is not None and result.ok:
        from rackcert.report.signing import verify_signature

        signed = verify_signature(target.path, key)
    if as_json:
        emit_json(
            {
                "run": str(target.path),
                "ok": result.ok,
                "files": result.files,
                "manifest_sha256": result.manifest_sha256,
                "changed": result.changed,
                "added": result.added,
                "removed": result.removed,
                "signed_by": signed.signer if signed else None,
                "signed": (
                    {
                        "rack": signed.rack,
                        "run": signed.run,
                        "manifest_sha256": signed.manifest_sha256,
                    }
                    if signed
                    else None
                ),
            }
        )
    elif result.ok:
        say(
            f"[green]OK[/] {markup(target.path)}: {result.files} files match MANIFEST.sha256"
            f" (sha256 {result.manifest_sha256})"
        )
        if signed:
            say(f"[green]signed[/] by {markup(key)}: {markup(signed.signer)}")
            say(f"  signed: {markup(signed.describe())}")
    else:
        say(f"[bold red]CHANGED[/] {markup(target.path)}: differs from MANIFEST.sha256")
        for line in result.problems():
            say(f"  {markup(line)}")
    if not result.ok:
        # An error, not typer.Exit: main() turns RackcertError into the exit code.
        raise RecordError(
            f"{target.path}: {len(result.problems())} differences from MANIFEST.sha256"
            f" ({'; '.join(result.problems()[:3])}{'; ...' if len(result.problems()) > 3 else ''})"
        )


@report_app.command("diff")
def diff_cmd(
    run_a: Annotated[str, typer.Argument(help="The run before (e.g. the last certified one)")],
    run_b: Annotated[str, typer.Argument(help="The run after (e.g. after an upgrade)")],
    tolerance: float = typer.Option(
        0.05, "--tolerance", min=0, help="Relative change that counts for figures with no spread"
    ),
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
) -> None:
    """What changed from RUN_A to RUN_B: versions, settings, flipped checks, figures.

    Benchmark figures count as moved only beyond their measured spread. Exit 1 on a
    regression (check pass -> fail, figure worse beyond spread, matrix row no longer
    matching, verdict down), 0 otherwise.
    """
    from rackcert.report.assemble import assemble
    from rackcert.report.diff import diff_records

    a, b = resolve_run(run_a, runs_dir), resolve_run(run_b, runs_dir)
    d = diff_records(assemble(a), assemble(b), tolerance=tolerance)
    if as_json:
        emit_json(d.to_json())
    else:
        _print_diff(d)
    if d.regressed:
        raise RackcertError(f"{len(d.regressions)} regressions from {d.run_a} to {d.run_b}")


def _print_diff(d) -> None:  # type: ignore[no-untyped-def]
    from rackcert.report.diff import format_diff

    for line in format_diff(d):
        say(line)


@report_app.command("schema")
def schema_cmd(
    stage: str = typer.Option(
        "run",
        "--stage",
        help="Whose schema: run (run.json) or a stage record: plan, provision, configure,"
        " validate, bench, report",
    ),
) -> None:
    """Print the JSON Schema of run.json or of one stage record (schemas/<name>.schema.json)."""
    from rackcert.core.stage_records import RECORDS
    from rackcert.core.stage_records import json_schema as stage_schema
    from rackcert.report.record import json_schema

    if stage == "run":
        typer.echo(json.dumps(json_schema(), indent=2))
    elif stage in RECORDS:
        if stage == "bench":
            import validation.bench.units  # noqa: F401 - the units register their blocks

        typer.echo(json.dumps(stage_schema(stage), indent=2))
    else:
        raise InputError(f"--stage {stage!r}: choose run or one of {', '.join(RECORDS)}")


@app.command("serve")
def serve_cmd(
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)"),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port; 0 picks a free one"),
) -> None:
    """Serve a local history page: runs with their verdicts and links to their reports.

    Read-only; binds 127.0.0.1 unless --host says otherwise. Ctrl-C stops it.

    Prometheus scrapes /metrics: the latest validate and bench run of each rack
    (docs/monitoring.md).
    """
    from rackcert.core.runs import list_runs
    from rackcert.serve import make_server

    root = runs_dir or default_runs_root()
    try:
        server = make_server(root, host, port)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound_host, bound_port = str(server.server_address[0]), server.server_address[1]
    if host not in ("127.0.0.1", "localhost", "::1"):
        say(
            f"[yellow]warning:[/] listening on {host}: run records describe your"
            " infrastructure; anyone who can reach this address can read them"
        )
    say(
        f"serving {len(list_runs(root))} run(s) from {markup(root)} on"
        f" http://{bound_host}:{bound_port}/ (Ctrl-C stops)"
    )
    console.file.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
