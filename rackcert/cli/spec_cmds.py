"""`rackcert spec ...`: check a spec, print its JSON Schema."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from rackcert.cli.common import JsonOpt, SpecArg, app, console, load, print_json
from rackcert.cli.output import show_table

if TYPE_CHECKING:  # imported where used: every invocation imports this module (issue 55)
    from rackcert.core.placement import VmPlacement
    from rackcert.core.spec import Spec

spec_app = typer.Typer(help="Check rack specs and print their schema.", no_args_is_help=True)
app.add_typer(spec_app, name="spec")


def summary(spec: Spec) -> dict[str, object]:
    """Counts an operator checks at a glance: hosts, GPUs, NVLink pairs, VMs."""
    from rackcert.core.placement import place

    placements = {p.vm: p for p in place(spec)}
    hosts = []
    for host in spec.hosts:
        profile = spec.profile(host.profile)
        pairs = sum(1 for g in profile.gpus if g.nvlink_peer) // 2
        vms = [p for p in placements.values() if p.host == host.name]
        hosts.append(
            {
                "host": host.name,
                "profile": profile.name,
                "gpus": len(profile.gpus),
                "nvlink_pairs": pairs,
                "nics": len(profile.nics),
                "vms": [p.vm for p in vms],
                "gpus_used": sum(len(p.gpus) for p in vms),
            }
        )
    return {
        "rack": spec.metadata.name,
        "hosts": hosts,
        "totals": {
            "hosts": len(spec.hosts),
            "gpus": sum(h["gpus"] for h in hosts),
            "nvlink_pairs": sum(h["nvlink_pairs"] for h in hosts),
            "vms": len(spec.vms),
            "vm_gpus": sum(len(p.gpus) for p in placements.values()),
        },
        "vms": [_vm_row(spec, p) for p in placements.values()],
    }


def _vm_row(spec: Spec, p: VmPlacement) -> dict[str, object]:
    from rackcert.core.device_groups import describe, wanted_group

    group = wanted_group(spec, p)
    return {
        "vm": p.vm,
        "host": p.host,
        "gpus": list(p.gpus),
        "nvlink_pair": p.nvlink_pair,
        "partition": p.partition,
        "modules": list(p.modules),
        "device_group": describe(group) if group else None,
    }


@spec_app.command("check")
def check(spec_path: SpecArg, as_json: JsonOpt = False) -> None:
    """Validate a spec (types, references, NVLink pairs, GPU ownership) and summarise it.

    Exit 0 when the spec is valid; exit 2 with one line naming file:line and field otherwise.
    """
    loaded = load(spec_path)
    data = summary(loaded.spec)
    if as_json:
        print_json({"ok": True, "file": str(spec_path), "sha256": loaded.sha256, **data})
        return
    table = Table(title=f"rack {data['rack']}", title_justify="left")
    for col in ("host", "profile", "GPUs", "NVLink pairs", "NICs", "VMs (GPUs used)"):
        table.add_column(col)
    for h in data["hosts"]:
        vms = ", ".join(h["vms"]) or "-"
        table.add_row(
            h["host"],
            h["profile"],
            str(h["gpus"]),
            str(h["nvlink_pairs"]),
            str(h["nics"]),
            f"{vms} ({h['gpus_used']})",
        )
    show_table(console, table)
    _show_groups(data["vms"])  # type: ignore[arg-type]
    totals = data["totals"]
    modes = Counter(t.nvlink.value for t in loaded.spec.vm_templates)
    console.print(
        f"[green]OK[/] {spec_path}: {totals['hosts']} hosts, {totals['gpus']} GPUs,"
        f" {totals['nvlink_pairs']} NVLink pairs, {totals['vms']} VMs using {totals['vm_gpus']}"
        f" GPUs (templates by nvlink policy: {dict(modes)})",
        soft_wrap=True,
    )


def _show_groups(vms: list[dict[str, object]]) -> None:
    """The VMs that take a vendor device group: host, partition, modules, backing."""
    rows = [v for v in vms if v["device_group"]]
    if not rows:
        return
    table = Table(title="device groups (vSphere 8)", title_justify="left")
    for col in ("VM", "host", "device group"):
        table.add_column(col)
    for v in rows:
        table.add_row(*(Text(str(v[k])) for k in ("vm", "host", "device_group")))
    show_table(console, table)


@spec_app.command("schema")
def schema() -> None:
    """Print the spec's JSON Schema (for editors and CI linters)."""
    from rackcert.core.spec import Spec

    typer.echo(json.dumps(Spec.model_json_schema(), indent=2))
