"""`rackcert upgrade`'s wiring: the upgrade stage's ports made of the real things.

A flow on the top floor (like pipeline and rehearse): the only place that joins the
upgrade stage (rackcert.upgrade) to provision (pyVmomi: power, maintenance with
rackcert's mark, reboots), configure (the roles, limited to one node), validation
(the node's own validate) and the host image (provision/host_image_port: vLCM, or esxcli
software where the cluster uses baselines). A roll with no host change skips the host
steps and records why.

    planned = plan_roll(loaded, Path("runs"), max_unavailable="1")
    roll = open_roll(planned, loaded, Path("runs"))
    data = start_roll(roll)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError, RecordError
from rackcert.core.known_hosts import rack_file
from rackcert.core.matrix import certified_dir, load_references
from rackcert.core.runs import RunDir, last_certified, read_capped, run_paths
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import LoadedSpec, parse_spec
from rackcert.core.stage_records import BenchRecord, UpgradeData, UpgradeRecord, ValidateRecord
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


def host_image_port(loaded: LoadedSpec) -> HostImage | None:
    """The host image client in the spec's terms: vLCM's com.vmware.esx.settings on a
    cluster managed by an image, esxcli software on one managed by baselines
    (provision/host_image_port.py)."""
    from provision.host_image_port import VlcmHostImage

    return VlcmHostImage(loaded.spec)


def build_ports(
    loaded: LoadedSpec,
    planned: Planned,
    run: RunDir,
    root: Path,
    *,
    ask: Callable[[str], bool] | None = None,
) -> Ports:
    return Ports(
        scheduler=scheduler_for(loaded.spec, run.path.name, ask),
        hypervisor=HostKeyGate(VSphereHypervisor(loaded.spec), loaded.spec, root),
        guest=ConfigureGuest(loaded, planned.before, run, root),
        certifier=ValidateCertifier(loaded, planned.before, planned.certified, run, root),
        host_image=host_image_port(loaded),
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
    """The guest layer: the roles of the matching spec, limited to one node. Going back
    (a rollback), the node is pinned to the versions its forward configure run recorded
    before it changed anything (`configure(versions_from=...)`, rackcert/configure/rollback.py)."""

    def __init__(
        self,
        new: LoadedSpec,
        before: LoadedSpec,
        run: RunDir,
        root: Path,
        *,
        tags: tuple[str, ...] = (),
    ):
        self.new, self.before, self.run, self.root = new, before, run, root
        self.tags = tags  # only these roles (default: site.yml whole)

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


class VSphereHypervisor:
    """VMs and hosts through pyVmomi; maintenance windows carry rackcert's mark
    (provision/maintenance_mark.py) so any re-run can tell them from an operator's."""

    def __init__(self, spec: Spec, *, boot_timeout: float | None = None, wait_guest: bool = True):
        self.spec = spec
        self._si: Any = None
        self._lock = threading.Lock()
        self.boot_timeout = boot_timeout or float(spec.network.management.boot_timeout_s)
        self.wait_guest = wait_guest
        # The spec names hosts its own way; vCenter knows them by address (hosts[].address).
        self._vc_name = {h.name: h.address for h in spec.hosts}
        self._spec_name = {h.address: h.name for h in spec.hosts}
        self._refs: dict[tuple[str, str], Any] = {}

    @property
    def si(self) -> Any:
        with self._lock:
            if self._si is None:
                from provision.session import open_session

                self._si = open_session(self.spec)
            return self._si

    def _find(self, kind: str, name: str) -> Any:
        """The VM or host of that name; every name is read in one PropertyCollector call
        the first time (walking a view's objects costs a round trip each, which grew with
        the rack: 34 calls a lookup on 16 hosts x 2 VMs) and kept, a moref being stable."""
        if kind == "host":
            name = self._vc_name.get(name, name)
        with self._lock:
            ref = self._refs.get((kind, name))
        if ref is None:
            self._index()
            with self._lock:
                ref = self._refs.get((kind, name))
        if ref is None:
            raise PortError(f"{name}: no such {'VM' if kind == 'vm' else 'host'} in vCenter")
        return ref

    def _index(self) -> None:
        from pyVmomi import vim

        from provision.viewspec import view_filter_spec

        content = self.si.content
        kinds = {vim.VirtualMachine: "vm", vim.HostSystem: "host"}
        view = content.viewManager.CreateContainerView(content.rootFolder, list(kinds), True)
        try:
            spec = view_filter_spec(view, {t: ["name"] for t in kinds})
            found = {}
            for obj in content.propertyCollector.RetrieveContents([spec]):
                for prop in obj.propSet:
                    kind = "vm" if isinstance(obj.obj, vim.VirtualMachine) else "host"
                    found[(kind, str(prop.val))] = obj.obj
        finally:
            view.DestroyView()
        with self._lock:
            self._refs.update(found)

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from pyVmomi import vmodl

        try:
            return fn()
        except vmodl.MethodFault as fault:
            text = getattr(fault, "msg", "") or type(fault).__name__
            raise PortError(f"{what}: {text}") from None

    def power_state(self, vm: str) -> str:
        return str(self._find("vm", vm).runtime.powerState)

    def shutdown_guest(self, vm: str) -> None:
        ref = self._find("vm", vm)
        self._call(f"{vm}: ShutdownGuest", ref.ShutdownGuest)

    def power_off(self, vm: str) -> None:
        from provision.vsphere_ops import wait_task

        ref = self._find("vm", vm)
        wait_task(self._call(f"{vm}: PowerOff", ref.PowerOffVM_Task), f"{vm}: power off")

    def power_on(self, vm: str) -> None:
        """Power the VM on, then wait for it the way provision waits for a new clone
        (provision.lifecycle.wait_up: Tools reporting the node's address, or SSH there, as
        network.management.wait_for says, within boot_timeout_s)."""
        from provision.lifecycle import wait_up
        from provision.vsphere_ops import power_on_vm
        from rackcert.core.stage_records import ActionRecord

        ref = self._find("vm", vm)
        if str(ref.runtime.powerState) != "poweredOn":
            self._call(f"{vm}: PowerOn", lambda: power_on_vm(ref, vm))
        node = next((v for v in self.spec.vms if v.name == vm), None)
        if node is None or not self.wait_guest:
            return
        mode = self.spec.network.management.wait_for
        action = ActionRecord(
            kind="vm.wait",
            target=vm,
            change=f"wait up to {self.boot_timeout:.0f} s for the guest ({mode})",
            reason="the roll configures and validates the node once it has booted",
            params={
                "address": node.address,
                "port": node.ssh_port,
                "timeout_s": self.boot_timeout,
                "wait_for": mode,
            },
        )
        state = self._call(
            f"{vm}: wait for the guest",
            lambda: wait_up(self.si, action, ref._moId, lambda *_: None),
        )
        if not state.get("answered"):
            what = {"ssh": "no SSH", "tools": "no Tools report", "any": "no Tools or SSH"}[mode]
            raise PortError(
                f"{vm}: powered on, {what} at {node.address} after {self.boot_timeout:.0f} s"
                f" (power {state.get('power_state', '?')})"
            )

    def enter_maintenance(self, host: str, run: str) -> None:
        from provision import maintenance_mark
        from provision.vsphere_ops import wait_task

        ref = self._find("host", host)
        if ref.runtime.inMaintenanceMode:
            return
        key = maintenance_mark.field_key(self.si, create=True)
        assert key is not None
        maintenance_mark.mark(self.si, ref, key, f"rackcert upgrade {run}")
        task = self._call(
            f"{host}: EnterMaintenanceMode", lambda: ref.EnterMaintenanceMode_Task(timeout=0)
        )
        wait_task(task, f"{host}: enter maintenance mode")

    def exit_maintenance(self, host: str) -> None:
        from provision import maintenance_mark
        from provision.vsphere_ops import wait_task

        ref = self._find("host", host)
        if ref.runtime.inMaintenanceMode:
            task = self._call(
                f"{host}: ExitMaintenanceMode", lambda: ref.ExitMaintenanceMode_Task(timeout=0)
            )
            wait_task(task, f"{host}: exit maintenance mode")
        key = maintenance_mark.field_key(self.si, create=False)
        if key is not None:
            maintenance_mark.clear(self.si, ref, key)

    def marked_hosts(self) -> list[str]:
        from provision import maintenance_mark

        key = maintenance_mark.field_key(self.si, create=False)
        if key is None:
            return []
        marked = maintenance_mark.marked_hosts(self.si, key)
        return sorted(self._spec_name.get(name, name) for _, name, _, _ in marked)

    def boot_time(self, host: str) -> str:
        ref = self._find("host", host)
        if str(ref.runtime.connectionState) != "connected" or ref.runtime.bootTime is None:
            raise PortError(f"{host}: not connected")
        return str(ref.runtime.bootTime.isoformat())

    def reboot(self, host: str) -> None:
        from provision.vsphere_ops import wait_task

        ref = self._find("host", host)
        task = self._call(f"{host}: RebootHost", lambda: ref.RebootHost_Task(force=False))
        wait_task(task, f"{host}: reboot")
