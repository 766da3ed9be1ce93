"""tests.support.threads.Background: what a background loop raises fails the test."""

from __future__ import annotations

import subprocess
import threading

import pytest

from tests.support.threads import Background


def test_a_timeout_inside_a_loop_is_raised_in_the_main_thread_at_join() -> None:
    """The lab roll's sbatch timing out ended its job stream silently; now the test fails."""

    def jobs(stop: threading.Event) -> None:
        raise subprocess.TimeoutExpired(["sbatch", "--wait"], 120)

    with pytest.raises(subprocess.TimeoutExpired) as raised, Background(jobs):
        pass
    assert raised.value.cmd == ["sbatch", "--wait"]
    assert "raised in background loop jobs" in raised.value.__notes__


def test_loops_run_until_the_block_ends_and_clean_ones_raise_nothing() -> None:
    counts = {"a": 0}

    def a(stop: threading.Event) -> None:
        while not stop.wait(0.001):
            counts["a"] += 1

    with Background(a) as bg:
        while counts["a"] < 3:
            pass
    assert bg.stop.is_set() and not bg.failures and not bg.threads[0].is_alive()


def test_one_failing_loop_stops_the_others_and_the_blocks_own_error_wins() -> None:
    def bad(stop: threading.Event) -> None:
        raise OSError("sinfo: no such file")

    def good(stop: threading.Event) -> None:
        stop.wait()

    with pytest.raises(KeyError) as raised, Background(bad, good) as bg:
        bg.stop.wait(10)  # set by the failing loop
        raise KeyError("the test's own failure")
    assert any("sinfo: no such file" in n for n in raised.value.__notes__)


def test_a_loop_that_does_not_stop_is_an_error() -> None:
    release = threading.Event()

    def stubborn(stop: threading.Event) -> None:
        release.wait(5)

    with (
        pytest.raises(RuntimeError, match="stubborn did not stop in 0.05 s"),
        Background(stubborn, join_s=0.05),
    ):
        pass
    release.set()
