"""`rackcert serve`: a small local history page of runs, verdicts and their reports.

The web front end the seeds' users had in DIGITS/DKube, kept minimal: the
standard library's threading HTTP server, bound to 127.0.0.1 unless told
otherwise, read-only (GET/HEAD), serving only files inside run directories.
A run whose report was never built gets a live view rendered in memory from
its stage files; nothing is written to the run directory by browsing it.

Routes: `/` the list, `/api/runs` the same as JSON, `/metrics` the latest run of each
rack as Prometheus metrics (rackcert.metrics.latest), `/runs/<rack>/<run>/` a
run's files, `/runs/<rack>/<run>/<file>` a file, `/runs/<rack>/<run>/live`
the report rendered from the current records.

The runs directory is not trusted (anyone who can write it can plant a run):
- only requests whose Host is a loopback name (or the bound address) with the
  bound port are answered, so a DNS-rebinding page cannot read /api/runs;
- every page carries a Content-Security-Policy that allows no script, no
  fetch, no form and no frame; run files other than rackcert's own report are
  sent as text or as attachments, never as HTML, SVG or XML a browser runs;
- serve resolves no secrets: a planted spec cannot make it open a file (a FIFO
  hung it) nor teach it words to mask; records were scrubbed when written;
- a malformed run is listed as unreadable and the others still list;
- files are streamed, at most MAX_SERVED bytes of each.
"""

from __future__ import annotations

import html
import json
import os
import stat
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from rackcert.core.runs import RunDir, list_runs
from rackcert.core.secrets import Redactor
from rackcert.report.html import PAGE_CSP
from rackcert.report.manifest import MANIFEST_NAME

# What a run file is sent as. Anything a browser would run (HTML other than the
# report, SVG, XML with an XHTML namespace) is text/plain or an attachment.
_TEXT = {".yaml", ".yml", ".sha256", ".log", ".txt", ".xml", ".cfg", ".ini", ".out", ".err"}
_INLINE = {".json": "application/json", ".pdf": "application/pdf", ".png": "image/png"}
REPORT_NAME = "report.html"  # rackcert's own report: HTML, under the strict policy below
MAX_SERVED = 64 * 1024 * 1024  # a larger file is cut here, with a note saying so
MAX_LISTED = 5000  # files shown on a run's page
CSP = PAGE_CSP + "; frame-ancestors 'none'; sandbox"  # the report's own, and what no meta can
METRICS_TYPE = "text/plain; version=0.0.4"  # the text exposition format (charset added)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


MAX_HASHED = 1 << 30  # bytes serve hashes to check one run; `report verify` checks any size
_STATES: dict[Path, tuple[tuple[Any, ...], str]] = {}  # run -> (tree signature, state)
_STATES_LOCK = threading.Lock()


def _tree_signature(run_path: Path) -> tuple[tuple[Any, ...], int]:
    """What changes when any file of the run changes (names, sizes, times, inodes), and the
    bytes its regular files hold; from lstat alone, nothing is read or followed."""
    entries, total = [], 0
    for dirpath, dirnames, filenames in os.walk(run_path):
        dirnames.sort()
        for name in sorted(filenames + dirnames):
            info = os.lstat(os.path.join(dirpath, name))
            entries.append(
                (dirpath, name, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino)
            )
            if stat.S_ISREG(info.st_mode) and name != MANIFEST_NAME:  # read capped, not hashed
                total += info.st_size
    return tuple(entries), total


def manifest_state(run_path: Path) -> str:
    """intact, changed, none, or unchecked: whether the run still matches its MANIFEST.sha256.

    Cached per run on the tree's lstat signature: an index request hashed every run anew
    (a 20 GB artifact cost 21 s per page). A run holding more than MAX_HASHED bytes is
    "unchecked" here; `rackcert report verify` checks it.
    """
    from rackcert.core.errors import RecordError
    from rackcert.report.manifest import verify

    if not (run_path / MANIFEST_NAME).is_file():
        return "none"
    try:
        signature, total = _tree_signature(run_path)
    except (OSError, ValueError):
        return "changed"
    with _STATES_LOCK:
        cached = _STATES.get(run_path)
    if cached is not None and cached[0] == signature:
        return cached[1]
    if total > MAX_HASHED:
        state = "unchecked"
    else:
        try:
            state = "intact" if verify(run_path).ok else "changed"
        except (RecordError, OSError, ValueError):
            state = "changed"
    with _STATES_LOCK:
        _STATES[run_path] = (signature, state)
    return state


