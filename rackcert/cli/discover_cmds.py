"""`rackcert spec discover`: draft a spec from vCenter (and the guests), or diff a spec in use.

Wiring only: the endpoint from options or `--from SPEC`, the inventory from
provision's one-round-trip discovery (or a recorded JSON), the guests' topology over
SSH for `--nodes`, then the pure steps of rackcert.discover. pyVmomi and provision
are imported inside the command so `rackcert --help` stays fast.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated

import typer

from rackcert.cli.common import console, err_console
from rackcert.cli.spec_cmds import spec_app
from rackcert.errors import InputError, RackcertError, SpecError
from rackcert.observed import Inventory
from rackcert.pci import NVIDIA, vendor
from rackcert.spec import VCenter

DEFAULT_PASSWORD_ENV = "RACKCERT_VCENTER_PASSWORD"


_RECORD_KEYS = ("data", "observed_after", "inventory", "observed", "observed_before")


class DriftFound(RackcertError):
    """The rack's hardware differs from the spec in use (exit 1: the rack, not the input)."""

    exit_code = 1


def _endpoint(
    source: object | None,
    vcenter: str | None,
    port: int | None,
    protocol: str | None,
    user: str | None,
    password_env: str | None,
    password_file: str | None,
    datacenter: str | None,
    cluster: str | None,
    ca_file: str | None,
    thumbprint: str | None,
    insecure: bool,
):
    """Options override what `--from SPEC` says; without either, --vcenter is required."""
    from rackcert.discover.inventory_to_spec import Endpoint

    base = source.vcenter if source is not None else None
    host = vcenter or (base.host if base else None)
    if not host:
        raise InputError("say which vCenter: --vcenter HOST (or --from SPEC)")
    if password_file:
        env, file = None, password_file
    elif password_env:
        env, file = password_env, None
    elif base:
        env, file = base.password_env, base.password_file
    else:
        env, file = DEFAULT_PASSWORD_ENV, None
    tls = base.tls if base else None
    return Endpoint(
        host=host,
        port=port or (base.port if base else 443),
        protocol=protocol or (base.protocol if base else "https"),
        user=user or (base.user if base else "administrator@vsphere.local"),
        password_env=env,
        password_file=file,
        datacenter=datacenter or (base.datacenter if base else None),
        cluster=cluster or (base.cluster if base else None),
        tls_verify=False if insecure else (tls.verify if tls else True),
        ca_file=ca_file or (tls.ca_file if tls else None),
        thumbprint=thumbprint or (tls.thumbprint if tls else None),
    )


def _vcenter_model(endpoint) -> VCenter:
    try:
        return VCenter.model_validate(endpoint.to_spec())
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") else {"msg": str(exc), "loc": ()}
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"vCenter options: {where}: {first['msg']}") from None


