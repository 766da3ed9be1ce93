"""Rehearse provision on a twin of the real vCenter before touching a host.

`rehearse(loaded, run)`:
  1. captures the vCenter the spec names (read-only, provision/capture.py);
  2. starts the rack twin from the capture on loopback, with its own random password
     and certificate (rackcert/lab/replay.py; the real password never reaches it);
  3. plans and applies against the twin: maintenance mode, ATS, passthrough, reboots
     and their waits, clones, power-on with ESXi's device checks; the wait for a guest
     is skipped with a note (no guest boots in a twin);
  4. reads the twin back and plans again: a rack that converged plans nothing.
It records rehearsal.json (actions, what was done, what the twin refused with
vCenter's/ESXi's message, the second plan, the times and the capture's digests) and
keeps the capture in the run (artifacts/rehearsal/capture.json).

The real vCenter is only read: one capture retrieval (plus QueryConfigTarget for hosts
whose VMs hold fixed passthrough devices). `provision --rehearsed RUN` later compares
the live inventory's digest with the one rehearsed (`check_rehearsed`).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rackcert.core.capture.model import Capture
from rackcert.core.errors import InputError, RackcertError
from rackcert.core.runs import RunDir, atomic_write_bytes, utc_now
from rackcert.core.secrets import REDACTOR
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import LoadedSpec
from rackcert.core.stage_records import RehearsalData, RehearsalRecord

Say = Callable[[str], None]
WAIT_NOTE = "{n} wait(s) for a guest skipped: no guest boots in a twin ({vms})"


def _quiet(_line: str) -> None:
    pass


def wanted_guestinfo(spec: Spec) -> dict[str, dict[str, str]]:
    """The guestinfo values rackcert writes for each spec VM (to restore withheld ones)."""
    from provision.guestinfo import guestinfo, read_authorized_keys

    keys = read_authorized_keys(spec)
    return {vm.name: guestinfo(spec, vm, keys) for vm in spec.vms}


def twin_spec(spec: Spec, port: int, password_file: Path, ca_file: Path) -> Spec:
    """The spec, its vcenter block pointed at the twin on loopback (same user, datacenter)."""
    vc = spec.vcenter.model_copy(
        update={
            "host": "127.0.0.1",
            "port": port,
            "protocol": "https",
            "password_env": None,
            "password_file": str(password_file),
            "tls": spec.vcenter.tls.model_copy(
                update={"verify": True, "ca_file": str(ca_file), "thumbprint": None}
            ),
        }
    )
    return spec.model_copy(update={"vcenter": vc})


@contextlib.contextmanager
def twin_of(capture: Capture, spec: Spec, workdir: Path) -> Iterator[tuple[Any, Spec]]:
    """A running twin of `capture` and the spec pointed at it; stopped on exit.

    Withheld guestinfo values the spec would write are served as the spec writes them
    (their digest matches); other withheld values as `<withheld sha256:...>`.
    """
    from rackcert.lab import replay, twin

    capture = capture.model_copy(deep=True)
    # guestinfo the spec would write, put back where the withheld value's digest matches
    replay.restore_withheld(capture, wanted_guestinfo(spec))
    files = twin.TwinFiles.in_dir(workdir)
    desc = replay.description_from_capture(capture, files, user=spec.vcenter.user)
    started = twin.start(desc, files)
    try:
        yield started, twin_spec(spec, started.port, files.password_file, files.cert_file)
    finally:
        started.stop()


def rehearse(
    loaded: LoadedSpec,
    run: RunDir,
    *,
    power_cycle: bool = False,
    capture: Capture | None = None,
    say: Say = _quiet,
) -> RehearsalRecord:
    """Capture, replay, provision the twin, read it back; record rehearsal.json.

    `capture` rehearses on a capture taken earlier instead of reading vCenter now.
    Raises a RackcertError (after recording) only when the rehearsal itself could not run
    (vCenter unreachable, the twin would not start); what the twin refused is data.
    """
    from provision.capture import capture as take_capture
    from provision.session import connect
    from rackcert.core.capture.digest import inventory_digest
    from rackcert.core.stage_records import CaptureInfo
    from rackcert.lab.replay import restore_withheld, static_lines

    started_at, t0 = utc_now(), time.perf_counter()
    data = RehearsalData()

    def write(status: str = "ok", error: str | None = None) -> None:
        run.write_stage("rehearsal", data, status=status, error=error, started_at=started_at)

    try:
        if capture is None:
            say(f"capturing {loaded.spec.vcenter.host} (read-only)")
            with connect(loaded.spec) as si:
                capture, _inventory = take_capture(si)
        data.seconds["capture"] = round(time.perf_counter() - t0, 3)
        text = REDACTOR.scrub(capture.to_json())  # it holds none; a second fence
        path = run.artifacts("rehearsal") / "capture.json"
        atomic_write_bytes(path, text.encode())
        data.capture = CaptureInfo(
            taken_at=capture.taken_at,
            file=str(path.relative_to(run.path)),
            sha256="sha256:" + hashlib.sha256(text.encode()).hexdigest(),
            inventory_digest=capture.inventory_digest,
            hosts=len(capture.hosts),
            vms=len([v for v in capture.vms if not v.template]),
            round_trips=capture.round_trips,
            seconds=capture.seconds,
        )
        shown = capture.model_copy(deep=True)
        restore_withheld(shown, wanted_guestinfo(loaded.spec))
        data.static = static_lines(shown)
        workdir = Path(tempfile.mkdtemp(prefix="rackcert-rehearsal-"))
        try:
            t1 = time.perf_counter()
            with twin_of(capture, loaded.spec, workdir) as (twin, spec):
                data.seconds["twin_start"] = round(time.perf_counter() - t1, 3)
                say(f"twin of the capture up on {twin.url}: {len(capture.hosts)} host(s)")
                _provision_twin(loaded, spec, data, power_cycle, say, inventory_digest)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    except RackcertError as exc:
        data.seconds["total"] = round(time.perf_counter() - t0, 3)
        write("failed", str(exc))
        raise
    data.seconds["total"] = round(time.perf_counter() - t0, 3)
    write()
    record = run.read_record("rehearsal")
    assert isinstance(record, RehearsalRecord)
    return record


def _provision_twin(
    loaded: LoadedSpec,
    spec: Spec,
    data: RehearsalData,
    power_cycle: bool,
    say: Say,
    digest: Callable[[Any], str],
) -> None:
    """Plan, apply and plan again against the twin; refusals become data."""
    from provision.discovery import discover
    from provision.session import connect
    from provision.stage import vm_states
    from rackcert.core.stage_records import Refusal

    twin_loaded = LoadedSpec(spec=spec, path=loaded.path, text=loaded.text, sha256=loaded.sha256)
    with connect(spec) as si:
        t = time.perf_counter()
        before = discover(si)
        data.twin_digest = digest(before)
        try:
            actions = _plan(twin_loaded, before)
        except RackcertError as exc:
            data.refusals.append(
                Refusal(target="plan", action="plan", by="rackcert", message=str(exc))
            )
            data.seconds["plan"] = round(time.perf_counter() - t, 3)
            return
        data.seconds["plan"] = round(time.perf_counter() - t, 3)
        waits = [a for a in actions if a.kind == "vm.wait"]
        actions = [a for a in actions if a.kind != "vm.wait"]
        if waits:
            data.notes.append(
                WAIT_NOTE.format(n=len(waits), vms=", ".join(a.target for a in waits))
            )
        data.actions = list(actions)
        say(f"plan on the twin: {len(actions)} action(s)")
        t = time.perf_counter()
        result = _apply_all(si, actions, power_cycle, data)
        data.seconds["apply"] = round(time.perf_counter() - t, 3)
        data.done, data.skipped = result.done, result.skipped
        for s in data.skipped:
            data.refusals.append(
                Refusal(target=s.target, action=s.kind, by="rackcert", message=s.skipped)
            )
        t = time.perf_counter()
        after = discover(si)
        for name, state in vm_states(spec, after, result.vms).items():
            if state.get("left_off"):
                data.refusals.append(
                    Refusal(
                        target=name,
                        action="vm.power_on",
                        by="rackcert",
                        message=f"left powered off: {state['left_off']}",
                    )
                )
        try:
            second = [a for a in _plan(twin_loaded, after) if a.kind != "vm.wait"]
        except RackcertError as exc:
            data.refusals.append(
                Refusal(target="plan", action="second plan", by="rackcert", message=str(exc))
            )
            second = []
        data.second_plan = list(second)
        data.seconds["readback"] = round(time.perf_counter() - t, 3)


def _apply_all(si: Any, actions: list[Any], power_cycle: bool, data: RehearsalData) -> Any:
    """Apply like provision; where vCenter refuses, record it and go on with the rest.

    Provision stops at the first refusal; a rehearsal shows them all. After a refusal,
    the actions that depend on the refused one are left out (a refused host action: the
    rest of that host and its VMs; a refused VM action: the rest of that VM) and noted.
    """
    from provision.apply import ApplyError, Timeouts, apply
    from provision.discovery import discover
    from rackcert.core.stage_records import ProvisionData, Refusal

    total = ProvisionData()
    remaining = [a.model_copy(deep=True) for a in actions]  # params may learn a moid below
    left_out: list[str] = []
    while remaining:
        part = ProvisionData()
        try:
            apply(
                si,
                remaining,
                data=part,
                power_cycle=power_cycle,
                timeouts=Timeouts(reboot=120, maintenance=60),
            )
            _add(total, part)
            break
        except ApplyError as exc:
            _add(total, part)
            failed = _failed_action(remaining, part)
            data.refusals.append(
                Refusal(
                    target=failed.target if failed else "provision",
                    action=failed.kind if failed else "apply",
                    by="vcenter",
                    message=str(exc),
                )
            )
            if failed is None:
                break
            finished = {(d.kind, d.target) for d in [*part.done, *part.skipped]}
            blocked = {failed.target}
            if failed.kind.startswith("host."):
                blocked.add(failed.host)
            rest = [a for a in remaining if (a.kind, a.target) not in finished and a is not failed]
            dropped = [a for a in rest if a.target in blocked or a.host in blocked]
            left_out += [f"{a.target}: {a.kind}" for a in dropped]
            remaining = [a for a in rest if a not in dropped]
            # VMs cloned before the refusal: their later steps find them by name
            made = {vm.name: vm.moid for vm in discover(si).vms}
            for a in remaining:
                if a.kind != "vm.clone" and not a.params.get("vm_moid") and a.target in made:
                    a.params["vm_moid"] = made[a.target]
    if left_out:
        data.notes.append(
            f"{len(left_out)} action(s) not tried after a refusal they depend on: "
            + ", ".join(left_out)
        )
    return total


def _add(total: Any, part: Any) -> None:
    total.done += part.done
    total.skipped += part.skipped
    total.vms.update(part.vms)


def _failed_action(actions: list[Any], part: Any) -> Any:
    """The first action neither done nor skipped: the one vCenter refused."""
    finished = {(d.kind, d.target) for d in [*part.done, *part.skipped]}
    return next((a for a in actions if (a.kind, a.target) not in finished), None)


def _plan(loaded: LoadedSpec, inventory: Any) -> list[Any]:
    from provision.stage import _plan as stage_plan

    return stage_plan(loaded, inventory)


def check_rehearsed(run_path: Path, loaded: LoadedSpec) -> Callable[[Any], None]:
    """A guard for provision: refuse an inventory other than the one rehearsed in `run_path`.

    Reads the rehearsal first, so a wrong RUN fails before vCenter is touched; the guard
    it returns compares the digest of what provision discovered with the capture's.
    """
    from rackcert.core.capture.digest import inventory_digest

    rehearsed = RunDir.open(run_path, spec_sha256=loaded.sha256)
    record = rehearsed.read_record("rehearsal")
    if not isinstance(record, RehearsalRecord) or record.data.capture is None:
        raise InputError(f"--rehearsed {run_path}: no rehearsal with a capture recorded there")
    info = record.data.capture

    def guard(inventory: Any) -> None:
        now = inventory_digest(inventory)
        if now != info.inventory_digest:
            raise InputError(
                f"provision refused: vCenter is not the inventory rehearsed in {run_path}"
                f" (captured {info.taken_at}; digest of what provision reads {now[:19]}..., was"
                f" {info.inventory_digest[:19]}...): rehearse again"
            )

    return guard