def runs_listing(root: Path) -> list[dict[str, Any]]:
    """Runs newest first, with verdict, stage statuses, report links and manifest state.

    A run whose records are malformed is listed with verdict "unreadable".
    """
    out = []
    for r in reversed(list_runs(root, include_unreadable=True)):
        rel = r.path.relative_to(root).as_posix()
        base = "/runs/" + quote(rel) + "/"
        files = {
            name: base + name
            for name in ("report.html", "report.pdf", "run.json")
            if (r.path / name).is_file()
        }
        out.append(
            {
                "rack": r.rack,
                "run": r.path.name,
                "created_at": r.created_at,
                "verdict": "unreadable" if r.problem else r.verdict,
                "problem": r.problem,
                "stages": r.statuses,
                "manifest": manifest_state(r.path),
                "report": files.get("report.html") or base + "live",
                "report_built": "report.html" in files,
                "links": files,
                "files": base,
            }
        )
    return out


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rackcert runs</title>
<style>
body {{ font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px auto; max-width: 1100px;
  font-size: 14px; color: #1d1d1f; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ text-align: left; padding: 6px 8px; border-bottom: 1px solid #e3e7eb; }}
thead th {{ background: #f3f5f7; }}
.v {{ font-weight: bold; padding: 2px 10px; border-radius: 10px; color: #fff;
  background: #8a8f98; }}
.v-PASS {{ background: #2e7d32; }} .v-FAIL {{ background: #b3261e; }}
.v-INCOMPLETE {{ background: #c77700; }}
.m-changed {{ color: #b3261e; font-weight: bold; }} .m-unchecked {{ color: #c77700; }}
.muted {{ color: #667; font-size: 12px; }}
code {{ font-family: "DejaVu Sans Mono", monospace; }}
</style></head><body>
<h1>rackcert runs</h1>
<p class="muted">{count} run(s) under <code>{root}</code>, newest first. Reports are built from
recorded evidence; the manifest column says whether a run directory still matches its
MANIFEST.sha256.</p>
<table id="runs"><thead><tr><th>rack</th><th>run</th><th>verdict</th><th>stages</th>
<th>manifest</th><th>report</th></tr></thead><tbody>
{rows}
</tbody></table></body></html>
"""


def _row(item: dict[str, Any]) -> str:
    e = html.escape
    verdict = item["verdict"] or "no report"
    stages = " ".join(f"{e(s)}:{e(st)}" for s, st in item["stages"].items()) or "-"
    links = [
        f'<a class="report" href="{e(item["report"])}">'
        f"{'report' if item['report_built'] else 'live view'}</a>"
    ]
    for name in ("report.pdf", "run.json"):
        if name in item["links"]:
            links.append(f'<a href="{e(item["links"][name])}">{e(name.split(".")[-1])}</a>')
    links.append(f'<a href="{e(item["files"])}">files</a>')
    return (
        f'<tr class="run" data-verdict="{e(verdict)}"><td>{e(item["rack"])}</td>'
        f'<td><code>{e(item["run"])}</code><div class="muted">{e(item["created_at"])}</div></td>'
        f'<td><span class="v v-{e(verdict)}">{e(verdict)}</span></td>'
        f'<td class="muted">{stages}</td>'
        f'<td class="m-{e(item["manifest"])}">{e(item["manifest"])}</td>'
        f"<td>{' · '.join(links)}</td></tr>"
    )


def index_page(root: Path) -> str:
    items = runs_listing(root)
    rows = "\n".join(_row(i) for i in items) or '<tr><td colspan="6">no runs yet</td></tr>'
    return _PAGE.format(count=len(items), root=html.escape(str(root)), rows=rows)


def _listed_files(run_path: Path) -> tuple[list[str], bool]:
    """Regular files of a run, sorted, and whether the walk stopped early.

    Every entry seen counts against MAX_LISTED, directories too: a run padded with empty
    folders costs one bounded walk, not a full one. Links are not followed (RunDir refuses
    links leaving the run; a listing must not walk them either)."""
    names: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(run_path, followlinks=False):
        dirs.sort()
        seen += len(dirs) + len(files)
        base = Path(folder).relative_to(run_path)
        names.extend((base / f).as_posix() for f in files if (Path(folder) / f).is_file())
        if seen >= MAX_LISTED:
            return sorted(names)[:MAX_LISTED], True
    return sorted(names), False


def _files_page(run_path: Path, prefix: str) -> str:
    e = html.escape
    names, cut = _listed_files(run_path)
    items = "".join(f'<li><a href="{e(prefix + quote(n))}">{e(n)}</a></li>' for n in names)
    if cut:
        items += f"<li>(listing cut at {MAX_LISTED} entries)</li>"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(run_path.name)}'
        f"</title></head><body><h1>{e(run_path.parent.name)} / {e(run_path.name)}</h1>"
        f'<p><a href="/">all runs</a> · <a href="{e(prefix)}live">live view</a></p>'
        f"<ul>{items}</ul></body></html>"
    )


class Handler(BaseHTTPRequestHandler):
    """Read-only handler over one runs root (set on the server as `runs_root`)."""

    server_version = "rackcert"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: the CLI prints the URL; access logs would only add noise

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self.do_GET(head=True)

    def _host_allowed(self) -> bool:
        """Only a loopback name (or the address bound) with the bound port: no DNS rebinding."""
        allowed: tuple[str, ...] = self.server.allowed_hosts  # type: ignore[attr-defined]
        return (self.headers.get("Host") or "").strip().lower() in allowed

    def do_GET(self, head: bool = False) -> None:  # noqa: N802 - stdlib naming
        root: Path = self.server.runs_root  # type: ignore[attr-defined]
        if not self._host_allowed():
            return self._send(
                HTTPStatus.MISDIRECTED_REQUEST, b"unknown Host header", "text/plain", head
            )
        path = unquote(urlsplit(self.path).path)
        if "\x00" in path:  # no file name holds NUL; the OS would refuse it (ValueError)
            return self._send(HTTPStatus.BAD_REQUEST, b"bad request", "text/plain", head)
        try:
            if path in ("/", "/index.html"):
                return self._send(HTTPStatus.OK, index_page(root).encode(), "text/html", head)
            if path == "/api/runs":
                body = json.dumps(runs_listing(root), indent=2).encode()
                return self._send(HTTPStatus.OK, body, "application/json", head)
            if path.startswith("/runs/"):
                return self._run_path(root, path[len("/runs/") :], head)
            if path == "/metrics":  # Prometheus' scrape: the latest run of each spec
                from rackcert.metrics.latest import runs_exposition

                body = runs_exposition(root)
                return self._send(HTTPStatus.OK, body, METRICS_TYPE, head)
        except OSError:
            return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, b"cannot read", "text/plain", head)
        except ValueError:  # a path the OS cannot name (NUL, surrogates): the request was bad
            return self._send(HTTPStatus.BAD_REQUEST, b"bad request", "text/plain", head)
        return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain", head)

    def _run_path(self, root: Path, rest: str, head: bool) -> None:
        parts = [p for p in rest.split("/") if p]
        if len(parts) < 2 or any(p in (".", "..") for p in parts):
            return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain", head)
        run_path = (root / parts[0] / parts[1]).resolve()
        if not run_path.is_relative_to(root.resolve()) or not (run_path / "meta.json").is_file():
            return self._send(HTTPStatus.NOT_FOUND, b"no such run", "text/plain", head)
        prefix = f"/runs/{quote(parts[0])}/{quote(parts[1])}/"
        if len(parts) == 2:
            return self._send(
                HTTPStatus.OK, _files_page(run_path, prefix).encode(), "text/html", head
            )
        if parts[2:] == ["live"]:
            return self._live(run_path, head)
        target = run_path.joinpath(*parts[2:]).resolve()
        if not target.is_relative_to(run_path) or not target.is_file():
            return self._send(HTTPStatus.NOT_FOUND, b"no such file", "text/plain", head)
        return self._file(target, target == run_path / REPORT_NAME, head)

    def _file(self, target: Path, is_report: bool, head: bool) -> None:
        """Stream one run file, at most MAX_SERVED bytes, as a type no browser runs."""
        suffix = target.suffix.lower()
        attachment = False
        if is_report:
            ctype = "text/html"
        elif suffix in _TEXT:
            ctype = "text/plain"
        elif suffix in _INLINE:
            ctype = _INLINE[suffix]
        else:  # .html, .svg, .js, unknown: the browser gets bytes to save, not a page
            ctype, attachment = "application/octet-stream", True
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return self._send(HTTPStatus.NOT_FOUND, b"no such file", "text/plain", head)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return self._send(HTTPStatus.NOT_FOUND, b"no such file", "text/plain", head)
            size = min(info.st_size, MAX_SERVED)
            note = b""
            if info.st_size > MAX_SERVED:
                if ctype != "text/plain":
                    return self._send(
                        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        f"{target.name}: {info.st_size} bytes, more than serve sends;"
                        " read it from the run directory".encode(),
                        "text/plain",
                        head,
                    )
                note = (
                    f"\n[rackcert serve: cut at {MAX_SERVED} of {info.st_size} bytes;"
                    " read the whole file from the run directory]\n"
                ).encode()
            self._headers(HTTPStatus.OK, ctype, size + len(note), attachment, target.name)
            if head:
                return
            left = size
            while left > 0:
                chunk = handle.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
            self.wfile.write(b"\0" * left + note)  # a file that shrank keeps Content-Length true

    def _live(self, run_path: Path, head: bool) -> None:
        from rackcert.core.errors import RackcertError
        from rackcert.report.assemble import assemble
        from rackcert.report.html import render_html

        try:
            body = render_html(assemble(RunDir.open(run_path)), Redactor()).encode()
        except RackcertError as exc:
            return self._send(
                HTTPStatus.UNPROCESSABLE_ENTITY, str(exc).encode(), "text/plain", head
            )
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            # A planted run whose records have the wrong shape: say so, keep serving.
            reason = f"{run_path.name}: unreadable run ({type(exc).__name__})"
            return self._send(HTTPStatus.UNPROCESSABLE_ENTITY, reason.encode(), "text/plain", head)
        return self._send(HTTPStatus.OK, body, "text/html", head)

    def _headers(
        self, status: HTTPStatus, ctype: str, length: int, attachment: bool = False, name: str = ""
    ) -> None:
        self.send_response(status)
        charset = "; charset=utf-8" if ctype.startswith("text/") or "json" in ctype else ""
        self.send_header("Content-Type", ctype + charset)
        self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        if attachment:
            self.send_header("Content-Disposition", f"attachment; filename*=UTF-8''{quote(name)}")
        self.end_headers()

    def _send(self, status: HTTPStatus, body: bytes, ctype: str, head: bool) -> None:
        self._headers(status, ctype, len(body))
        if not head:
            self.wfile.write(body)


def make_server(root: Path, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    """A server over `root` (not yet serving); port 0 picks a free one."""
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.runs_root = Path(root)  # type: ignore[attr-defined]
    server.allowed_hosts = allowed_hosts(host, server.server_address[1])  # type: ignore[attr-defined]
    return server


def allowed_hosts(host: str, port: int) -> tuple[str, ...]:
    """Host header values answered: loopback names, and the address bound when it is one."""
    names = list(LOOPBACK_NAMES)
    if host not in ("", "0.0.0.0", "::"):  # a wildcard bind names no host of its own
        names.append(f"[{host}]" if ":" in host else host)
    return tuple(f"{n.lower()}:{port}" for n in dict.fromkeys(names))
