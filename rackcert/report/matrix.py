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

from rackcert.core.matrix import (
    DISCLAIMER,
    Reference,
    Rule,
    certified_dir,
    compare_versions,
    find_reference,
    load_references,
    version_prefix,
)
from rackcert.report.record import Hardware, MatrixComparison, MatrixRow

__all__ = [
    "DISCLAIMER",
    "Reference",
    "Rule",
    "certified_dir",
    "compare",
    "compare_versions",
    "find_reference",
    "load_references",
    "observed_values",
    "reference_figures",
    "version_prefix",
]

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
