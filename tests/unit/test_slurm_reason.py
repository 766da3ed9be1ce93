"""One reading of a node's drain reason (rackcert.core.slurm.client) for the health check and
the rolling upgrade: the text before Slurm's ` [user@time]` stamp, whatever brackets the
reason or a field after it holds."""

from __future__ import annotations

import pytest

from rackcert.core.slurm.client import node_reason
from rackcert.upgrade.slurm import parse_nodes

STAMP = "[root@2026-12-06T18:00:00]"


@pytest.mark.parametrize(
    ("reason", "after"),
    [
        ("rackcert upgrade R1", ""),
        ("rackcert upgrade R1: gpu.count 1, wanted 2", " Comment=ticket 12"),
        # A finding that quotes the node: brackets with an @ inside the reason itself.
        ("rackcert upgrade R1: unit [GPU0@node3] 50 below its rule", ""),
        ("rackcert: gpu.pcie.link: gen=3 width=8 ['x']", " Comment=x"),
        # An operator's comment after the reason with a stamp-like bracket of its own.
        ("disk swap", " Comment=see [ops@ticket-12]"),
    ],
)
def test_the_reason_is_the_text_before_slurms_stamp(reason: str, after: str) -> None:
    line = f"NodeName=n1 State=IDLE+DRAIN Partitions=lab Reason={reason} {STAMP}{after}"
    assert node_reason(line) == reason
    assert parse_nodes(line)["n1"].reason == reason
    assert (
        node_reason(line + "\n") == reason
    )  # a single node's output, as the health check reads it


def test_no_reason_reads_empty() -> None:
    assert node_reason("NodeName=n1 State=IDLE Partitions=lab") == ""
    assert parse_nodes("NodeName=n1 State=IDLE Partitions=lab")["n1"].reason == ""
