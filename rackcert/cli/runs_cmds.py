"""`rackcert runs ...`: what has been recorded."""

from __future__ import annotations

import typer
from rich.table import Table
from rich.text import Text

from rackcert.cli.common import JsonOpt, RunsRootOpt, app, console, default_runs_root, print_json
from rackcert.cli.output import show_table
from rackcert.core.untrusted import markup

runs_app = typer.Typer(help="List recorded runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def list_cmd(
    rack: str | None = typer.Option(None, "--rack", help="Only runs of this rack"),
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
) -> None:
    """List run directories with the stages each recorded and their status."""
    from rackcert.core.runs import list_runs

    runs = list_runs(runs_dir or default_runs_root(), rack, include_unreadable=True)
    if as_json:
        print_json(
            [
                {
                    "rack": r.rack,
                    "path": str(r.path),
                    "created_at": r.created_at,
                    "stages": r.statuses,
                    "verdict": r.verdict,
                    "problem": r.problem,
                }
                for r in runs
            ]
        )
        return
    if not runs:
        console.print(f"no runs under {markup(runs_dir or default_runs_root())}")
        return
    table = Table()
    for col in ("rack", "created (UTC)", "stages", "verdict", "path"):
        table.add_column(col)
    for r in runs:
        stages = " ".join(f"{s}:{st}" for s, st in r.statuses.items()) or "-"
        verdict = "unreadable" if r.problem else (r.verdict or "-")
        cells = (r.rack, r.created_at, stages, verdict, str(r.path))
        table.add_row(*(Text(c) for c in cells))  # run files are data: no markup parsed
    show_table(console, table)
    for r in runs:
        if r.problem:  # one line each, after the table: what is wrong and where
            console.print(f"[yellow]warning:[/] {markup(r.problem)}", soft_wrap=True)
