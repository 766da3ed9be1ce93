"""Count the SOAP round trips a piece of code makes through a pyVmomi session.

Every call a pyVmomi object makes (methods and lazy property reads alike) goes
through its stub's InvokeMethod; wrapping that one function on the session's
stub counts them without touching the wire. Calls that bypass InvokeMethod on
the same connection (provision.soapstream's streamed pages) report themselves
through `note_call`, so the count stays the number of requests sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Counter:
    def __init__(self) -> None:
        self.calls = 0


# Counters open on a stub, by id(stub): note_call adds to each of them.
_OPEN: dict[int, list[Counter]] = {}


def note_call(stub: Any) -> None:
    """One request sent on `stub` outside InvokeMethod: counted by every open counter."""
    for counter in _OPEN.get(id(stub), []):
        counter.calls += 1


@contextlib.contextmanager
def count_round_trips(si: Any) -> Iterator[Counter]:
    """`with count_round_trips(si) as c: ...; c.calls` is the number of SOAP calls made."""
    stub = si._stub
    original = stub.InvokeMethod
    counter = Counter()

    def counting(*args: Any, **kwargs: Any) -> Any:
        counter.calls += 1
        return original(*args, **kwargs)

    stub.InvokeMethod = counting
    _OPEN.setdefault(id(stub), []).append(counter)
    try:
        yield counter
    finally:
        stub.InvokeMethod = original
        _OPEN[id(stub)].remove(counter)
        if not _OPEN[id(stub)]:
            del _OPEN[id(stub)]
