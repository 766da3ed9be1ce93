"""`rackcert upgrade`'s wiring: the upgrade stage's ports made of the real things.

A flow on the top floor (like pipeline and rehearse): the only place that joins the
upgrade stage (rackcert.upgrade) to provision's ports (provision/hypervisor_port: power,
maintenance with rackcert's mark, reboots; provision/host_image_port: vLCM, or esxcli
software where the cluster uses baselines), configure (the roles, limited to one node) and
validation (the node's own validate). It wires them; it speaks to no outside system itself
(pyVmomi is provision's alone). A roll with no host change skips the host steps and records
why.

    planned = plan_roll(loaded, Path("runs"), max_unavailable="1")
    roll = open_roll(planned, loaded, Path("runs"))
    data = start_roll(roll)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.hypervisor_port import VSphereHypervisor
from rackcert.core.errors import InputError, RecordError
from rackcert.core.known_hosts import rack_file
from rackcert.core.matrix import certified_dir, load_references
from rackcert.core.runs import RunDir, last_certified, read_capped, run_paths
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import LoadedSpec, parse_spec
from rackcert.core.stage_records import BenchRecord, UpgradeData, UpgradeRecord, ValidateRecord
from rackcert.core.upgrade_layers import diff, guest_tags, layers
from rackcert.upgrade.budget import Budget
from rackcert.upgrade.evidence import certificates, node_figures, reference_figures
from rackcert.upgrade.hooks import AskScheduler, HookScheduler
from rackcert.upgrade.layers import guest_versions
from rackcert.upgrade.machine import Policy, Ports, Roll, Timing
from rackcert.upgrade.plan import PlanOptions, UpgradePlan, build_plan, scheduler_kind
from rackcert.upgrade.ports import (
    Certificate,
    HostImage,
    Hypervisor,
    NodeState,
    PortError,
    Scheduler,
)
from rackcert.upgrade.slurm import SlurmScheduler
from rackcert.upgrade.start import read_start


@dataclass
class Planned:
    plan: UpgradePlan
    certified: RunDir
    before: LoadedSpec
    resume: RunDir | None
    data: UpgradeData | None


def resumable(root: Path, rack: str, sha256: str) -> tuple[RunDir, UpgradeData] | None:
    """The newest run of this rack and spec whose roll has not finished."""
    for path in reversed(run_paths(root, rack)):
        if not (path / "upgrade.json").is_file():
            continue
        run = RunDir.open(path)
        if run.meta.get("spec_sha256") != sha256:
            continue
        record = run.read_record("upgrade")
        if isinstance(record, UpgradeRecord) and record.data.status != "done":
            return run, record.data
        return None
    return None


def certified_spec(run: RunDir) -> LoadedSpec:
    path = run.path / "spec.yaml"
    try:
        return parse_spec(read_capped(path), str(path))
    except RecordError as exc:
        raise InputError(f"certified run {run.path}: its spec copy cannot be read: {exc}") from None


def scheduler_for(spec: Spec, run: str, ask: Callable[[str], bool] | None = None) -> Scheduler:
    kind = scheduler_kind(spec)
    if kind == "slurm":
        assert spec.slurm is not None
        conf = spec.slurm.client_conf
        return SlurmScheduler({"SLURM_CONF": conf} if conf else None)
    if kind == "hooks":
        assert spec.upgrade.hooks is not None
        return HookScheduler(spec.upgrade.hooks, run)

    def refuse(question: str) -> bool:
        raise InputError(f"{question} No scheduler to ask and no terminal: add upgrade.hooks")

    return AskScheduler(run, ask or refuse)


def plan_roll(
    loaded: LoadedSpec,
    root: Path,
    *,
    max_unavailable: str = "1",
    max_failures: int = 1,
    order: list[str] | None = None,
    allow_uncertified: bool = False,
    allow_uncertified_start: bool = False,
    certified_run: Path | None = None,
    read_scheduler: bool = True,
) -> Planned:
    """The plan from the rack's last certified run (or the one given) to `loaded`."""
    spec = loaded.spec
    rack = spec.metadata.name
    certified = RunDir.open(certified_run) if certified_run else last_certified(root, rack)
    if certified is None:
        raise InputError(
            f"no certified run of rack {rack} under {root}: the roll starts from one"
            " (certify the rack first, or give --certified-run)"
        )
    start = read_start(certified, rack)  # of this rack, validated; its verdict
    before = certified_spec(certified)
    found = resumable(root, rack, loaded.sha256)
    resume, data = found if found else (None, None)
    states: dict[str, NodeState] | None = None
    kind = scheduler_kind(spec)
    if read_scheduler and kind != "ask":
        names = [v.name for v in spec.vms]
        sched = scheduler_for(spec, resume.path.name if resume else "")
        try:
            states = sched.nodes(names)
        except PortError as exc:
            raise InputError(f"cannot read the scheduler's nodes: {exc}") from None
        if order == ["least-busy"] and isinstance(sched, SlurmScheduler):
            states = {
                n: NodeState(**{**s.__dict__, "jobs": sched.jobs(n)}) for n, s in states.items()
            }
    ref_id = spec.certification.reference
    reference = load_references().get(ref_id) if ref_id else None
    plan = build_plan(
        before.spec,
        spec,
        PlanOptions(
            budget=Budget.parse(max_unavailable),
            order=order,
            allow_uncertified=allow_uncertified,
            max_failures=max_failures,
            allow_uncertified_start=allow_uncertified_start,
        ),
        certified_run=certified.path.name,
        reference=reference,
        matrix_where=str(certified_dir()),
        states=states,
        run=resume.path.name if resume else "",
        start=start,
    )
    return Planned(plan, certified, before, resume, data)


