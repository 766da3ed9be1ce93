"""Where rackcert's shipped data lives, installed from a wheel or run from a checkout."""

from __future__ import annotations

from pathlib import Path

# This file is rackcert/core/paths.py: the package is one folder up, the checkout two.
_PACKAGE = Path(__file__).resolve().parent.parent
REPO_ROOT = _PACKAGE.parent


def _shipped(name: str) -> Path:
    packaged = _PACKAGE / "_data" / name
    return packaged if packaged.is_dir() else REPO_ROOT / name


def playbooks_dir() -> Path:
    return _shipped("playbooks")


def inventories_dir() -> Path:
    return _shipped("inventories")
