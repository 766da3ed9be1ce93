"""The rolling upgrade as pure units: the plan, the refusals, the budget and the waves, and
the per-node state machine against in-memory models of Slurm and vCenter."""

from __future__ import annotations

from tests.support.upgrade_helpers import (
    TIMING,
    make_plan,
    new_run,
    upgraded,
    world_for,
)
from tests.support.upgrade_roll import pair as _pair


def test_a_site_without_slurm_drains_through_its_hook_commands(tmp_path):
    """HookScheduler runs the spec's argv (no shell) with {node} and {reason}; jobs_command's
    count decides DRAINING vs DRAINED; the roll never shuts a VM while it says jobs run."""
    from rackcert.core.spec import UpgradeHooks
    from rackcert.upgrade.hooks import HookScheduler

    state = tmp_path / "sched"
    state.mkdir()
    tool = tmp_path / "sched.sh"
    tool.write_text(
        "#!/bin/sh\n"
        f"d={state}\n"
        'case "$1" in\n'
        '  drain) echo "$3" > "$d/$2.drain"; echo 2 > "$d/$2.jobs" ;;\n'
        '  resume) rm -f "$d/$2.drain" ;;\n'
        '  jobs) n=$(cat "$d/$2.jobs" 2>/dev/null || echo 0); echo $n;'
        ' [ "$n" -gt 0 ] && echo $((n - 1)) > "$d/$2.jobs"; exit 0 ;;\n'
        "esac\n"
    )
    tool.chmod(0o755)
    hooks = UpgradeHooks(
        drain_command=[str(tool), "drain", "{node}", "{reason}"],
        jobs_command=[str(tool), "jobs", "{node}"],
        resume_command=[str(tool), "resume", "{node}"],
    )
    data, before, after = _pair(hosts=2)
    world = world_for(before)
    run = new_run(tmp_path, upgraded(data))
    sched = HookScheduler(hooks, run.path.name)
    ports = world.ports()
    ports.scheduler = sched
    from rackcert.upgrade.machine import Roll

    out = Roll(make_plan(before, after), run, ports, TIMING).run()
    assert out.status == "done" and [n.state for n in out.nodes] == ["resumed", "resumed"]
    assert not list(state.glob("*.drain"))  # every drain given back
    waits = [s.step for s in out.nodes[0].steps]
    assert waits[:2] == ["drain", "wait drained"]
