"""The PDF report: the same HTML rendered by weasyprint, in a child process with a time limit.

One source for both formats, so the PDF an auditor files shows exactly what
the HTML shows; print rules (A4, page numbers, no split rows) live in the
report's stylesheet.

Why a child: weasyprint's layout time grows steeply with one long unbreakable value
(a 300 KB GPU name from a node ran for more than 24 minutes, and the manifest was never
written). The child is killed at `timeout_s` (RACKCERT_PDF_TIMEOUT, default 120 s) and
the caller records why there is no PDF; the HTML and the manifest do not wait for it.

Example:
    data = render_pdf(html)             # in a child, bounded
    python -m rackcert.report.pdf OUT   # the child: HTML on stdin, the PDF to OUT
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rackcert.core.childenv import child_env
from rackcert.core.errors import RackcertError

TIMEOUT_ENV = "RACKCERT_PDF_TIMEOUT"
DEFAULT_TIMEOUT_S = 120.0
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds rackcert/


class PdfTimeout(RackcertError):
    """The renderer ran past its limit and was stopped; nothing was written."""


def timeout_s() -> float:
    """The PDF time limit: RACKCERT_PDF_TIMEOUT seconds when it is a positive number."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def render_pdf(html: str, limit_s: float | None = None) -> bytes:
    """PDF bytes of a self-contained report HTML, rendered in a child stopped at `limit_s`."""
    limit = limit_s if limit_s is not None else timeout_s()
    with tempfile.TemporaryDirectory(prefix="rackcert-pdf-") as tmp:
        out = Path(tmp) / "report.pdf"
        env = child_env({"PYTHONPATH": str(_PACKAGE_ROOT)})
        proc = subprocess.Popen(
            [sys.executable, "-m", "rackcert.report.pdf", str(out)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp,
            start_new_session=True,  # killed as a group: nothing outlives the limit
        )
        try:
            _, err = proc.communicate(html.encode(), timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            raise PdfTimeout(
                f"report.pdf not written: rendering ran past {limit:g} s and was stopped"
                f" (a value in the run too long to lay out?; {TIMEOUT_ENV} sets the limit);"
                " report.html has the same content"
            ) from None
        if proc.returncode != 0 or not out.is_file():
            lines = err.decode(errors="replace").strip().splitlines()
            raise RackcertError(
                f"cannot write the PDF report: {lines[-1] if lines else 'the renderer failed'}"
            )
        return out.read_bytes()


def render_in_process(html: str) -> bytes:
    """PDF bytes of a self-contained report HTML; no network access (nothing is linked)."""
    try:
        from weasyprint import HTML
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RackcertError(
            f"cannot write the PDF report: weasyprint is not importable ({exc});"
            " install rackcert[report]"
        ) from None
    # weasyprint logs every CSS property it does not support; those are not the user's problem.
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)

    def no_fetch(url: str, *args, **kwargs):
        raise ValueError(f"the report is self-contained; refusing to fetch {url}")

    return HTML(string=html, url_fetcher=no_fetch).write_pdf()


def main(argv: list[str]) -> int:
    """The child: HTML from stdin, the PDF written to argv[0]; one line on stderr on failure."""
    try:
        data = render_in_process(sys.stdin.buffer.read().decode())
        Path(argv[0]).write_bytes(data)
    except RackcertError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
