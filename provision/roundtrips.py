"""Count the SOAP round trips a piece of code makes through a pyVmomi session.

Every call a pyVmomi object makes (methods and lazy property reads alike) goes
through its stub's InvokeMethod; wrapping that one function on the session's
stub counts them without touching the wire.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Counter:
    def __init__(self) -> None:
        self.calls = 0


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
    try:
        yield counter
    finally:
        stub.InvokeMethod = original