def open_roll(
    planned: Planned,
    loaded: LoadedSpec,
    root: Path,
    *,
    drain_timeout: float = 3600.0,
    drain_policy: Policy = "wait",
    shutdown_timeout: float = 300.0,
    say: Callable[[str], None] | None = None,
    ask: Callable[[str], bool] | None = None,
    ports: Ports | None = None,
) -> Roll:
    """The roll in a new run directory, or the unfinished one of this spec (resume): then the
    record's waves are kept, whatever the scheduler's load says now."""
    plan = planned.plan
    run = planned.resume or RunDir.create(
        root, loaded.spec.metadata.name, loaded.sha256, loaded.text
    )
    if planned.data is not None:
        by_host = {u.host: u for u in plan.units}
        plan.waves = [[by_host[h] for h in wave if h in by_host] for wave in planned.data.waves]
    timing = Timing(
        drain_timeout=drain_timeout,
        drain_policy=drain_policy,
        shutdown_timeout=shutdown_timeout,
        poll=2.0,
        median_fraction=loaded.spec.certification.median_fraction_min,
    )
    ports = ports or build_ports(loaded, planned, run, root, ask=ask)
    return Roll(plan, run, ports, timing, data=planned.data, say=say)


def start_roll(roll: Roll, *, rollback: str | None = None) -> UpgradeData:
    return roll.rollback(rollback) if rollback else roll.run()


@dataclass(frozen=True)
class Wiring:
    """What a layer's adapter is built from (Layer.adapter): the spec rolled to, the
    certified run's spec, the roll's run and the runs root."""

    new: LoadedSpec
    before: LoadedSpec
    run: RunDir
    root: Path


def host_image_port(wiring: Wiring) -> HostImage | None:
    """The host image client in the spec's terms: vLCM's com.vmware.esx.settings on a
    cluster managed by an image, esxcli software on one managed by baselines
    (provision/host_image_port.py)."""
    from provision.host_image_port import VlcmHostImage

    return VlcmHostImage(wiring.new.spec)


def configure_guest(wiring: Wiring) -> ConfigureGuest:
    return ConfigureGuest(wiring.new, wiring.before, wiring.run, wiring.root)


def adapters(wiring: Wiring) -> dict[str, Any]:
    """Each registered layer's port, by the name the layer gives it, from its adapter."""
    out: dict[str, Any] = {}
    for layer in layers():
        if layer.adapter and layer.port not in out:
            module, _, name = layer.adapter.partition(":")
            out[layer.port] = getattr(importlib.import_module(module), name)(wiring)
    return out


