"""A four-node lab rack, its certified run and its upgraded spec, and the roll wired to the
in-memory models (tests/support/upgrade_models.py), for the upgrade's unit tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.runs import RunDir
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import parse_spec
from rackcert.upgrade.budget import Budget
from rackcert.upgrade.layers import guest_versions, host_versions
from rackcert.upgrade.machine import Ports, Roll, Timing
from rackcert.upgrade.plan import PlanOptions, UpgradePlan, build_plan
from tests.support.spec_helpers import LAB, example_data
from tests.support.upgrade_models import (
    SimCertifier,
    SimClock,
    SimGuests,
    SimHostImage,
    SimSlurm,
    SimVcenter,
)

NEW_DRIVER = "470.141.03"
NEW_ESXI = "7.0.3u"


def four_node(hosts: int = 4, per_host: int = 1) -> dict[str, Any]:
    """lab.yaml grown to `hosts` hosts with `per_host` one-GPU VMs each."""
    data = example_data(LAB)
    data["hosts"] = [
        {
            "name": f"lab-esx{i:02d}",
            "address": f"lab-esx{i:02d}.lab.internal",
            "profile": "lab-a100x2",
            "esxi_version": "7.0.3",
        }
        for i in range(1, hosts + 1)
    ]
    tmpl = dict(data["vm_templates"][0], name="lab-1gpu", gpus=1, nvlink="none")
    data["vm_templates"] = [tmpl]
    data["vms"] = [
        {
            "name": f"lab-node{(h - 1) * per_host + k}",
            "template": "lab-1gpu",
            "host": f"lab-esx{h:02d}",
            "allow_split_pair": True,
            "address": f"10.77.0.{10 + (h - 1) * per_host + k}",
        }
        for h in range(1, hosts + 1)
        for k in range(1, per_host + 1)
    ]
    return data


def upgraded(data: dict[str, Any], *, driver: str = NEW_DRIVER, esxi: str | None = NEW_ESXI):
    import copy

    new = copy.deepcopy(data)
    new["guest"]["nvidia_driver"] = driver
    if esxi:
        for h in new["hosts"]:
            h["esxi_version"] = esxi
    return new


def spec_of(data: dict[str, Any]) -> Spec:
    return parse_spec(yaml.safe_dump(data, sort_keys=False), "spec.yaml").spec


@dataclass
class World:
    clock: SimClock
    slurm: SimSlurm
    vc: SimVcenter
    image: SimHostImage
    guests: SimGuests
    certifier: SimCertifier

    def ports(self) -> Ports:
        return Ports(self.slurm, self.vc, self.guests, self.certifier, self.image, self.clock)


def world_for(before: Spec, **slurm_kw: Any) -> World:
    clock = SimClock()
    placement = {v.name: v.host for v in before.vms}
    slurm = SimSlurm(clock, list(placement), **slurm_kw)
    first_host = before.hosts[0].name
    vc = SimVcenter(clock, slurm, placement, host_versions(before, first_host))
    guests = SimGuests(vc, guest_versions(before))
    return World(clock, slurm, vc, SimHostImage(vc), guests, SimCertifier(guests))


def make_plan(before: Spec, after: Spec, **opts: Any) -> UpgradePlan:
    budget = Budget.parse(str(opts.pop("max_unavailable", "1")))
    states = opts.pop("states", None)
    run = opts.pop("run", "")
    options = PlanOptions(
        budget=budget, allow_uncertified=opts.pop("allow_uncertified", True), **opts
    )
    return build_plan(
        before,
        after,
        options,
        certified_run="certified",
        reference=None,
        matrix_where="validation/certified",
        states=states,
        run=run,
    )


def new_run(tmp_path: Path, data: dict[str, Any]) -> RunDir:
    text = yaml.safe_dump(data, sort_keys=False)
    return RunDir.create(tmp_path / "runs", "lab", "0" * 64, text)


TIMING = Timing(
    drain_timeout=60, shutdown_timeout=10, reboot_timeout=60, budget_timeout=120, poll=0.5
)


def roll(plan: UpgradePlan, run: RunDir, world: World, timing: Timing = TIMING, **kw: Any) -> Roll:
    return Roll(plan, run, world.ports(), timing, **kw)
