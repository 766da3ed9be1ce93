"""Keep a vCenter session alive through a long provision: log in again on NotAuthenticated.

Why: vCenter ends an API session that stays idle for its timeout (30 minutes on vCenter
7.0), and a provision that waits on reboots and clones can leave its session idle that
long (or vCenter restarts its session store). The next call then faults NotAuthenticated.
`renewing` wraps the session's stub: on that fault it logs in once more with the same
credentials (a new session; pyVmomi takes the new cookie from the answer) and repeats the
call. Only NotAuthenticated is handled: every other fault, and a refused login, surface.
Threads share one stub, so one re-login serves all the calls that failed together.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rackcert.provision")


def renewing(si: Any, login: Callable[[Any], None]) -> None:
    """Make `si`'s stub log in again (`login(session_manager)`) when its session expired."""
    from pyVmomi import vim

    stub = si._stub
    if getattr(stub, "_rackcert_renewing", False):
        return
    original = stub.InvokeMethod
    lock = threading.Lock()
    state = {"generation": 0, "renewals": 0}
    local = threading.local()  # set while this thread logs in: its faults go to the caller

    def invoke(mo: Any, info: Any, args: Any, outerStub: Any = None) -> Any:  # noqa: N803
        if getattr(info, "wsdlName", "") == "Logout":  # on purpose, by whatever path: stays out
            stub._rackcert_closed = True
        seen = state["generation"]
        try:
            return original(mo, info, args, outerStub)
        except vim.fault.NotAuthenticated:
            if getattr(local, "logging_in", False) or getattr(stub, "_rackcert_closed", False):
                raise  # a login that failed, or a session logged out on purpose
            with lock:
                if state["generation"] == seen:  # the first thread to notice logs in again
                    log.info("vCenter session expired; logging in again")
                    local.logging_in = True
                    try:
                        manager = si.RetrieveContent().sessionManager
                        login(manager)
                    finally:
                        local.logging_in = False
                    state["generation"] += 1
                    state["renewals"] += 1
            return original(mo, info, args, outerStub)

    stub.InvokeMethod = invoke
    stub._rackcert_plain_invoke = original  # for a test that must see the fault itself
    stub._rackcert_renewing = True
    stub._rackcert_renewals = state


def renewals(si: Any) -> int:
    """How many times the session was renewed (0 when it never expired)."""
    state = getattr(si._stub, "_rackcert_renewals", None)
    return int(state["renewals"]) if state else 0
