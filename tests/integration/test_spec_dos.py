"""A spec cannot make `spec check` spend minutes or gigabytes: aliases refused, size capped.

The billion-laughs file is the 342-byte one from the security review (nine levels of nine
aliases: 387 million strings once expanded); it took 62 s and 1.2 GB before.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

LEVELS = "abcdefghi"


def _laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip(LEVELS, LEVELS[1:], strict=False):
        lines.append(f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


def _check(path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "spec", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_laughs(), "anchors and aliases"),
        ("apiVersion: &v rackcert/v1\nkind: *v\n", "anchors and aliases"),
        ("a: " + "[" * 3000 + "]" * 3000 + "\n", "nests deeper than"),
        ("a: [" + ",".join(["0"] * 31_000) + "]\n", "more than 30000 values"),
        ("a: '" + "x" * (2 << 20) + "'\n", "larger than"),
    ],
    ids=["billion-laughs", "one-alias", "deep", "many-nodes", "huge"],
)
def test_hostile_yaml_is_one_quick_error_line(tmp_path, text, message):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    started = time.monotonic()
    done = _check(path)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert elapsed < 30, f"spec check took {elapsed:.1f} s"