def build_ports(
    loaded: LoadedSpec,
    planned: Planned,
    run: RunDir,
    root: Path,
    *,
    ask: Callable[[str], bool] | None = None,
) -> Ports:
    made = adapters(Wiring(loaded, planned.before, run, root))
    return Ports(
        scheduler=scheduler_for(loaded.spec, run.path.name, ask),
        hypervisor=HostKeyGate(VSphereHypervisor(loaded.spec), loaded.spec, root),
        guest=made.pop("guest"),
        certifier=ValidateCertifier(loaded, planned.before, planned.certified, run, root),
        host_image=made.pop("host_image", None),
        layers=made,
    )


def _spec_for(versions: dict[str, str], *choices: LoadedSpec) -> LoadedSpec:
    for loaded in choices:
        if guest_versions(loaded.spec) == versions or not versions:
            return loaded
    raise PortError(f"no spec of this roll asks for guest versions {versions}")


def _child_run(run: RunDir, node: str, loaded: LoadedSpec) -> RunDir:
    """A run of its own per node and step under the roll's run (nodes/<node>/<stamp>), so
    the configure and validate records of nodes rolled side by side never meet."""
    return RunDir.create(run.path / "nodes", node, loaded.sha256, loaded.text, within=run.path.name)


class HostKeyGate:
    """The Hypervisor port, with power-on proven by the node's enrolled host key: after the
    VM is on (and answers, as VSphereHypervisor waits), SSH must answer with a key the rack's
    known_hosts holds (rackcert.core.host_key_check). A roll never enrols: a key missing or
    changed fails the power-on step, and the node stays drained with that line."""

    def __init__(self, inner: Hypervisor, spec: Spec, root: Path, *, timeout: float | None = None):
        self.inner, self.spec = inner, spec
        self.known_hosts = rack_file(spec, root)
        self.timeout = timeout or float(spec.network.management.boot_timeout_s)

    def power_on(self, vm: str) -> str:
        from rackcert.core.host_key_check import wait_enrolled

        self.inner.power_on(vm)
        node = next((v for v in self.spec.vms if v.name == vm), None)
        if node is None:
            raise PortError(f"{vm}: not a VM of the spec")
        return wait_enrolled(
            self.known_hosts, vm, node.address, node.ssh_port, timeout=self.timeout
        )

    def power_state(self, vm: str) -> str:
        return self.inner.power_state(vm)

    def shutdown_guest(self, vm: str) -> None:
        self.inner.shutdown_guest(vm)

    def power_off(self, vm: str) -> None:
        self.inner.power_off(vm)

    def enter_maintenance(self, host: str, run: str) -> None:
        self.inner.enter_maintenance(host, run)

    def exit_maintenance(self, host: str) -> None:
        self.inner.exit_maintenance(host)

    def marked_hosts(self) -> list[str]:
        return self.inner.marked_hosts()

    def boot_time(self, host: str) -> str:
        return self.inner.boot_time(host)

    def reboot(self, host: str) -> None:
        self.inner.reboot(host)


class ConfigureGuest:
    """The guest layer: the roles of the matching spec, limited to one node and to the roles
    of the components that change (their tags, from the guest layer's declaration: a
    driver-only roll does not rerun the NFS, SSH-trust and Slurm roles on each node). Going
    back (a rollback), the same roles, the node pinned to the versions its forward configure
    run recorded before it changed anything (`configure(versions_from=...)`,
    rackcert/configure/rollback.py)."""

    def __init__(
        self,
        new: LoadedSpec,
        before: LoadedSpec,
        run: RunDir,
        root: Path,
        *,
        tags: tuple[str, ...] | None = None,
    ):
        self.new, self.before, self.run, self.root = new, before, run, root
        # Only these roles: by default those of the components that change (the guest
        # layer's declaration); empty: site.yml whole (a component no role is declared for).
        self.tags = tags if tags is not None else guest_tags(diff(before.spec, new.spec)) or ()

    def apply(self, node: str, versions: dict[str, str]) -> None:
        from rackcert.configure import run as configure

        loaded = _spec_for(versions, self.new, self.before)
        # The rack's known_hosts under the runs root, never enrolling (a roll trusts only
        # enrolled keys); the node's run is nested in the roll's.
        options: dict[str, Any] = {"limit": node, "runs_root": self.root, "enrol": False}
        if self.tags:
            options["tags"] = list(self.tags)
        forward = self._forward_run(node) if loaded is self.before else None
        if forward is not None:
            options["versions_from"] = forward
        configure(loaded, _child_run(self.run, node, loaded), **options)

    def _forward_run(self, node: str) -> Path | None:
        """The node's first configure run of this roll with the new spec (on disk, so a
        rollback after a restart finds it)."""
        for path in sorted((self.run.path / "nodes" / node).glob("*/configure.json")):
            if RunDir.open(path.parent).meta.get("spec_sha256") == self.new.sha256:
                return path.parent
        return None


