"""A node's drain reason as `scontrol show node -o` prints it: one reading for every caller.

Why one place: the health check (validation) and the rolling upgrade (rackcert.upgrade) both
read the reasons they set back from Slurm, to tell their own drains from an operator's; two
readings that differ would let one of them take an operator's drain for its own, or miss its
own. scontrol prints `Reason=<text> [<user>@<time>]` (scontrol(1); Slurm appends the user and
time to the reason it stores), and other fields may follow on the line (`Comment=...`).

The text is the one before the first ` [user@time]` stamp that the line's end or the next
`Key=` field follows: a reason may itself hold brackets with an @ (its text comes from
findings that quote the node), and a field after it (an operator's Comment) may too.

    node_reason("NodeName=n1 State=IDLE+DRAIN Reason=disk swap [ops@2026-12-03T15:00:00]")
    # -> "disk swap"
"""

from __future__ import annotations

import re

REASON = re.compile(r"\bReason=(.*?) \[[^\]\[@]*@[^\]\[]*\](?=[ \t]*$|\s+[A-Za-z_]+=)", re.M)


def node_reason(line: str) -> str:
    """The reason on one node's line (or a single node's output); empty when none is set."""
    found = REASON.search(line)
    return found.group(1).strip() if found else ""
