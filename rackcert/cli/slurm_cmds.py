"""`rackcert slurm conf|health-check-conf`: what the site adds to its slurm.conf for the rack.

rackcert does not own the controller's configuration; these print lines for the site to
add (rackcert.slurm.conf builds them from the spec).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rackcert.cli.common import SpecArg, app, load
from rackcert.errors import InputError

slurm_app = typer.Typer(
    help="Lines for the site's slurm.conf: the rack's nodes and rackcert's health check.",
    no_args_is_help=True,
)
app.add_typer(slurm_app, name="slurm")

DEFAULT_PROGRAM = "/etc/slurm/rackcert-health-check"
DEFAULT_RACKCERT = "/opt/rackcert/venv/bin/rackcert"


@slurm_app.command("conf")
def conf_cmd(spec_path: SpecArg) -> None:
    """Print the NodeName and PartitionName lines for the rack's nodes.

    CPUs and RealMemory come from each VM's template (95 % of its memory), Gres=gpu:<type>:<n>
    from its GPUs. rackcert does not own the controller's slurm.conf: the site adds these.
    """
    from rackcert.slurm.conf import site_lines

    for line in site_lines(load(spec_path).spec):
        typer.echo(line)


@slurm_app.command("health-check-conf")
def health_check_conf_cmd(
    spec_path: SpecArg,
    spec_on_node: Annotated[
        str | None,
        typer.Option(
            "--spec-on-node", help="Where the spec lies on the nodes (default: this path)"
        ),
    ] = None,
    rackcert: Annotated[
        str,
        typer.Option("--rackcert", help="The rackcert program on the nodes"),
    ] = DEFAULT_RACKCERT,
    program: Annotated[
        str,
        typer.Option("--program", help="Where the wrapper script goes on the nodes"),
    ] = DEFAULT_PROGRAM,
) -> None:
    """Print the slurm.conf lines that make the health check Slurm's, and its wrapper.

    `rackcert validate SPEC --health-check` becomes the HealthCheckProgram and the Prolog.
    Slurm runs both without arguments and with an empty environment, so the script names
    the program and the spec by absolute path.
    """
    from rackcert.slurm.conf import health_check_lines, health_check_script

    loaded = load(spec_path)
    on_node = spec_on_node or str(Path(loaded.path).resolve())
    for value, what in (
        (on_node, "--spec-on-node"),
        (rackcert, "--rackcert"),
        (program, "--program"),
    ):
        if not value.startswith("/") or any(c in value for c in " \t\n'\"$`\\"):
            raise InputError(f"{what} {value!r}: an absolute path without spaces or quotes")
    typer.echo(f"# {program} on every node (root, mode 0755):")
    for line in health_check_script(rackcert, on_node).splitlines():
        typer.echo(f"#   {line}")
    typer.echo("# slurm.conf:")
    for line in health_check_lines(program):
        typer.echo(line)
