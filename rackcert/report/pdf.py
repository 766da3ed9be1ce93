"""The PDF report: the same HTML rendered by weasyprint (imported lazily).

One source for both formats, so the PDF an auditor files shows exactly what
the HTML shows; print rules (A4, page numbers, no split rows) live in the
report's stylesheet.
"""

from __future__ import annotations

import logging

from rackcert.errors import RackcertError


def render_pdf(html: str) -> bytes:
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
