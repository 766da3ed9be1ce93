"""The resume rule, branch by branch (issue 52, item 3): a node returns to the queue only
when its own before, measured on it once drained and before its host went down, holds after.

Each test plants one regression on node 2 and lets the rest of the rack roll; node 2 must
stay drained with that branch's finding, and no other branch may be what caught it. Before,
the baseline was the start run's record: a node it lacked (no validate.json of it, no
`bench --localise`) was judged on versions alone, and resumed.
"""

from __future__ import annotations

import pytest

from rackcert.upgrade.ports import Certificate
from tests.support.upgrade_helpers import (
    four_node,
    make_plan,
    new_run,
    roll,
    spec_of,
    upgraded,
    world_for,
)

pytestmark = pytest.mark.unit


def _roll(tmp_path, plant, *, data=None, start_run_localised: bool = False):
    """Roll four nodes; `plant(world)` breaks node 2. The start run recorded node 2 as it was
    (checks and versions), with figures only where it localised."""
    data = data or four_node()
    before, after = spec_of(data), spec_of(upgraded(data))
    world = world_for(before)
    if not start_run_localised:
        for n in ("lab-node1", "lab-node2", "lab-node3", "lab-node4"):
            cert = world.guests.certificate(n)
            world.certifier.start[n] = Certificate(versions=cert.versions, checks=cert.checks)
    plant(world)
    plan = make_plan(before, after)
    out = roll(plan, new_run(tmp_path, upgraded(data)), world).run()
    states = {n.name: n.state for n in out.nodes}
    return out, world, states


def _node2(out):
    return next(n for n in out.nodes if n.name == "lab-node2")


def test_a_check_that_passed_before_and_fails_after_keeps_the_node_out(tmp_path):
    def plant(world):
        world.guests.check_fails_after["lab-node2"] = "gpu.count"
        world.certifier.start["lab-node2"] = Certificate()  # the start run lacks node 2

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed" and world.slurm.table["lab-node2"].drain
    assert _node2(out).findings == ["gpu.count fail, passed before the roll"]
    assert _node2(out).baseline["checks"]["gpu.count"] == "pass"  # measured on the node
    assert _node2(out).after["checks"]["gpu.count"] == "fail"
    assert states["lab-node1"] == "resumed"


def test_a_figure_measured_before_and_missing_after_keeps_the_node_out(tmp_path):
    def plant(world):
        world.guests.figure_gone_after["lab-node2"] = "node.compute"

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed"
    assert _node2(out).findings == ["node.compute not measured after the roll (measured before)"]


def test_a_figure_below_its_own_before_keeps_the_node_out(tmp_path):
    def plant(world):
        world.guests.rate_after["lab-node2"] = 60.0  # above the 40 floor, 0.6 x its before

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed"
    assert _node2(out).findings == ["node.compute 60 below 0.7 x its before 100"]
    assert _node2(out).baseline["figures"] == {"node.compute": 100.0}
    assert _node2(out).after["figures"] == {"node.compute": 60.0}
    assert states["lab-node1"] == "resumed"


def test_a_figure_below_the_specs_rule_keeps_the_node_out(tmp_path):
    data = four_node()
    data["vm_templates"][0]["gpus"] = 2
    data["certification"]["links"] = [
        {"topology": "pcie", "busbw_gbps": 50.0, "source": "the site's acceptance of PCIe pairs"}
    ]
    figure = "node_allreduce.busbw_gb_s"

    def plant(world):
        for n in world.guests.versions:
            world.guests.extra_figures[n] = {figure: (60.0, 60.0)}
        world.guests.extra_figures["lab-node2"] = {figure: (60.0, 45.0)}  # 0.75 x its before

    out, world, states = _roll(tmp_path, plant, data=data)
    assert states["lab-node2"] == "failed"
    assert _node2(out).findings == [f"{figure} 45 below its rule 50"]
    assert _node2(out).after["floors"][figure] == 50.0
    assert states["lab-node1"] == "resumed"


def test_a_host_image_not_observed_after_keeps_the_node_out(tmp_path):
    def plant(world):
        real = world.image.current

        def current(host):
            return {} if host == "lab-esx02" and world.vc.boot[host] > 1000.0 else real(host)

        world.image.current = current

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed"
    assert _node2(out).findings == ["host lab-esx02 esxi not observed, wanted 7.0.3u"]


