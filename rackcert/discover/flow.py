"""`rackcert spec discover` below the CLI: endpoint, inventory, hardware, draft, drift.

Why here and not in the CLI: the flow is the same whoever asks (the command, a test, a
script), like the other stages' `run`. The live read of vCenter is handed in
(`live_inventory`), so the spine does not import provision: the CLI passes provision's
one-round-trip discovery, a test may pass a recorded inventory.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rackcert.core.errors import InputError, SpecError
from rackcert.core.pci import NVIDIA, vendor

if TYPE_CHECKING:  # the models are imported where used: the CLI imports this module to build
    # `spec discover`'s help, on every invocation (issue 55)
    from rackcert.core.observed import Inventory
    from rackcert.core.spec import Spec, VCenter

DEFAULT_PASSWORD_ENV = "RACKCERT_VCENTER_PASSWORD"
Say = Callable[[str], None]
LiveInventory = Callable[["VCenter"], "Inventory"]


@dataclass
class EndpointOptions:
    """The vCenter options of the command line; each overrides what `--from SPEC` says."""

    vcenter: str | None = None
    port: int | None = None
    protocol: str | None = None
    user: str | None = None
    password_env: str | None = None
    password_file: str | None = None
    datacenter: str | None = None
    cluster: str | None = None
    ca_file: str | None = None
    thumbprint: str | None = None
    insecure: bool = False


@dataclass
class DiscoverRequest:
    """What to discover and what to do with it (`rackcert spec discover`'s options)."""

    endpoint: EndpointOptions = field(default_factory=EndpointOptions)
    from_spec: Path | None = None
    name: str | None = None
    output: Path | None = None
    diff: Path | None = None
    nodes: bool = False
    known_hosts: Path | None = None
    inventory_file: Path | None = None
    catalog_files: list[Path] = field(default_factory=list)
    # Called with the --from spec before any SSH to its VMs: the CLI passes the lab's route
    # check (a lab spec with the lab down would send SSH off the machine). A hook, because
    # the lab sits above this stage and a stage never imports upwards.
    before_ssh: Callable[[Spec], None] = field(default=lambda _spec: None)


@dataclass
class Discovered:
    """The draft's text and spec, and (with --diff) the drift from the spec in use."""

    text: str
    found: Spec
    written: Path | None
    drifts: list[Any]
    diff: Path | None
    vcenter_host: str


def run(request: DiscoverRequest, live_inventory: LiveInventory, say: Say) -> Discovered:
    """Read vCenter (or a recorded inventory), draft the spec, write it, compare it.

    `say` gets the progress lines (what was read, what was written); the draft itself is in
    the result. Raises InputError for bad options and SpecError if the draft does not
    validate (a rackcert bug).
    """
    from rackcert.core.spec_loader import load_spec, parse_spec
    from rackcert.discover.catalog import load_catalog
    from rackcert.discover.hardware_drift import hardware_drift
    from rackcert.discover.inventory_to_spec import build_draft, inventory_hardware
    from rackcert.discover.topo import apply_links
    from rackcert.discover.yaml_writer import render

    output, diff = request.output, request.diff
    for given, flag in ((request.from_spec, "--from"), (diff, "--diff")):
        if output and given and output.resolve() == given.resolve():
            raise InputError(
                f"-o {output} is the {flag} spec: the draft would overwrite its edits"
                " (VM addresses, guest stack); write elsewhere and compare"
            )
    if request.nodes and request.from_spec is None:
        raise InputError("--nodes needs --from SPEC: the VMs' addresses and SSH key come from it")
    source = load_spec(request.from_spec).spec if request.from_spec else None
    endpoint = _endpoint(source, request.endpoint)
    rack = _rack_name(request.name, source, output)
    catalog = load_catalog(list(request.catalog_files))
    existing = load_spec(diff).spec if diff else None
    vcenter = _vcenter_model(endpoint)  # a bad --port or --protocol: input error, no work done
    inventory_file = request.inventory_file
    inventory = _read_inventory(inventory_file) if inventory_file else live_inventory(vcenter)
    say(_read_line(endpoint, inventory, inventory_file))
    if not inventory.hosts:
        where = f"inventory {inventory_file}" if inventory_file else f"vCenter {endpoint.host}"
        raise InputError(f"{where} reports no ESXi hosts; nothing to draft")
    hardware = inventory_hardware(inventory, catalog, _cluster_hosts(inventory, endpoint.cluster))
    sources = {}
    if request.nodes:
        from rackcert.core.childenv import secret_variables

        secrets = secret_variables(source, request.endpoint.password_env, endpoint.password_env)
        links = _node_links(
            inventory, source, hardware, request.known_hosts, secrets, say, request.before_ssh
        )
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
        say(
            f"wrote {output}: {len(found.hosts)} hosts, {len(found.hardware_profiles)} hardware"
            f" profile(s), {len(found.vms)} VMs; review the placeholders, then"
            f" `rackcert spec check {output}`"
        )
    drifts: list[Any] = []
    if existing is not None:
        known = {h.name for h in draft.hardware if h.pair_source != "none"}
        drifts = hardware_drift(existing, found, nvlink_known=known)
    return Discovered(text, found, output, drifts, diff, endpoint.host)


_RECORD_KEYS = ("data", "observed_after", "inventory", "observed", "observed_before")


def _endpoint(source: Spec | None, options: EndpointOptions) -> Any:
    """Options override what `--from SPEC` says; without either, --vcenter is required."""
    from rackcert.discover.inventory_to_spec import Endpoint

    o = options
    vcenter, port, protocol, user = o.vcenter, o.port, o.protocol, o.user
    password_env, password_file, datacenter, cluster = (
        o.password_env, o.password_file, o.datacenter, o.cluster,
    )  # fmt: skip
    ca_file, thumbprint, insecure = o.ca_file, o.thumbprint, o.insecure
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


def _vcenter_model(endpoint: Any) -> VCenter:
    from rackcert.core.spec import VCenter

    try:
        return VCenter.model_validate(endpoint.to_spec())
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") else {"msg": str(exc), "loc": ()}
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"vCenter options: {where}: {first['msg']}") from None