class ValidateCertifier:
    """The node's own validate, then localisation's per-node stage on it alone.

    `certify` runs both on the node while it is out of service (drained, no job), so its
    figures are the node's own: the roll calls it for the node's before (the certified
    spec, before its host goes down) and for its after. `baseline` reads the start run: its
    validate.json, and its bench.json `localise.nodes` rows where that run localised
    (measured on an idle rack), which give the rack's median per figure.
    """

    def __init__(
        self,
        new: LoadedSpec,
        before: LoadedSpec,
        certified: RunDir,
        run: RunDir,
        root: Path,
        *,
        node_stage: bool = True,
        remote_python: str | None = None,
    ):
        self.new, self.before, self.certified, self.run, self.root = (
            new,
            before,
            certified,
            run,
            root,
        )
        self.node_stage = node_stage
        self.remote_python = remote_python  # default: the spec's guest.dl_venv/bin/python

    def baseline(self, nodes: list[str]) -> dict[str, Certificate]:
        record = self.certified.read_record("validate")
        found = certificates(record.data, nodes) if isinstance(record, ValidateRecord) else {}
        out = {n: found.get(n, Certificate()) for n in nodes}
        bench = self.certified.read_record("bench")
        localise = bench.data.localise if isinstance(bench, BenchRecord) else None
        for row in localise.nodes if localise is not None else []:
            if row.node in out:
                out[row.node].figures.update(node_figures(row))
        return out

    def certify(self, node: str, versions: dict[str, str]) -> Certificate:
        from validation.stage import run as validate

        loaded = _spec_for(versions, self.new, self.before)
        child = _child_run(self.run, node, loaded)
        record = validate(loaded, child, runs_root=self.root, nodes=[node], enrol=False)
        cert = certificates(record.data, [node]).get(node, Certificate())
        if self.node_stage:
            figures, reference = self._node_figures(loaded, node, child)
            cert.figures.update(figures)
            cert.reference.update(reference)
        return cert

    def _node_figures(
        self, loaded: LoadedSpec, node: str, child: RunDir
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Localisation's per-node stage (validation.bench.localisation.stages.node_stage) on
        this node alone: the same probe, rules and record rows `rackcert bench --localise`
        uses, its log under the node's run. The controller runs the same probe at the same
        barrier (validation.bench.localisation.reference): its figures come back as the
        node's reference only where the node's CPUs are the controller's machine's."""
        from validation.bench.localisation.reference import node_stage_referenced
        from validation.bench.localisation.stages import options_for
        from validation.bench.options import BenchOptions
        from validation.bench.targets import nodes_of, select_vms

        spec = loaded.spec
        bench = BenchOptions(
            vms=[node], known_hosts=rack_file(spec, self.root), remote_python=self.remote_python
        )
        opts = options_for(spec, bench, stages={"nodes"}, confirm=False)
        targets = nodes_of(spec, tuple(select_vms(spec, [node])), bench)
        log = child.artifacts("upgrade") / "node-stage.log"
        rows, reference = node_stage_referenced(targets, opts, log)
        if not rows:
            return {}, {}
        return node_figures(rows[0]), reference_figures(rows[0], reference)