def _read_inventory(path: Path) -> Inventory:
    """A recorded Inventory: the JSON itself, or a stage record holding it under a key."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the inventory: {exc}") from None
    # provision.json keeps it as data.observed_after (and data.observed_before).
    for _ in range(3):
        if not isinstance(data, dict) or "hosts" in data:
            break
        key = next((k for k in _RECORD_KEYS if isinstance(data.get(k), dict)), None)
        if key is None:
            break
        data = data[key]
    try:
        return Inventory.model_validate(data)
    except ValueError as exc:
        raise InputError(
            f"{path}: not a rackcert inventory: {' '.join(str(exc).split())}"
        ) from None


def _live_inventory(endpoint) -> Inventory:
    from provision.discovery import discover
    from provision.session import connect

    holder = SimpleNamespace(vcenter=_vcenter_model(endpoint))
    with connect(holder) as si:  # connect only reads spec.vcenter
        return discover(si)


def _cluster_hosts(inventory: Inventory, cluster: str | None) -> set[str] | None:
    """Hosts of --cluster, when discovery says which cluster each host is in."""
    if not cluster:
        return None
    known = {h.name: getattr(h, "cluster", None) for h in inventory.hosts}
    if not any(known.values()):
        return None  # discovery does not report clusters; keep every host
    return {name for name, c in known.items() if c == cluster}


def _node_links(
    inventory: Inventory, source, hardware, known_hosts: Path | None, withheld: list[str]
):
    """Run --nodes against the VMs `source` lists that vCenter also has; the ssh clients never
    see the variables `withheld` (the vCenter password's)."""
    from rackcert.discover.nodes import Target, probe
    from rackcert.discover.topo import gpu_passthrough, map_to_host, parse_bus_ids, parse_topo
    from rackcert.ssh_target import SshTarget

    if source is None:
        raise InputError("--nodes needs --from SPEC: the VMs' addresses and SSH key come from it")
    from rackcert.lab.routes import require_lab_up

    require_lab_up(source)  # the lab's addresses, with the lab down, lead off the machine
    ssh = source.guest.ssh
    by_vc_name = {hw.vc_name: hw for hw in hardware}
    targets, plan = [], {}
    for vm in source.vms:
        seen = inventory.vm(vm.name)
        if seen is None or seen.host not in by_vc_name:
            continue
        hw = by_vc_name[seen.host]
        pcis = gpu_passthrough(seen, {g.pci for g in hw.gpus})
        if len(pcis) < 2:
            continue  # one GPU shows no pair; nothing to learn
        node = SshTarget(
            host=vm.address,
            port=vm.ssh_port,
            user=ssh.user,
            identity_file=ssh.key_file,
            known_hosts=str(known_hosts) if known_hosts else None,
        )
        targets.append(Target(vm.name, node))
        plan[vm.name] = (hw, pcis)
    if not targets:
        raise InputError(
            "--nodes: no VM of the spec is in vCenter with two or more GPU passthrough devices"
        )
    err_console.print(
        f"--nodes: asking {len(targets)} VM(s) for `nvidia-smi topo -m`:"
        f" {', '.join(t.vm for t in targets)}",
        soft_wrap=True,
    )
    answers = probe(targets, withheld=withheld)
    links = []
    for name, (hw, pcis) in plan.items():
        answer = answers[name]
        matrix = parse_topo(answer.topo)
        links.append(
            map_to_host(matrix, pcis, parse_bus_ids(answer.bus_ids), vm=name, host=hw.name)
        )
    return links


def _rack_name(name: str | None, source, output: Path | None) -> str:
    """--name as given (checked), else the --from spec's, else the output file's stem."""
    from rackcert.discover.hardware import spec_name

    if name is not None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", name):
            raise InputError(
                f"--name {name!r}: a rack name is letters, digits, '.', '_' or '-' (63 at most)"
            )
        return name
    if source is not None:
        return source.metadata.name
    return spec_name(output.stem) if output else "new-rack"


def _say_read(endpoint, inventory: Inventory, inventory_file: Path | None) -> None:
    """One line on stderr: what was read and what it cost (never part of the draft)."""
    gpus = sum(1 for h in inventory.hosts for d in h.pci_devices if vendor(d.vendor_id) == NVIDIA)
    if inventory_file:
        where = f"inventory {inventory_file}"
    else:
        seconds = getattr(inventory, "seconds", None)
        cost = f" in {inventory.round_trips} round trips" + (f", {seconds} s" if seconds else "")
        where = f"vCenter {endpoint.host}:{endpoint.port}{cost}"
    err_console.print(
        f"read {where}: {len(inventory.hosts)} hosts, {len(inventory.vms)} VMs,"
        f" {gpus} NVIDIA PCI functions",
        soft_wrap=True,
    )


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    from rackcert.discover.catalog import load_catalog
    from rackcert.discover.drift import hardware_drift
    from rackcert.discover.inventory_to_spec import build_draft, inventory_hardware
    from rackcert.discover.topo import apply_links
    from rackcert.discover.yaml_writer import render
    from rackcert.spec_loader import load_spec, parse_spec

    for given, flag in ((from_spec, "--from"), (diff, "--diff")):
        if output and given and output.resolve() == given.resolve():
            raise InputError(
                f"-o {output} is the {flag} spec: the draft would overwrite its edits"
                " (VM addresses, guest stack); write elsewhere and compare"
            )
    if nodes and from_spec is None:
        raise InputError("--nodes needs --from SPEC: the VMs' addresses and SSH key come from it")
    source = load_spec(from_spec).spec if from_spec else None
    endpoint = _endpoint(
        source, vcenter, port, protocol, user, password_env, password_file,
        datacenter, cluster, ca_file, thumbprint, insecure,
    )  # fmt: skip
    rack = _rack_name(name, source, output)
    catalog = load_catalog(list(catalog_files or []))
    existing = load_spec(diff).spec if diff else None
    _vcenter_model(endpoint)  # a bad --port or --protocol is an input error before any work
    inventory = _read_inventory(inventory_file) if inventory_file else _live_inventory(endpoint)
    _say_read(endpoint, inventory, inventory_file)
    if not inventory.hosts:
        where = f"inventory {inventory_file}" if inventory_file else f"vCenter {endpoint.host}"
        raise InputError(f"{where} reports no ESXi hosts; nothing to draft")
    hardware = inventory_hardware(inventory, catalog, _cluster_hosts(inventory, endpoint.cluster))
    sources = {}
    if nodes:
        from rackcert.childenv import secret_variables

        secrets = secret_variables(source, password_env, endpoint.password_env)
        links = _node_links(inventory, source, hardware, known_hosts, secrets)
        sources = apply_links(hardware, links)
    draft = build_draft(hardware, endpoint, rack, pair_sources=sources)
    text = render(draft.data, draft.notes, draft.header)
    where = str(output) if output else "<draft>"
    try:
        found = parse_spec(text, where).spec
    except SpecError as exc:
        raise SpecError(f"the discovered draft does not validate (a rackcert bug): {exc}") from None
    if output:
        _write_atomic(output, text)
        err_console.print(
            f"wrote {output}: {len(found.hosts)} hosts, {len(found.hardware_profiles)} hardware"
            f" profile(s), {len(found.vms)} VMs; review the placeholders, then"
            f" `rackcert spec check {output}`",
            soft_wrap=True,
        )
    elif existing is None:
        typer.echo(text, nl=False)
    if existing is None:
        return
    known = {h.name for h in draft.hardware if h.pair_source != "none"}
    drifts = hardware_drift(existing, found, nvlink_known=known)
    for d in drifts:
        console.print(d.line(), soft_wrap=True)
    if drifts:
        # A RackcertError, not typer.Exit: main() drops the exit code of typer.Exit raised
        # inside a command (click returns it from app() under standalone_mode=False).
        raise DriftFound(
            f"drift: {len(drifts)} difference(s) in hardware between {diff} and"
            f" vCenter {endpoint.host}"
        )
    console.print(f"[green]no drift:[/] the hardware of {diff} is what vCenter reports")
