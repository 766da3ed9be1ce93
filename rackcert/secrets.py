"""Secrets by reference, and scrubbing them out of anything rackcert writes.

The spec never holds a secret, only where to find it (an environment variable
or a file). Every value resolved here is remembered by `REDACTOR`, and every
record, log line and report passes through `REDACTOR.scrub` before it lands.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rackcert.errors import InputError

MASK = "********"


class Redactor:
    """Replaces every known secret value with a mask, in strings and nested data."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 4:
            self._secrets.add(secret)

    def scrub(self, value: Any) -> Any:
        """Mask secrets in a string, or in every string of nested dicts and lists."""
        if isinstance(value, str):
            for secret in sorted(self._secrets, key=len, reverse=True):
                value = value.replace(secret, MASK)
                # The same secret as it appears inside JSON text (quotes, backslashes escaped).
                value = value.replace(json.dumps(secret)[1:-1], MASK)
            return value
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value


REDACTOR = Redactor()


def resolve_secret(env: str | None, file: str | None, what: str) -> str:
    """Read a secret from the environment variable or file the spec names."""
    if env:
        value = os.environ.get(env)
        if value is None:
            raise InputError(f"{what}: environment variable {env} is not set")
    elif file:
        try:
            value = Path(file).expanduser().read_text().strip()
        except OSError as exc:
            raise InputError(f"{what}: cannot read password file {file}: {exc.strerror}") from None
    else:
        raise InputError(f"{what}: no password_env or password_file given")
    REDACTOR.add(value)
    return value
