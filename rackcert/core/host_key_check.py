"""Whether a node answers SSH with the host key its rack enrolled: a roll's gate.

A roll takes a node's host down and brings it back. While it reboots, its address is free,
and whatever answers there next is not the node until it proves the key the rack enrolled
(rackcert.core.known_hosts). So after power-on the roll waits until SSH answers with an
enrolled key, not merely until the port is open, and it never enrols: a key missing from
the rack's file or a changed key is a failure with one line that says which.

ssh-keyscan runs the key exchange, in which the server signs with its host key: a key it
prints is one the host holds, not one it merely quotes.

    line = wait_enrolled(rack_file(spec, root), "lab-node1", "10.77.0.11", 22, timeout=600)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rackcert.core.errors import RackcertError
from rackcert.core.known_hosts import fingerprint, host_name, lookup, scan


class HostKeyError(RackcertError):
    """The node's host key is not the enrolled one, or none is enrolled; one line."""


def _keys(lines: list[str]) -> set[tuple[str, str]]:
    """(key type, base64 blob) of known_hosts lines."""
    out = set()
    for line in lines:
        parts = line.split()
        if parts and parts[0].startswith("@"):
            continue  # a marker line (@revoked, @cert-authority) enrols no plain key
        if len(parts) >= 3:
            out.add((parts[1], parts[2]))
    return out


def _describe(keys: set[tuple[str, str]]) -> str:
    return ", ".join(f"{kind} {fingerprint(blob)}" for kind, blob in sorted(keys))


def enrolled_keys(path: Path, node: str, address: str, port: int) -> set[tuple[str, str]]:
    """The keys the rack's file holds for the node's address; HostKeyError when none."""
    keys = _keys(lookup(path, host_name(address, port)))
    if not keys:
        raise HostKeyError(
            f"host key of {node} is not enrolled in {path} ({host_name(address, port)}):"
            " a roll never enrols; enrol it outside the roll (rackcert validate) or pin it"
            " in guest.ssh.known_hosts"
        )
    return keys


def answered(path: Path, node: str, address: str, port: int, timeout: int = 5) -> str | None:
    """None when SSH does not answer yet; a line naming the enrolled key it answered with.

    Raises HostKeyError when it answers with keys none of which is enrolled.
    """
    enrolled = enrolled_keys(path, node, address, port)
    offered = _keys(scan(address, port, timeout))
    if not offered:
        return None
    good = offered & enrolled
    if not good:
        raise HostKeyError(
            f"host key of {node} changed since enrolment: {host_name(address, port)} answers"
            f" {_describe(offered)}; enrolled {_describe(enrolled)} in {path}"
        )
    return f"SSH answers with the enrolled host key ({_describe(good)})"


def wait_enrolled(
    path: Path,
    node: str,
    address: str,
    port: int,
    *,
    timeout: float,
    poll: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Wait until the node answers SSH with an enrolled key; the line that says so.

    A key that is not enrolled fails at once (HostKeyError), as does no enrolled key at all;
    no answer within `timeout` seconds fails too.
    """
    deadline = clock() + timeout
    while True:
        line = answered(path, node, address, port)
        if line is not None:
            return line
        if clock() > deadline:
            raise HostKeyError(
                f"{node}: SSH at {host_name(address, port)} did not answer in {timeout:.0f} s"
                " (waiting for its enrolled host key)"
            )
        sleep(poll)
