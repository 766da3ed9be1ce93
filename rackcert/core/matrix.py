"""The certified matrix's entries, as the spine reads them: rules per component.

Entries live in `validation/certified/*.yaml` (or a directory given with `--matrix-dir` /
RACKCERT_CERTIFIED_DIR). The report compares a run with an entry (rackcert.report.matrix);
the upgrade refuses a target version no entry allows. Both read the entries here, so the
rules mean the same thing to both. The data is the user's own reference, not NVIDIA's list.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rackcert.core.errors import InputError
from rackcert.core.paths import REPO_ROOT

DISCLAIMER = (
    "The certified matrix is the user's reference data, not NVIDIA's list of certified systems."
)


def certified_dir() -> Path:
    """The matrix directory: $RACKCERT_CERTIFIED_DIR, else validation/certified of rackcert."""
    env = os.environ.get("RACKCERT_CERTIFIED_DIR")
    return Path(env) if env else REPO_ROOT / "validation" / "certified"


class Rule(BaseModel):
    """What one component must be; every rule given must hold."""

    model_config = ConfigDict(extra="forbid")

    component: str
    label: str = ""
    equals: str | None = None
    version: str | None = None
    min: str | None = None
    below: str | None = None
    contains_all: list[str] | None = None
    one_of: list[str] | None = None

    def expected(self) -> str:
        parts: list[str] = []
        if self.equals is not None:
            parts.append(f"= {self.equals}")
        if self.version is not None:
            parts.append(f"{self.version}.x")
        if self.min is not None:
            parts.append(f">= {self.min}")
        if self.below is not None:
            parts.append(f"< {self.below}")
        if self.contains_all:
            parts.append("contains " + " + ".join(self.contains_all))
        if self.one_of:
            parts.append("one of " + ", ".join(self.one_of))
        return ", ".join(parts) or "any"

    def holds(self, value: str) -> bool:
        text = value.strip()
        checks = [
            self.equals is None or text == self.equals,
            self.version is None or version_prefix(text, self.version),
            self.min is None or compare_versions(text, self.min) >= 0,
            self.below is None or compare_versions(text, self.below) < 0,
            not self.contains_all or all(w.lower() in text.lower() for w in self.contains_all),
            not self.one_of or text in self.one_of,
        ]
        return all(checks)


class Reference(BaseModel):
    """One certified-matrix entry (one YAML file)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str = ""
    source: str = ""
    disclaimer: str = DISCLAIMER
    components: list[Rule] = Field(default_factory=list)
    reference_results: dict[str, dict[int, float]] = Field(default_factory=dict)


def _tokens(version: str) -> list[int | str]:
    found = re.findall(r"\d+|[A-Za-z]+", version)
    return [int(t) if t.isdigit() else t.lower() for t in found]


def compare_versions(a: str, b: str) -> int:
    """-1, 0, 1 comparing dotted/dashed versions numerically (5.4-3.1.0.0 > 5.4-1.0.3.0)."""
    ta, tb = _tokens(a), _tokens(b)
    for x, y in zip(ta, tb, strict=False):
        if x == y:
            continue
        if isinstance(x, int) and isinstance(y, int):
            return -1 if x < y else 1
        return -1 if str(x) < str(y) else 1
    return (len(ta) > len(tb)) - (len(ta) < len(tb))


def version_prefix(value: str, prefix: str) -> bool:
    """True when `value`'s version starts with `prefix`'s (11.4.120 starts with 11.4)."""
    tv, tp = _tokens(value), _tokens(prefix)
    return bool(tp) and tv[: len(tp)] == tp


def load_references(directory: Path | None = None) -> dict[str, Reference]:
    """Every entry of the matrix directory, by id; a broken file is one InputError line."""
    directory = directory or certified_dir()
    refs: dict[str, Reference] = {}
    if not directory.is_dir():
        return refs
    for path in sorted(directory.glob("*.yaml")):
        try:
            raw = yaml.safe_load(path.read_text())
            ref = Reference.model_validate(raw)
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"{path}: unreadable certified-matrix entry: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(f"{path}: {where}: {first['msg']}") from None
        refs[ref.id] = ref
    return refs


def find_reference(ref_id: str, directory: Path | None = None) -> Reference | None:
    return load_references(directory).get(ref_id)
