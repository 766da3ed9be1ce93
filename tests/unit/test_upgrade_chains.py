"""Each chain of a host proves its own reboot (issue 52, item 2).

The host model keeps the installed image apart from the running one until a reboot
(tests/support/upgrade_models.py, as ESXi does): a chain that does not reboot leaves the old image
running while the record would say otherwise. Before, `boot_time_before` was taken once, by
the forward chain: the rollback's reboot step found the host's bootTime later than that
stale value, asked for no reboot, and recorded itself done.
"""

from __future__ import annotations

import pytest

from rackcert.core.runs import RunDir
from tests.support.upgrade_helpers import four_node as _four
from tests.support.upgrade_helpers import make_plan, new_run, roll, spec_of, upgraded, world_for

pytestmark = pytest.mark.unit


def _failed_node3(tmp_path):
    """A roll whose node 3 failed after its host took the new image (its guest install broke)."""
    data = _four()
    before, after = spec_of(data), spec_of(upgraded(data))
    world = world_for(before)
    world.guests.broken_install.add("lab-node3")
    plan = make_plan(before, after)
    run = new_run(tmp_path, upgraded(data))
    out = roll(plan, run, world).run()
    assert out.nodes[2].state == "failed"
    assert world.vc.images["lab-esx03"]["esxi"] == "7.0.3u"  # the forward chain rebooted
    world.guests.broken_install.clear()
    return world, plan, run, out


def _reboots(world, host: str) -> int:
    return sum(1 for _, kind, h in world.vc.events if kind == "reboot" and h == host)


def test_a_rollback_reboots_its_host_and_runs_the_old_image(tmp_path):
    world, plan, run, out = _failed_node3(tmp_path)
    forward_boot = next(h for h in out.hosts if h.name == "lab-esx03").boot_time_after
    again = roll(plan, run, world, data=out).rollback("lab-node3")
    assert _reboots(world, "lab-esx03") == 2, "the rollback never rebooted the host"
    assert world.vc.images["lab-esx03"]["esxi"] == "7.0.3", "the old image is not running"
    host = next(h for h in again.hosts if h.name == "lab-esx03")
    assert host.boot_time_before == forward_boot  # the rollback's own, taken before its image
    assert host.boot_time_after > host.boot_time_before
    step = next(s for s in host.steps if s.step == "rollback reboot")
    assert step.detail == f"bootTime {forward_boot} -> {host.boot_time_after}"
    assert again.nodes[2].state == "rolled_back"


class Killed(BaseException):
    """SIGKILL, as far as the roll can tell: nothing after it runs."""


def test_a_rollback_killed_before_its_reboot_reboots_when_run_again(tmp_path):
    world, plan, run, out = _failed_node3(tmp_path)
    reboot = world.vc.reboot

    def killed(host: str) -> None:
        raise Killed()

    world.vc.reboot = killed  # type: ignore[method-assign]
    with pytest.raises(Killed):
        roll(plan, run, world, data=out).rollback("lab-node3")
    world.vc.reboot = reboot  # type: ignore[method-assign]
    assert world.vc.installed["lab-esx03"]["esxi"] == "7.0.3"  # staged, not running
    assert world.vc.images["lab-esx03"]["esxi"] == "7.0.3u"
    world.clock.sleep(30)
    record = RunDir.open(run.path).read_record("upgrade")
    again = roll(plan, run, world, data=record.data).rollback("lab-node3")
    assert _reboots(world, "lab-esx03") == 2
    assert world.vc.images["lab-esx03"]["esxi"] == "7.0.3"
    assert again.nodes[2].state == "rolled_back", again.nodes[2].reason


def test_a_forward_chain_killed_after_its_image_reboots_when_run_again(tmp_path):
    data = _four(hosts=1)
    before, after = spec_of(data), spec_of(upgraded(data))
    world = world_for(before)
    plan = make_plan(before, after)
    run = new_run(tmp_path, upgraded(data))
    reboot = world.vc.reboot

    def killed(host: str) -> None:
        raise Killed()

    world.vc.reboot = killed  # type: ignore[method-assign]
    with pytest.raises(Killed):
        roll(plan, run, world).run()
    world.vc.reboot = reboot  # type: ignore[method-assign]
    world.clock.sleep(30)
    record = RunDir.open(run.path).read_record("upgrade")
    out = roll(plan, run, world, data=record.data).run()
    assert out.status == "done", out.stopped_because
    assert _reboots(world, "lab-esx01") == 1
    assert world.vc.images["lab-esx01"]["esxi"] == "7.0.3u"
