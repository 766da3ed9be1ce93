"""Label values from untrusted text: valid UTF-8, no controls, bounded length.

Why: node names, driver strings and GPU names come from the nodes. prometheus_client
escapes backslash, double quote and newline in label values as the exposition format
requires (so a hostile value cannot close the quote and start a new series), but two jobs
are left to us: a lone surrogate (a file name read with surrogateescape) cannot be encoded
at all, and a 300 KB value would be copied into every series of that node. So every
label value goes through `label()`.

    >>> label('gpu"}\\nfake_metric 1')
    'gpu"}\\\\nfake_metric 1'
"""

from __future__ import annotations

from rackcert.core.untrusted import visible

LABEL_CAP = 128  # characters; DCGM exporter's longest labels (UUID, modelName) are ~40


def label(value: object, limit: int = LABEL_CAP) -> str:
    """`value` as a label value: controls shown as \\xNN, cut to `limit` characters."""
    text = str(value).encode("utf-8", "replace").decode("utf-8")
    text = visible(text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text
