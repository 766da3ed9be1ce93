"""`rackcert configure SPEC`: the guest stack on every VM, through Ansible (playbooks/site.yml)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rackcert.cli.common import (
    JsonOpt,
    RunOpt,
    RunsRootOpt,
    SpecArg,
    app,
    console,
    default_runs_root,
    load,
    open_or_create_run,
    print_json,
)
from rackcert.cli.display import show_configure
from rackcert.cli.output import SETTINGS
from rackcert.core.errors import InputError, RackcertError

if TYPE_CHECKING:  # imported where used: every invocation imports this module (issue 55)
    from rackcert.core.spec_loader import LoadedSpec

ROLES = (
    "ofed",
    "mlx_ats",
    "nvidia_driver",
    "vgpu_license",
    "cuda",
    "container_toolkit",
    "nvidia_peermem",
    "network",
    "ssh_trust",
    "storage_nfs",
    "dl_runtime",
)
TAGS = (*ROLES, "vendor")


def _split(values: list[str]) -> list[str]:
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    unknown = [v for v in out if v not in TAGS]
    if unknown:
        raise InputError(f"unknown tag(s) {', '.join(unknown)}: choose from {', '.join(TAGS)}")
    return out


def _vgpu_managers(loaded: LoadedSpec, runs_root: Path) -> dict[str, dict[str, str]]:
    """Per VM, its ESXi host's vGPU manager version as the newest recorded discovery saw it,
    for the nvidia_driver role's branch check before a .run guest driver is installed
    (nothing where the driver comes from packages, or nothing was discovered)."""
    from rackcert.core.ansible_vars import spec_group_vars

    if not spec_group_vars(loaded.spec).get("nvidia_driver_run_file"):
        return {}
    from validation.host_software import vgpu_manager
    from validation.hypervisor_results import discovery_record

    found = discovery_record(loaded.spec.metadata.name, None, runs_root)
    if found is None:
        return {}
    out = {}
    for vm in loaded.spec.vms:
        manager = vgpu_manager(loaded.spec, found[0], vm.host) if vm.host else None
        if manager is not None and manager.version:
            out[vm.name] = {"nvidia_driver_vgpu_manager": manager.version}
    return out


@app.command("configure")
def configure_cmd(
    spec_path: SpecArg,
    check: Annotated[
        bool,
        typer.Option("--check", help="Ansible check mode: print what would change, change nothing"),
    ] = False,
    tags: Annotated[
        list[str],
        typer.Option(
            "--tags", help=f"Only these roles (repeat or comma-separate): {', '.join(TAGS)}"
        ),
    ] = [],  # noqa: B006 - typer reads the default
    skip_tags: Annotated[list[str], typer.Option("--skip-tags", help="All roles but these")] = [],  # noqa: B006
    limit: Annotated[
        str | None, typer.Option("--limit", help="Only these VMs (an Ansible host pattern)")
    ] = None,
    become_password_env: Annotated[
        str | None,
        typer.Option(
            "--become-password-env",
            help="Environment variable holding the sudo password (kept in memory, never recorded)",
        ),
    ] = None,
    extra_vars: Annotated[
        list[str],
        typer.Option(
            "--extra-vars",
            "-e",
            help="Ansible extra vars, as ansible-playbook -e: @file.yml or k=v (repeatable)",
        ),
    ] = [],  # noqa: B006
    write_inventory: Annotated[
        Path | None,
        typer.Option(
            "--write-inventory",
            help="Write the generated inventory to FILE and stop (for ansible-playbook -i FILE)",
        ),
    ] = None,
    versions_from: Annotated[
        Path | None,
        typer.Option(
            "--versions-from",
            help="Take the nodes (of --limit) back to the versions an earlier configure RUN"
            " recorded on them before it changed anything (a run directory or its configure.json)",
        ),
    ] = None,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Install and configure the guest stack on the spec's VMs with Ansible (playbooks/site.yml).

    OFED, ATS, the NVIDIA driver, CUDA and the container toolkit come from the spec's package sources; then GPUDirect RDMA, MTU, SSH trust between the nodes, the data mount and the DL runtime.

    Shows progress per host and task, then a per-host summary; records configure.json and Ansible's artifacts in the run directory. A host that fails or is unreachable fails alone: the others finish, and the exit code is 1.
    """  # noqa: E501 - typer rewraps; one line per paragraph reads best in --help
    from rackcert.configure.progress import LiveProgress
    from rackcert.configure.runner import configure

    loaded = load(spec_path)
    tag_list, skip_list = _split(tags), _split(skip_tags)
    operator_vars = [_extra_vars_arg(v) for v in extra_vars]
    if write_inventory is not None:
        _write_inventory(loaded, write_inventory)
        return
    if versions_from is not None:  # a wrong RUN fails here with one line, before anything runs
        from rackcert.configure.rollback import versions_host_vars

        versions_host_vars(
            versions_from,
            [v.name for v in loaded.spec.vms if not limit or v.name in limit.split(",")],
        )
    password = None
    if become_password_env:
        from rackcert.core.secrets import REDACTOR, check_secret

        password = os.environ.get(become_password_env)
        if password is None:
            raise InputError(
                f"--become-password-env: environment variable {become_password_env} is not set"
            )
        REDACTOR.add(check_secret(password, "--become-password-env"))
    from rackcert.lab.routes import require_lab_up

    require_lab_up(loaded.spec)  # the lab's addresses, with the lab down, lead off the machine
    run_dir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)
    names = [vm.name for vm in loaded.spec.vms]
    if not as_json:
        mode = " (check mode: nothing is changed)" if check else ""
        console.print(
            f"configure {loaded.spec.metadata.name}: {len(names)} VMs{mode}, run {run_dir.path}"
        )
    with LiveProgress(console if not as_json else _quiet_console(), names) as progress:
        record = configure(
            loaded,
            run_dir,
            check=check,
            tags=tag_list,
            skip_tags=skip_list,
            limit=limit,
            become_password=password,
            operator_vars=operator_vars,
            on_event=progress,
            verbosity=SETTINGS.verbosity,
            versions_from=versions_from,
            host_vars=_vgpu_managers(loaded, runs_dir or default_runs_root()),
        )
    path = run_dir.path / "configure.json"
    if as_json:
        print_json(record.model_dump(mode="json"))
    else:
        show_configure(console, record, path)
    if record.status != "ok":
        raise RackcertError(f"configure failed: {record.error} (record: {path})")


