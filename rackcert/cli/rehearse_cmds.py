"""`rackcert capture` and `rackcert rehearse`: provision a copy of the real vCenter first.

capture: read the spec's vCenter (read-only) into one versioned JSON file.
rehearse: capture, start the twin from the capture on loopback, provision it, read it
back, and record rehearsal.json. The flow lives in rackcert/rehearse.py; this module
only parses options and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rackcert.cli.common import (
    JsonOpt,
    RunOpt,
    RunsRootOpt,
    app,
    console,
    default_runs_root,
    load,
    open_or_create_run,
    print_json,
)
from rackcert.cli.display import show_rehearsal
from rackcert.core.errors import InputError

CAPTURE_HELP = (
    "Write what the spec's vCenter holds into one JSON file (read-only)."
    "\n\nHosts (hardware, NUMA, every PCI function, passthrough state, the ATS option with its"
    " declared type, versions, maintenance, boot time), clusters with DRS rules, datastores,"
    " port groups, VMs and templates with their devices and extraConfig, and vCenter's about,"
    " in the one paged PropertyCollector retrieval discovery makes. No secret goes in: guestinfo"
    " values and secret-like extraConfig keys are withheld (their sha256 stays). --anonymize"
    " renames hosts, VMs, clusters, datastores, port groups and IPv4 addresses consistently,"
    " for a public bug report. `rackcert lab up --capture FILE` serves it."
)
REHEARSE_HELP = (
    "Provision a twin of the real vCenter before the real one: capture, twin, plan, apply,"
    " read back."
    "\n\nThe twin (loopback, its own password) serves exactly the capture; provision runs"
    " against it with the real rules (maintenance mode, ATS, passthrough, reboots, clones,"
    " ESXi's power-on checks); the wait for a guest is skipped with a note. Records"
    " rehearsal.json: actions, refusals with vCenter's message, the second plan (empty when it"
    " converged), times and the capture's digest. Exit 0 only with no refusal and an empty"
    " second plan. Then `rackcert provision SPEC --rehearsed RUN` acts only on that inventory."
)


@app.command("capture", help=CAPTURE_HELP)
def capture_cmd(
    spec_path: Annotated[
        Path | None, typer.Argument(help="Rack spec (YAML) naming the vCenter", show_default=False)
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the capture here")
    ] = None,
    anonymize: Annotated[
        bool, typer.Option("--anonymize", help="Replace names and addresses by aliases")
    ] = False,
    schema: Annotated[
        bool, typer.Option("--schema", help="Print the capture's JSON Schema and exit")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    from rackcert.core.capture.model import json_schema

    if schema:
        print_json(json_schema())
        return
    if spec_path is None or output is None:
        raise InputError("capture: give the spec and -o FILE (rackcert capture SPEC -o FILE)")
    from provision.capture import capture
    from provision.session import connect
    from rackcert.core.capture.anonymize import anonymize as anonymized
    from rackcert.core.runs import atomic_write_bytes
    from rackcert.core.secrets import REDACTOR

    loaded = load(spec_path)
    with connect(loaded.spec) as si:
        taken, _inventory = capture(si)
    if anonymize:
        taken = anonymized(taken)
    atomic_write_bytes(output, REDACTOR.scrub(taken.to_json()).encode())  # a second fence
    summary = {
        "file": str(output),
        "taken_at": taken.taken_at,
        "hosts": len(taken.hosts),
        "vms": len([v for v in taken.vms if not v.template]),
        "templates": len([v for v in taken.vms if v.template]),
        "round_trips": taken.round_trips,
        "seconds": taken.seconds,
        "inventory_digest": taken.inventory_digest,
        "anonymized": taken.anonymized,
    }
    if as_json:
        print_json(summary)
        return
    console.print(
        f"captured {summary['hosts']} host(s), {summary['vms']} VM(s), {summary['templates']}"
        f" template(s) from {taken.about.full_name or loaded.spec.vcenter.host} in"
        f" {taken.seconds:.2f} s ({taken.round_trips} round trips)"
        f"{', anonymized' if anonymize else ''}: {output}",
        markup=False,
        emoji=False,
        highlight=False,
    )


@app.command("rehearse", help=REHEARSE_HELP)
def rehearse_cmd(
    spec_path: Annotated[Path, typer.Argument(help="Rack spec (YAML)", show_default=False)],
    power_cycle: Annotated[
        bool,
        typer.Option("--power-cycle", help="Rehearse with --power-cycle, as provision would run"),
    ] = False,
    capture: Annotated[
        Path | None,
        typer.Option("--capture", help="Rehearse on this capture instead of reading vCenter now"),
    ] = None,
    as_json: JsonOpt = False,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
) -> None:
    from rackcert.core.capture.model import load_capture
    from rackcert.rehearse import rehearse

    loaded = load(spec_path)
    taken = load_capture(capture) if capture is not None else None
    if taken is not None and taken.anonymized:
        raise InputError(f"{capture}: an anonymized capture names no host of the spec")
    run_dir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)

    def say(line: str) -> None:
        if not as_json:
            console.print(line, markup=False, emoji=False, highlight=False)

    record = rehearse(loaded, run_dir, power_cycle=power_cycle, capture=taken, say=say)
    path = run_dir.path / "rehearsal.json"
    if as_json:
        print_json(record.data.model_dump(mode="json") | {"record": str(path)})
    else:
        show_rehearsal(console, record.data, path)
    if record.data.refusals or record.data.second_plan:
        raise typer.Exit(1)
