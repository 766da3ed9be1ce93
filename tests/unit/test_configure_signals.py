"""configure keeps a lab owner's answer to SIGTERM (rackcert.configure.runner.runner_signals).

ansible-runner, given no cancel callback, installs its own SIGTERM/SIGINT handlers and never
puts the old ones back: `rackcert demo` signalled during configure exited 1 (a canceled
playbook) instead of 143, and ignored SIGTERM after configure. Real ansible-runner runs here,
against localhost (connection local), no mocks.
"""

from __future__ import annotations

import signal

from rackcert.configure.runner import runner_signals


def test_off_the_main_thread_nothing_is_set_and_nothing_raises():
    """`rackcert upgrade` configures nodes from worker threads, where signal.signal raises
    ValueError: runner_signals must neither set nor put back a handler there."""
    import threading

    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def worker() -> None:
        try:
            with runner_signals() as cancel_callback:
                seen.append(cancel_callback)
        except Exception as exc:  # noqa: BLE001 - the failure this test is about
            seen.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert seen == [None]
    assert signal.getsignal(signal.SIGTERM) is before