def _extra_vars_arg(value: str) -> str:
    """One --extra-vars value, checked the way ansible-playbook reads it; @file made absolute."""
    text = value.strip()
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        if not path.is_file():
            raise InputError(f"--extra-vars {value}: no such file")
        return f"@{path.resolve()}"
    if text.startswith(("{", "[")) or "=" in text:
        return text
    raise InputError(f"--extra-vars {value!r}: give @file.yml, key=value or a YAML/JSON mapping")


def _write_inventory(loaded, target: Path) -> None:  # noqa: ANN001 - LoadedSpec
    """The inventory `configure` would use, at `target`, and how to run it by hand."""
    from rackcert.configure.inventory import build_inventory, dump_unsafe_yaml
    from rackcert.core.paths import playbooks_dir

    text = dump_unsafe_yaml(build_inventory(loaded.spec))
    header = f"# Generated by rackcert from {loaded.path} (sha256 {loaded.sha256[:12]}).\n"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(header + text)
    except OSError as exc:
        raise InputError(f"--write-inventory {target}: {exc.strerror or exc}") from None
    console.print(
        f"inventory for {loaded.spec.metadata.name} ({len(loaded.spec.vms)} VMs): {target}\n"
        f"run it with: ansible-playbook {playbooks_dir() / 'site.yml'} -i {target}"
        " (with the rackcert.gpu collection installed)",
        soft_wrap=True,
    )


def _quiet_console():  # noqa: ANN202 - a rich Console that prints nowhere
    from rich.console import Console

    return Console(file=open(os.devnull, "w"), force_terminal=False)  # noqa: SIM115
