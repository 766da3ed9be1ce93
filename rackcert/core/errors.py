"""Errors meant for people: one line, where, what, and what to do.

The CLI prints `str(error)` and exits with `exit_code`; nothing else reaches the
terminal. Exit code 2 means the input was wrong (spec, credentials, address),
1 means the rack or a stage failed.
"""

from __future__ import annotations


class RackcertError(Exception):
    """Base of every error the CLI turns into one line and an exit code."""

    exit_code = 1

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(" ".join(str(message).split()))
        if exit_code is not None:
            self.exit_code = exit_code


class SpecError(RackcertError):
    """The spec file is missing, malformed or breaks a rule."""

    exit_code = 2


class InputError(RackcertError):
    """A command-line argument or referenced file is wrong."""

    exit_code = 2


class RecordError(RackcertError):
    """A run record could not be written or read; what was recorded before is intact."""

    exit_code = 1