def test_a_guest_version_not_observed_keeps_the_node_out(tmp_path):
    def plant(world):
        real = world.guests.certificate

        def certificate(node):
            cert = real(node)
            if node == "lab-node2" and world.guests.versions[node] != world.guests.initial[node]:
                cert.versions.pop("nvidia_driver")
            return cert

        world.guests.certificate = certificate

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed"
    assert _node2(out).findings == ["nvidia_driver not observed, wanted 470.141.03"]


def test_a_before_that_cannot_be_measured_fails_before_the_host_goes_down(tmp_path):
    def plant(world):
        world.guests.unreachable.add("lab-node2")

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed" and world.slurm.table["lab-node2"].drain
    assert "measure before: lab-node2: unreachable" in _node2(out).reason
    assert world.vc.power["lab-node2"] == "poweredOn", "its guest was shut down"
    assert world.vc.images["lab-esx02"]["esxi"] == "7.0.3", "its host was patched"


def test_a_before_with_no_figure_is_no_pass(tmp_path):
    def plant(world):
        real = world.guests.certificate

        def certificate(node):
            cert = real(node)
            if node == "lab-node2":
                cert.figures.clear()  # the per-node stage gave nothing, before and after
            return cert

        world.guests.certificate = certificate

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed"
    assert "the per-node stage measured no figure before the roll" in _node2(out).reason
    assert world.vc.images["lab-esx02"]["esxi"] == "7.0.3"


def test_the_labs_explained_failures_fail_alike_and_are_no_finding(tmp_path):
    out, world, states = _roll(tmp_path, lambda world: None)
    assert set(states.values()) == {"resumed"}
    node = _node2(out)
    assert node.baseline["checks"]["gpu.nvlink"] == node.after["checks"]["gpu.nvlink"] == "fail"
    assert node.findings == []


def test_the_report_shows_each_nodes_before_and_after_side_by_side(tmp_path):
    from rackcert.core.runs import RunDir
    from rackcert.report.assemble import assemble
    from rackcert.report.html import render_html

    def plant(world):
        world.guests.rate_after["lab-node2"] = 60.0

    out, world, states = _roll(tmp_path, plant)
    run = RunDir.open(next((tmp_path / "runs" / "lab").iterdir()))
    rows = {u.node: u for u in assemble(run).upgrade}
    got = {e.name: (e.before, e.after) for e in rows["lab-node2"].evidence}
    assert got["node.compute"] == ("100", "60")
    assert got["gpu.count"] == ("pass", "pass") and "gpu.nvlink" not in got
    assert rows["lab-node2"].findings == ["node.compute 60 below 0.7 x its before 100"]
    html = render_html(assemble(run))
    assert "before / after" in html and "<td>node.compute</td><td>100</td><td>60</td>" in html


def _settles_after(world, node: str, measurements: int) -> None:
    """`node`'s time.sync fails after its boot until it has been measured `measurements`
    times: chrony marks the clock synchronised a few samples after a boot."""
    world.guests.check_fails_after[node] = "time.sync"
    certify = world.certifier.certify

    def counted(n, versions):
        cert = certify(n, versions)
        if n == node and world.certifier.certified.count(n) >= measurements:
            world.guests.check_fails_after.pop(node, None)
            return certify(n, versions)
        return cert

    world.certifier.certify = counted


def test_a_clock_that_settles_after_the_boot_is_measured_again_and_resumes(tmp_path):
    out, world, states = _roll(tmp_path, lambda w: _settles_after(w, "lab-node2", 3))
    assert states["lab-node2"] == "resumed", _node2(out).findings
    step = next(s for s in _node2(out).steps if s.step == "validate")
    assert "while time.sync settled" in step.detail
    assert world.certifier.certified.count("lab-node2") > world.certifier.certified.count(
        "lab-node1"
    )


def test_a_clock_that_never_settles_is_a_finding_after_the_settle_time(tmp_path):
    def plant(world):
        world.guests.check_fails_after["lab-node2"] = "time.sync"

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed"
    assert _node2(out).findings == ["time.sync fail, passed before the roll"]
    assert world.certifier.certified.count("lab-node2") > 2  # measured again until the time


def test_a_check_that_does_not_settle_is_not_measured_again(tmp_path):
    def plant(world):
        world.guests.check_fails_after["lab-node2"] = "gpu.count"

    out, world, states = _roll(tmp_path, plant)
    assert states["lab-node2"] == "failed"
    assert world.certifier.certified.count("lab-node2") == world.certifier.certified.count(
        "lab-node1"
    )
