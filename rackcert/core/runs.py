"""Run records: one directory per run, one JSON file per stage, written atomically.

`runs/<rack>/<UTC timestamp>/<stage>.json`. A stage file is written to a
temporary name in the same directory, fsynced, then renamed, so a crash leaves
either the old file or the new one and never half of one. Every file carries
the schema version and the spec's sha256 so the report can tell what it reads.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from rackcert.core.errors import InputError, RecordError
from rackcert.core.secrets import REDACTOR

if TYPE_CHECKING:
    from rackcert.core.stage_records import StageRecord

SCHEMA_VERSION = 1
STAGES = ("plan", "provision", "configure", "validate", "bench", "report")
DEFAULT_ROOT = Path("runs")


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old or the new file, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_json(path: Path, obj: Any, *, indent: int | None = 2) -> str:
    """Scrub secrets, serialise, write atomically; returns the text written. An OSError
    becomes one RecordError line.

    `indent=None` writes compact JSON through the C encoder (json's indented output is
    pure Python): for machine-read documents that grow with the rack, such as facts.json.
    """
    payload = REDACTOR.scrub(json.dumps(obj, indent=indent, default=str) + "\n")
    try:
        atomic_write_bytes(path, payload.encode())
    except OSError as exc:
        raise RecordError(
            f"cannot write run record {path}: {exc.strerror or exc}; records written before are"
            " intact"
        ) from None
    return payload


MAX_RECORD_BYTES = 64 * 1024 * 1024  # far above any stage record; a bigger file is not one


def read_capped(path: Path, limit: int = MAX_RECORD_BYTES) -> str:
    """A record file's text, only from a regular file of at most `limit` bytes.

    A run directory is not trusted: a FIFO planted as meta.json would hang the
    reader, a device or a huge file would fill memory.
    """
    try:
        return read_capped_bytes(path, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(f"{path}: unreadable record: not UTF-8") from None


def read_capped_bytes(path: Path, limit: int = MAX_RECORD_BYTES) -> bytes:
    """A run file's bytes, only from a regular file of at most `limit` bytes (`read_capped`).

    A symlink is not followed (O_NOFOLLOW): a planted link would make rackcert read, and
    publish the digest of, a file outside the run.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise RecordError(f"{path}: no such record") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError(f"{path}: unreadable record: a symbolic link") from None
        raise RecordError(f"{path}: unreadable record: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RecordError(f"{path}: unreadable record: not a regular file")
        if info.st_size > limit:
            raise RecordError(f"{path}: unreadable record: larger than {limit} bytes")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise RecordError(f"{path}: unreadable record: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise RecordError(f"{path}: unreadable record: larger than {limit} bytes")
    return data


MAX_RECORD_DEPTH = 64  # rackcert's records nest a dozen levels; a deeper one is not one


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level <= MAX_RECORD_DEPTH:
                stack.extend(
                    (v, level + 1) for v in (item.values() if isinstance(item, dict) else item)
                )
    return deepest


def read_json(path: Path) -> Any:
    """A record's JSON, refused in one line when it is too big, not JSON, or nested too deep.

    A run directory may come from elsewhere: a 700-level record made every reader that
    walks it recursively (pydantic, the redactor, the report) die with RecursionError.
    """
    text = read_capped(path)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"{path}: unreadable record: {exc}") from None
    if _depth(value) > MAX_RECORD_DEPTH:
        raise RecordError(
            f"{path}: unreadable record: nested deeper than {MAX_RECORD_DEPTH} levels"
        )
    return value


@dataclass(frozen=True)
class RunDir:
    """One run of one rack: the directory and what is recorded in it.

    `spec_sha256` is the digest of the spec the producer that opened the run loaded; every
    stage record it writes carries it. `open(path, spec_sha256=...)` refuses a run made from
    another version of the spec.
    """

    path: Path
    spec_sha256: str | None = None

    @classmethod
    def create(
        cls, root: Path, rack: str, spec_sha256: str, spec_text: str, *, within: str = ""
    ) -> RunDir:
        """A new run under `<root>/<rack>/`; `within` names the run it is nested in (a roll's
        per-node runs), so nothing takes its parent directory for a rack's (runs_root_of)."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        # Absolute, so tools that change directory (ansible-runner, torchrun) find the run.
        path = Path(root).resolve() / rack / stamp
        try:
            path.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise RecordError(f"cannot create run directory {path}: {exc.strerror}") from None
        run = cls(path, spec_sha256)
        atomic_write_bytes_checked(path / "spec.yaml", spec_text.encode())
        run._write(
            "meta.json",
            {
                "schema_version": SCHEMA_VERSION,
                "rack": rack,
                "spec_sha256": spec_sha256,
                "created_at": utc_now(),
                **({"within": within} if within else {}),
            },
        )
        return run

    @classmethod
    def open(cls, path: Path | str, *, spec_sha256: str | None = None) -> RunDir:
        """An existing run; with `spec_sha256`, only one made from that version of the spec."""
        path = Path(path).resolve()
        if not (path / "meta.json").is_file():
            raise RecordError(f"{path}: not a rackcert run directory (no meta.json)")
        refuse_links_out(path)
        run = cls(path, spec_sha256)
        if spec_sha256 is not None and run.meta.get("spec_sha256") != spec_sha256:
            raise InputError(
                f"{path}: that run was made from another version of the spec (sha256 differs);"
                " start a new run instead"
            )
        return run

    @property
    def meta(self) -> dict[str, Any]:
        return read_json(self.path / "meta.json")

    def _write(self, name: str, obj: Any) -> Path:
        target = self.path / name
        atomic_write_json(target, obj)
        return target

    def write_stage(
        self,
        stage: str,
        data: dict[str, Any] | BaseModel,
        *,
        status: str = "ok",
        error: str | None = None,
        started_at: str | None = None,
    ) -> StageRecord:
        """Record one stage's observations; status is ok, failed or partial; the typed record.

        The record goes through the stage's model (rackcert.core.stage_records): a shape the
        model does not name is refused with one line, before anything is written. The stage
        gets back the record it wrote, so nothing re-reads its own file.
        """
        from rackcert.core.stage_records import RECORDS

        meta = self.meta
        raw = {
            "schema_version": SCHEMA_VERSION,
            "stage": stage,
            "rack": meta["rack"],
            "spec_sha256": self.spec_sha256 or meta["spec_sha256"],
            "status": status,
            "error": error,
            "started_at": started_at or utc_now(),
            "finished_at": utc_now(),
            # a model (or a dict holding models) is taken as it is: typed once, never dumped
            # to be read back; the file is its one serialisation
            "data": data,
        }
        try:
            record = RECORDS[stage].model_validate(raw)
        except ValidationError as exc:
            raise RecordError(f"{stage}.json not written: {_first_error(exc)}") from None
        payload = atomic_write_json(self.path / f"{stage}.json", record.model_dump(mode="json"))
        # What the stage gets back is what the file holds: masked like every reader sees it.
        return RECORDS[stage].model_validate_json(payload)

    def read_stage(self, stage: str) -> dict[str, Any] | None:
        path = self.path / f"{stage}.json"
        return read_json(path) if path.is_file() else None

    def read_record(self, stage: str) -> StageRecord | None:
        """`<stage>.json` through its model; None when not recorded, RecordError when it does
        not fit (another version of rackcert, or a hand edit)."""
        from rackcert.core.stage_records import RECORDS

        raw = self.read_stage(stage)
        if raw is None:
            return None
        try:
            return RECORDS[stage].model_validate(raw)
        except ValidationError as exc:
            raise RecordError(
                f"{stage}.json does not fit its schema: {_first_error(exc)}"
            ) from None

    def stages(self) -> list[str]:
        """Stages recorded, in pipeline order."""
        return [s for s in STAGES if (self.path / f"{s}.json").is_file()]

    def artifacts(self, stage: str) -> Path:
        """A directory for a stage's raw artifacts (ansible events, JUnit XML, ...)."""
        path = self.path / "artifacts" / stage
        path.mkdir(parents=True, exist_ok=True)
        return path


def runs_root_of(run: RunDir) -> Path:
    """The runs root a rack's run lies under (`<root>/<rack>/<stamp>`), for a stage called
    with a run and no root. A run nested in another (meta `within`: a roll's per-node runs,
    `<roll>/nodes/<node>/<stamp>`) is refused in one line: its caller knows the root and
    passes it, or the rack's known_hosts would be looked for under the roll."""
    within = run.meta.get("within")
    if within:
        raise InputError(
            f"{run.path}: a run nested in run {within}; the stage needs the rack's runs root"
        )
    return run.path.parent.parent


MAX_WALKED = 200_000  # entries of a run tree looked at for links; a run holds far fewer


def refuse_links_out(run_path: Path) -> None:
    """Refuse a run directory holding a symbolic link to anything outside it.

    A run directory may come from elsewhere. Through a planted link, a stage given
    `--run DIR` overwrote the link's target (pytest.log, the inventory, extra vars, launch
    logs) and the manifest published the sha256 of the file behind it (a password file).
    Links that stay inside the run are left alone; the manifest records them as links.
    """
    root = run_path.resolve()
    for seen, (dirpath, dirnames, filenames) in enumerate(os.walk(root)):
        if seen > MAX_WALKED:
            raise RecordError(f"{run_path}: more than {MAX_WALKED} directories; not a run")
        for name in dirnames + filenames:
            entry = Path(dirpath) / name
            if entry.is_symlink() and not entry.resolve().is_relative_to(root):
                from rackcert.core.untrusted import visible

                rel = entry.relative_to(root).as_posix()
                raise RecordError(
                    f"{run_path}: {visible(rel)} is a symbolic link to"
                    f" {visible(os.readlink(entry))}, outside the run; refusing the run"
                    " (remove the link, or copy the file in)"
                )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "record"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"


def atomic_write_bytes_checked(path: Path, data: bytes) -> None:
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise RecordError(f"cannot write {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class RunSummary:
    rack: str
    path: Path
    created_at: str
    stages: list[str]
    statuses: dict[str, str]
    verdict: str | None
    problem: str | None = None  # why the run cannot be read; the other fields are then guesses


def _text(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def summarize(run_path: Path) -> RunSummary:
    """One run's summary; a run whose records are malformed is returned with `problem` set.

    A run directory is not trusted input: meta.json may be a list, a stage record
    a number. Such a run is shown as unreadable instead of hiding every other run.
    """
    run = RunDir(run_path)
    unreadable = RunSummary(run_path.parent.name, run_path, "", [], {}, None, "unreadable")
    try:
        meta = run.meta
        if not isinstance(meta, dict):
            raise RecordError(f"{run_path / 'meta.json'}: not a JSON object")
        statuses: dict[str, str] = {}
        records: dict[str, dict[str, Any]] = {}
        for stage in run.stages():
            record = run.read_stage(stage)
            if not isinstance(record, dict):
                raise RecordError(f"{run_path / (stage + '.json')}: not a JSON object")
            records[stage] = record
            statuses[stage] = _text(record.get("status"), "?")
    except RecordError as exc:
        return RunSummary(**{**unreadable.__dict__, "problem": f"unreadable: {exc}"})
    data = records.get("report", {}).get("data")
    verdict = data.get("verdict") if isinstance(data, dict) else None
    return RunSummary(
        rack=_text(meta.get("rack"), run_path.parent.name),
        path=run_path,
        created_at=_text(meta.get("created_at")),
        stages=list(statuses),
        statuses=statuses,
        verdict=verdict if isinstance(verdict, str) else None,
    )


def run_paths(root: Path = DEFAULT_ROOT, rack: str | None = None) -> list[Path]:
    """The run directories under `root` (of `rack` if given), oldest first, as `list_runs`
    lists them, without reading a record: for a caller that wants one kind of run (the
    newest certified one, the newest discovery) and must not parse the whole history each
    time (a rack's validate.json grows with its nodes, and validate runs after every
    upgrade)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [
        run_path
        for rack_dir in sorted(p for p in root.iterdir() if p.is_dir())
        if not rack or rack_dir.name == rack
        for run_path in sorted(p for p in rack_dir.iterdir() if (p / "meta.json").is_file())
    ]


def list_runs(
    root: Path = DEFAULT_ROOT, rack: str | None = None, *, include_unreadable: bool = False
) -> list[RunSummary]:
    """Runs under `root`, oldest first; unreadable runs only when `include_unreadable`."""
    out: list[RunSummary] = []
    for run_path in run_paths(root, rack):
        summary = summarize(run_path)
        if summary.problem is None or include_unreadable:
            out.append(summary)
    return out


def last_certified(root: Path, rack: str, *, before: Path | None = None) -> RunDir | None:
    """The newest run of `rack` whose report verdict is PASS (older than `before` if given):
    what `rackcert validate` compares an after-upgrade run with."""
    for path in reversed(run_paths(root, rack)):
        if before is not None and path.name >= Path(before).name:
            continue
        if not (path / "report.json").is_file():  # no verdict: read nothing of it
            continue
        summary = summarize(path)
        if summary.problem is None and summary.verdict == "PASS":
            return RunDir.open(path)
    return None
