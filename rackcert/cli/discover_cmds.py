"""`rackcert spec discover`: draft a spec from vCenter (and the guests), or diff a spec in use.

Options and output only: the flow is `rackcert.discover.run` (rackcert/discover/flow.py).
The live read of vCenter is provision's one-round-trip discovery, handed to the flow here,
where the stages are wired together; pyVmomi and provision are imported inside the command
so `rackcert --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated

import typer

from rackcert.cli.common import console, err_console
from rackcert.cli.spec_cmds import spec_app
from rackcert.core.errors import RackcertError
from rackcert.discover.flow import DEFAULT_PASSWORD_ENV, DiscoverRequest, EndpointOptions

if TYPE_CHECKING:
    from rackcert.core.observed import Inventory
    from rackcert.core.spec import VCenter


class DriftFound(RackcertError):
    """The rack's hardware differs from the spec in use (exit 1: the rack, not the input)."""

    exit_code = 1


def _live_inventory(vcenter: VCenter) -> Inventory:
    from provision.discovery import discover
    from provision.session import connect

    with connect(SimpleNamespace(vcenter=vcenter)) as si:  # connect only reads spec.vcenter
        return discover(si)


@spec_app.command("discover")
def discover_cmd(
    vcenter: Annotated[
        str | None, typer.Option("--vcenter", help="vCenter host name or address to read")
    ] = None,
    user: Annotated[str | None, typer.Option("--user", help="vCenter user")] = None,
    password_env: Annotated[
        str | None,
        typer.Option(
            "--password-env",
            help=f"Environment variable holding the password (default {DEFAULT_PASSWORD_ENV});"
            " the draft names it, never the password",
        ),
    ] = None,
    password_file: Annotated[
        str | None, typer.Option("--password-file", help="File holding the password instead")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="vCenter port (443)")] = None,
    protocol: Annotated[
        str | None, typer.Option("--protocol", help="https, or http for a local simulator only")
    ] = None,
    datacenter: Annotated[str | None, typer.Option("--datacenter")] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="Cluster whose hosts the draft lists")
    ] = None,
    ca_file: Annotated[
        str | None, typer.Option("--ca-file", help="PEM bundle that signs vCenter's certificate")
    ] = None,
    thumbprint: Annotated[
        str | None, typer.Option("--thumbprint", help="Pin vCenter's SHA-256 fingerprint")
    ] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Do not verify TLS (written as tls.verify: false)")
    ] = False,
    from_spec: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Take the vCenter endpoint, rack name and (for --nodes) VM addresses and SSH"
            " settings from this spec",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="metadata.name (default: from -o or --from)")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the draft here (default: stdout)")
    ] = None,
    diff: Annotated[
        Path | None,
        typer.Option(
            "--diff",
            help="Compare the hardware found with this spec; exit 1 when they differ (drift)",
        ),
    ] = None,
    nodes: Annotated[
        bool,
        typer.Option(
            "--nodes",
            help="SSH to the spec's running VMs, read `nvidia-smi topo -m` and fill or correct"
            " nvlink_peer from what the guests see (needs --from)",
        ),
    ] = False,
    known_hosts: Annotated[
        Path | None, typer.Option("--known-hosts", help="known_hosts file for --nodes SSH")
    ] = None,
    inventory_file: Annotated[
        Path | None,
        typer.Option("--inventory", help="Read a recorded inventory JSON instead of vCenter"),
    ] = None,
    catalog_files: Annotated[
        list[Path] | None,
        typer.Option("--catalog", help="Extra catalog YAML (gpus/nics/servers); repeatable"),
    ] = None,
) -> None:
    """Draft a rack spec from what vCenter reports, with comments saying what to fill in.

    One hardware profile per distinct hardware; hosts with their ESXi version.

    NVLink pairs from the server catalog, or from the guests with --nodes.

    One VM per NVLink pair and per unpaired GPU; guest stack as commented placeholders.

    The draft passes `rackcert spec check`; on an unchanged rack it is byte-identical.

    With --diff SPEC: hardware added, removed, moved or changed; exit 1 on drift.

    Example: rackcert spec discover --vcenter vc.example --user admin -o inventories/new.yaml
    """
    from rackcert.discover import run
    from rackcert.lab.routes import require_lab_up

    request = DiscoverRequest(
        endpoint=EndpointOptions(
            vcenter=vcenter, port=port, protocol=protocol, user=user,
            password_env=password_env, password_file=password_file, datacenter=datacenter,
            cluster=cluster, ca_file=ca_file, thumbprint=thumbprint, insecure=insecure,
        ),
        from_spec=from_spec, name=name, output=output, diff=diff, nodes=nodes,
        known_hosts=known_hosts, inventory_file=inventory_file,
        catalog_files=list(catalog_files or []),
        before_ssh=require_lab_up,  # the lab's addresses, with the lab down, lead off the machine
    )  # fmt: skip
    result = run(request, _live_inventory, lambda line: err_console.print(line, soft_wrap=True))
    if output is None and diff is None:
        typer.echo(result.text, nl=False)
    if diff is None:
        return
    for d in result.drifts:
        console.print(d.line(), soft_wrap=True, markup=False)
    if result.drifts:
        # A RackcertError, not typer.Exit: main() drops the exit code of typer.Exit raised
        # inside a command (click returns it from app() under standalone_mode=False).
        raise DriftFound(
            f"drift: {len(result.drifts)} difference(s) in hardware between {diff} and"
            f" vCenter {result.vcenter_host}"
        )
    console.print(f"[green]no drift:[/] the hardware of {diff} is what vCenter reports")
