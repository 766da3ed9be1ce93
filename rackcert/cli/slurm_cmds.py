"""`rackcert slurm conf|health-check-conf`: what the site adds to its slurm.conf for the rack.

rackcert does not own the controller's configuration; these print lines for the site to
add (rackcert.core.slurm.conf builds them from the spec).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rackcert.cli.common import SpecArg, app, load
from rackcert.core.errors import InputError

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
    from rackcert.core.slurm.conf import site_lines

    for line in site_lines(load(spec_path).spec):
        typer.echo(line)


@slurm_app.command("health-check-conf")
def health_check_conf_cmd(
    spec_path: SpecArg,
    spec_on_node: Annotated[
        str | None,
        typer.Option(
            "--spec-on-node",
            help="Where the spec lies on the nodes (default: slurm.health_check's, else this path)",
        ),
    ] = None,
    rackcert: Annotated[
        str | None,
        typer.Option(
            "--rackcert",
            help=f"rackcert on the nodes (default: the spec's, else {DEFAULT_RACKCERT})",
        ),
    ] = None,
    program: Annotated[
        str | None,
        typer.Option(
            "--program",
            help=f"Where the wrapper goes (default: the spec's, else {DEFAULT_PROGRAM})",
        ),
    ] = None,
) -> None:
    """Print the slurm.conf lines that make the health check Slurm's, and its wrapper.

    `rackcert validate SPEC --health-check` becomes the HealthCheckProgram and the Prolog.
    Slurm runs both without arguments and with an empty environment, so the script names
    the program and the spec by absolute path. With a `slurm.health_check` block,
    `rackcert configure --tags slurm` installs this wrapper and the spec on the nodes.
    """
    from rackcert.core.slurm.conf import health_check_lines, health_check_script

    loaded = load(spec_path)
    block = loaded.spec.slurm.health_check if loaded.spec.slurm else None
    on_node = spec_on_node or (block.spec_on_node if block else str(Path(loaded.path).resolve()))
    rackcert = rackcert or (block.rackcert if block else DEFAULT_RACKCERT)
    program = program or (block.program if block and block.program else DEFAULT_PROGRAM)
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
