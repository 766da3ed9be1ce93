"""`rackcert serve`: a small local history page of runs, verdicts and their reports.

The web front end the seeds' users had in DIGITS/DKube, kept minimal: the
standard library's threading HTTP server, bound to 127.0.0.1 unless told
otherwise, read-only (GET/HEAD), serving only files inside run directories.
A run whose report was never built gets a live view rendered in memory from
its stage files; nothing is written to the run directory by browsing it.

Routes: `/` the list, `/api/runs` the same as JSON, `/runs/<rack>/<run>/` a
run's files, `/runs/<rack>/<run>/<file>` a file, `/runs/<rack>/<run>/live`
the report rendered from the current records.
"""

from __future__ import annotations

import html
import json
import mimetypes
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from rackcert.report.manifest import MANIFEST_NAME
from rackcert.runs import RunDir, list_runs
from rackcert.secrets import REDACTOR

_TYPES = {
    ".json": "application/json",
    ".yaml": "text/plain",
    ".xml": "application/xml",
    ".sha256": "text/plain",
    ".log": "text/plain",
    ".txt": "text/plain",
}


def manifest_state(run_path: Path) -> str:
    """intact, changed, or none: whether the run still matches its MANIFEST.sha256."""
    from rackcert.errors import RecordError
    from rackcert.report.manifest import verify

    if not (run_path / MANIFEST_NAME).is_file():
        return "none"
    try:
        return "intact" if verify(run_path).ok else "changed"
    except RecordError:
        return "changed"


def runs_listing(root: Path) -> list[dict[str, Any]]:
    """Runs newest first, with verdict, stage statuses, report links and manifest state."""
    from rackcert.report.build import learn_secrets

    out = []
    for r in reversed(list_runs(root)):
        learn_secrets(RunDir(r.path))  # pages about this run get its secrets masked
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
                "verdict": r.verdict,
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
.m-changed {{ color: #b3261e; font-weight: bold; }} .muted {{ color: #667; font-size: 12px; }}
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


def _files_page(run_path: Path, prefix: str) -> str:
    e = html.escape
    names = sorted(p.relative_to(run_path).as_posix() for p in run_path.rglob("*") if p.is_file())
    items = "".join(f'<li><a href="{e(prefix + quote(n))}">{e(n)}</a></li>' for n in names)
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

    def do_GET(self, head: bool = False) -> None:  # noqa: N802 - stdlib naming
        root: Path = self.server.runs_root  # type: ignore[attr-defined]
        path = unquote(urlsplit(self.path).path)
        try:
            if path in ("/", "/index.html"):
                return self._send(HTTPStatus.OK, index_page(root).encode(), "text/html", head)
            if path == "/api/runs":
                body = json.dumps(runs_listing(root), indent=2).encode()
                return self._send(HTTPStatus.OK, body, "application/json", head)
            if path.startswith("/runs/"):
                return self._run_path(root, path[len("/runs/") :], head)
        except OSError:
            return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, b"cannot read", "text/plain", head)
        return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain", head)

    def _run_path(self, root: Path, rest: str, head: bool) -> None:
        parts = [p for p in rest.split("/") if p]
        if len(parts) < 2 or any(p in (".", "..") for p in parts):
            return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain", head)
        run_path = (root / parts[0] / parts[1]).resolve()
        if not run_path.is_relative_to(root.resolve()) or not (run_path / "meta.json").is_file():
            return self._send(HTTPStatus.NOT_FOUND, b"no such run", "text/plain", head)
        from rackcert.report.build import learn_secrets

        learn_secrets(RunDir(run_path))
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
        ctype = _TYPES.get(target.suffix) or mimetypes.guess_type(target.name)[0]
        return self._send(
            HTTPStatus.OK,
            target.read_bytes(),
            ctype or "application/octet-stream",
            head,
            scrub=target.suffix != ".pdf",
        )

    def _live(self, run_path: Path, head: bool) -> None:
        from rackcert.errors import RackcertError
        from rackcert.report.assemble import assemble
        from rackcert.report.html import render_html

        try:
            body = render_html(assemble(RunDir.open(run_path))).encode()
        except RackcertError as exc:
            return self._send(
                HTTPStatus.UNPROCESSABLE_ENTITY, str(exc).encode(), "text/plain", head
            )
        return self._send(HTTPStatus.OK, body, "text/html", head)

    def _send(
        self, status: HTTPStatus, body: bytes, ctype: str, head: bool, scrub: bool = True
    ) -> None:
        if scrub and ctype.startswith(("text/", "application/json", "application/xml")):
            body = REDACTOR.scrub(body.decode("utf-8", "replace")).encode()
        self.send_response(status)
        charset = "; charset=utf-8" if ctype.startswith("text/") or "json" in ctype else ""
        self.send_header("Content-Type", ctype + charset)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if not head:
            self.wfile.write(body)


def make_server(root: Path, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    """A server over `root` (not yet serving); port 0 picks a free one."""
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.runs_root = Path(root)  # type: ignore[attr-defined]
    return server
