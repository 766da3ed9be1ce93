"""Secrets by reference, and scrubbing them out of anything rackcert writes.

The spec never holds a secret, only where to find it (an environment variable
or a file). Every value resolved here is remembered by `REDACTOR`, and every
record, log line and report passes through `REDACTOR.scrub` before it lands.
"""

from __future__ import annotations

import html
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError

MASK = "********"
MIN_SECRET_LEN = 4  # a shorter value cannot be masked without masking ordinary words
MAX_SECRET_FILE = 64 * 1024  # a password or key file is small; anything bigger is not one


class Redactor:
    """Replaces every known secret value with a mask, in strings and nested data."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None  # every form, longest first; built once

    def add(self, secret: str | None) -> None:
        """Remember a secret; values shorter than MIN_SECRET_LEN are refused where resolved."""
        if secret and len(secret) >= MIN_SECRET_LEN and secret not in self._secrets:
            self._secrets.add(secret)
            self._pattern = None

    def copy(self) -> Redactor:
        """A redactor that knows what this one knows; what it learns stays its own (per run)."""
        other = Redactor()
        other._secrets = set(self._secrets)
        return other

    def _compiled(self) -> re.Pattern[str] | None:
        """One regex of every form of every secret, built when a secret is added, not per string.

        Rebuilding the forms for each string made a 49 MB validate.json cost the report 71 s.
        Longest first, so a form that contains another is masked whole.
        """
        if self._pattern is None and self._secrets:
            forms = {f for secret in self._secrets for f in self.forms(secret)}
            ordered = sorted(forms, key=lambda f: (-len(f), f))
            self._pattern = re.compile("|".join(re.escape(f) for f in ordered))
        return self._pattern

    def forms(self, secret: str) -> set[str]:
        """The secret as it appears in plain text, JSON text and HTML text or attributes."""
        return {
            secret,
            json.dumps(secret)[1:-1],  # inside JSON text (quotes, backslashes escaped)
            html.escape(secret, quote=False),  # in HTML text
            html.escape(secret, quote=True),  # in HTML attributes (what jinja2 writes)
            html.escape(secret, quote=True).replace("&#x27;", "&#39;"),  # markupsafe's form
        }

    def scrub(self, value: Any) -> Any:
        """Mask secrets in a string, or in every string of nested dicts and lists."""
        if isinstance(value, str):
            pattern = self._compiled()
            return pattern.sub(MASK, value) if pattern is not None else value
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value


REDACTOR = Redactor()


def check_secret(value: str, what: str) -> str:
    """Refuse a secret too short to be masked: it would show in clear in every record."""
    if len(value) < MIN_SECRET_LEN:
        raise InputError(
            f"{what}: the secret is shorter than {MIN_SECRET_LEN} characters; rackcert cannot"
            " keep so short a value out of its records: use a longer one"
        )
    return value


def read_secret_file(file: str | Path, what: str) -> str:
    """A secret file's text: a regular file of at most MAX_SECRET_FILE bytes, nothing else.

    A FIFO or device would block or stream forever; a huge file is not a password.
    """
    path = Path(file).expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"{what}: cannot read password file {file}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{what}: password file {file} is not a regular file")
        if info.st_size > MAX_SECRET_FILE:
            raise InputError(
                f"{what}: password file {file} is larger than {MAX_SECRET_FILE} bytes; not a secret"
            )
        data = os.read(fd, MAX_SECRET_FILE + 1)
    except OSError as exc:
        raise InputError(f"{what}: cannot read password file {file}: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise InputError(f"{what}: password file {file} is not UTF-8 text") from None


def resolve_secret(env: str | None, file: str | None, what: str) -> str:
    """Read a secret from the environment variable or file the spec names."""
    if env:
        value = os.environ.get(env)
        if value is None:
            raise InputError(f"{what}: environment variable {env} is not set")
    elif file:
        value = read_secret_file(file, what)
    else:
        raise InputError(f"{what}: no password_env or password_file given")
    check_secret(value, what)
    REDACTOR.add(value)
    return value
