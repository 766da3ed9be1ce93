"""Configure stage: the guest OS layer through Ansible (inventory, runner, record, display)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import LoadedSpec
    from rackcert.core.stage_records import ConfigureRecord


def run(loaded: LoadedSpec, run_dir: RunDir, **options: Any) -> ConfigureRecord:
    """The configure stage: site.yml through ansible-runner; records configure.json.

    `options` are `rackcert.configure.runner.configure`'s (check, tags, skip_tags, limit,
    become_password, extravars, on_event). Returns the typed record; raises a RackcertError
    (after recording) when a host failed or was unreachable.

        >>> record = run(load_spec("inventories/lab.yaml"), run_dir, check=True)
        >>> record.data.totals.failed
    """
    from rackcert.configure.runner import configure
    from rackcert.core.errors import RackcertError

    record = configure(loaded, run_dir, **options)
    if record.status != "ok":
        where = run_dir.path / "configure.json"
        raise RackcertError(f"configure failed: {record.error} (record: {where})")
    return record
