"""`rackcert lab link slow|clear|show`: plant a link fault on the running lab, and clear it.

Why a command: burn-in and localisation are proven by naming a bad link alone, and a user
trying them on the lab has no cable to pull. The lab's links are shaped with tc to the line
rate its spec declares; a fault is a fraction of it (rackcert.lab.linkfault).

    rackcert lab link slow lab-node2 --fraction 0.5     # lab-node2's link at half rate
    rackcert lab link slow lab-node1 --to lab-node2     # that cable only
    rackcert lab link show
    rackcert lab link clear
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rackcert.cli.common import console, load
from rackcert.cli.lab_cmds import lab_app
from rackcert.core.paths import inventories_dir

link_app = typer.Typer(
    help="Plant and clear a link fault on the running lab (tc, a fraction of its line rate).",
    no_args_is_help=True,
)
lab_app.add_typer(link_app, name="link")

SpecOpt = Annotated[
    Path | None,
    typer.Option("--spec", help="Lab spec (default: inventories/lab.yaml)", show_default=False),
]


def _spec(path: Path | None):  # noqa: ANN202 - the loaded spec model
    from rackcert.lab.linkfault import require_root

    require_root()
    return load(path or inventories_dir() / "lab.yaml").spec


@link_app.command("slow")
def slow_cmd(
    node: Annotated[
        str, typer.Argument(metavar="NODE", help="The VM whose link is slowed (e.g. lab-node2)")
    ],
    to: Annotated[
        str | None,
        typer.Option("--to", help="Only the cable between NODE and this VM (both ways)"),
    ] = None,
    fraction: Annotated[
        float, typer.Option("--fraction", help="Of the spec's line rate, between 0 and 1")
    ] = 0.5,
    spec_path: SpecOpt = None,
) -> None:
    """Slow NODE's link (or only its cable to --to) to a fraction of the line rate, both ways.

    On two nodes the one link is then slow; on three or more, without --to, every link of
    NODE is, and burnin and bench --localise name the node. `lab link clear` undoes it; a
    power cycle of the VM does too."""
    from rackcert.lab import linkfault

    spec = _spec(spec_path)
    where = linkfault.find_node(spec, node)
    peer = linkfault.find_node(spec, to) if to else None
    console.print(f"slowed {linkfault.slow(spec, where, fraction, peer)}", markup=False)


@link_app.command("clear")
def clear_cmd(spec_path: SpecOpt = None) -> None:
    """Every running node's link back at the spec's line rate (as `lab up` shapes it)."""
    from rackcert.lab import linkfault

    spec = _spec(spec_path)
    nodes = linkfault.clear(spec)
    rate = spec.certification.line_rate_gbps
    at = f"at the line rate {float(rate) * 1000:g} Mbit/s" if rate else "unshaped"
    console.print(f"cleared: {', '.join(n.name for n in nodes)} {at}", markup=False)


@link_app.command("show")
def show_cmd(spec_path: SpecOpt = None) -> None:
    """Each running node's link rates as tc holds them now, and the spec's line rate."""
    from rackcert.lab import linkfault

    for line in linkfault.show(_spec(spec_path)):
        console.print(line, markup=False)
