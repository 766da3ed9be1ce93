"""What more than one test module needs from the old test_configure_byo.py:
tests/integration/test_configure_byo.py, tests/unit/test_configure_byo.py,
tests/unit/test_configure_rollback.py.
"""

from __future__ import annotations

import contextlib
import io
import subprocess

from rackcert.cli import main


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`rackcert ARGS` through the console entry point, in this process.

    The same `main()` the console script calls, with its output captured: every check here
    is a spec or option refused before anything runs, and a fresh interpreter per case cost
    a third of a second of imports each (the `python -m rackcert.cli` path itself is proved
    in tests/integration/test_cli_main.py and by test_reference_spec_tarball_passes_check below)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def one_error_line(proc) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Traceback" not in out
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]
