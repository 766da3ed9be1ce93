"""Set-up's background install of the test-only tools, as the test session reads it."""

from __future__ import annotations

import os

from tests.support.plugins.test_tools import background_state


def test_states_of_the_background_install(tmp_path):
    assert background_state(tmp_path) == ("none", None)
    (tmp_path / "test-tools.pid").write_text(f"{os.getpid()}\n")
    assert background_state(tmp_path) == ("running", os.getpid())
    # A job that died without writing its exit status failed: never waited on forever.
    (tmp_path / "test-tools.pid").write_text(f"{2**22 + 12345}\n")
    assert background_state(tmp_path)[0] == "failed"
    (tmp_path / "test-tools.rc").write_text("0\n")
    assert background_state(tmp_path) == ("done", None)
    (tmp_path / "test-tools.rc").write_text("1\n")
    assert background_state(tmp_path) == ("failed", None)
