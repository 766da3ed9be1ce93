"""The certified matrix: the user's reference configurations, and the comparison with a run.

Entries live in `validation/certified/*.yaml` (or a directory given with
`--matrix-dir` / RACKCERT_CERTIFIED_DIR). Each names components (server model,
GPU, ESXi, driver, CUDA, OFED, NIC firmware, ...) with rules. The comparison
reads only the assembled record's observed hardware and software: a component
nobody observed is "unknown", never assumed to match. The data is the user's
own reference, not NVIDIA's list, and the report says so.

Example:
    ref = find_reference("dell-r750xa-a100-esxi703")
    comparison = compare(ref, hardware, software)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rackcert.core.errors import InputError
from rackcert.core.paths import REPO_ROOT
from rackcert.report.record import Hardware, MatrixComparison, MatrixRow

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


_HOST_FIELDS = {
    "server_vendor": lambda h: [h.vendor],
    "server_model": lambda h: [h.model],
    "bios_version": lambda h: [h.bios_version],
    "esxi_version": lambda h: [h.esxi_version],
    "esxi_build": lambda h: [h.esxi_build],
    "gpu_model": lambda h: sorted({g.model for g in h.gpus}),
    "gpus_per_host": lambda h: [str(len(h.gpus))],
    "nic_model": lambda h: sorted({n.model for n in h.nics}),
}


def observed_values(
    component: str, hardware: Hardware, software: dict[str, dict[str, str]]
) -> dict[str, str]:
    """What each host (from discovery) and node (from the guests) showed for a component."""
    out: dict[str, str] = {}
    getter = _HOST_FIELDS.get(component)
    if getter is not None:
        for host in hardware.hosts:
            if component == "gpus_per_host" and not (host.gpus or host.nics):
                continue  # discovery saw no PCI inventory on this host: unknown, not "0"
            values = [v for v in getter(host) if v]
            if values:
                out[host.name] = "; ".join(values)
    for node, versions in software.items():
        value = versions.get(component)
        if value:
            out.setdefault(node, value)
    return out


def compare(
    ref: Reference | None,
    hardware: Hardware,
    software: dict[str, dict[str, str]],
    *,
    wanted: str | None = None,
) -> MatrixComparison:
    """Each component of `ref` as matches / differs / unknown against what was observed."""
    if ref is None:
        note = (
            f"certified-matrix entry {wanted!r} not found in {certified_dir()}"
            if wanted
            else "no certified-matrix reference chosen (spec certification.reference)"
        )
        return MatrixComparison(reference=wanted, disclaimer=DISCLAIMER, note=note)
    rows = [_row(rule, hardware, software) for rule in ref.components]
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("matches", "differs", "unknown")}
    return MatrixComparison(
        reference=ref.id,
        title=ref.title,
        source=ref.source,
        disclaimer=ref.disclaimer or DISCLAIMER,
        rows=rows,
        counts=counts,
    )


def _row(rule: Rule, hardware: Hardware, software: dict[str, dict[str, str]]) -> MatrixRow:
    observed = observed_values(rule.component, hardware, software)
    bad = {where: v for where, v in observed.items() if not _all_hold(rule, v)}
    if not observed:
        status, detail = "unknown", "not observed in this run"
    elif bad:
        status = "differs"
        detail = "differs on " + ", ".join(sorted(bad))
    else:
        status, detail = "matches", f"{len(observed)} observed"
    return MatrixRow(
        component=rule.component,
        label=rule.label or rule.component,
        expected=rule.expected(),
        status=status,
        observed=observed,
        detail=detail,
    )


def _all_hold(rule: Rule, value: str) -> bool:
    """A host with two GPU models shows 'a; b': each one must hold."""
    return all(rule.holds(part) for part in value.split("; ") if part)


def reference_figures(ref: Reference | None) -> dict[int, float]:
    if ref is None:
        return {}
    return dict(sorted(ref.reference_results.get("resnet50_images_per_sec", {}).items()))