def _read_inventory(path: Path) -> Inventory:
    """A recorded Inventory: the JSON itself, or a stage record holding it under a key."""
    from rackcert.core.observed import Inventory

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the inventory: {exc}") from None
    # provision.json keeps it as data.observed_after (and data.observed_before).
    for _ in range(3):
        # An Inventory's hosts are a list; provision's data also has a `hosts` map (each
        # host's lane state), which is not one.
        if not isinstance(data, dict) or isinstance(data.get("hosts"), list):
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


def _cluster_hosts(inventory: Inventory, cluster: str | None) -> set[str] | None:
    """Hosts of --cluster, when discovery says which cluster each host is in."""
    if not cluster:
        return None
    known = {h.name: getattr(h, "cluster", None) for h in inventory.hosts}
    if not any(known.values()):
        return None  # discovery does not report clusters; keep every host
    return {name for name, c in known.items() if c == cluster}


def _node_links(
    inventory: Inventory,
    source: Any,
    hardware: Any,
    known_hosts: Path | None,
    withheld: list[str],
    say: Say,
    before_ssh: Callable[[Spec], None],
) -> list[Any]:
    """Run --nodes against the VMs `source` lists that vCenter also has; the ssh clients never
    see the variables `withheld` (the vCenter password's)."""
    from rackcert.core.ssh_target import SshTarget
    from rackcert.discover.nodes import Target, probe
    from rackcert.discover.topo import gpu_passthrough, map_to_host, parse_bus_ids, parse_topo

    if source is None:
        raise InputError("--nodes needs --from SPEC: the VMs' addresses and SSH key come from it")
    before_ssh(source)
    ssh = source.guest.ssh
    by_vc_name = {hw.vc_name: hw for hw in hardware}
    targets: list[Any] = []
    plan: dict[str, Any] = {}
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
    say(
        f"--nodes: asking {len(targets)} VM(s) for `nvidia-smi topo -m`:"
        f" {', '.join(t.vm for t in targets)}"
    )
    answers = probe(targets, withheld=withheld)
    links: list[Any] = []
    for name, (hw, pcis) in plan.items():
        answer = answers[name]
        matrix = parse_topo(answer.topo)
        links.append(
            map_to_host(matrix, pcis, parse_bus_ids(answer.bus_ids), vm=name, host=hw.name)
        )
    return links


def _rack_name(name: str | None, source: Spec | None, output: Path | None) -> str:
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


def _read_line(endpoint: Any, inventory: Inventory, inventory_file: Path | None) -> str:
    """What was read and what it cost (said on stderr, never part of the draft)."""
    gpus = sum(1 for h in inventory.hosts for d in h.pci_devices if vendor(d.vendor_id) == NVIDIA)
    if inventory_file:
        where = f"inventory {inventory_file}"
    else:
        seconds = getattr(inventory, "seconds", None)
        cost = f" in {inventory.round_trips} round trips" + (f", {seconds} s" if seconds else "")
        where = f"vCenter {endpoint.host}:{endpoint.port}{cost}"
    return (
        f"read {where}: {len(inventory.hosts)} hosts, {len(inventory.vms)} VMs,"
        f" {gpus} NVIDIA PCI functions"
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
