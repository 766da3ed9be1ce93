"""From the figures localisation recorded to its findings: a pure function of the record.

Why a module of its own: `localise` measures and records; the verdict (validation.bench.
verdict.rejudge) must be able to judge a recorded `localise` block again with today's
code, without the nodes. Everything judged here is in the record: the per-pair figures
(`links`), the per-node stage (`nodes`), the per-rank figures of the scaling runs
(`ranks`) and the rules with their numbers (`rules`).
"""

from __future__ import annotations

from typing import Any

from validation.bench.localisation import colocated
from validation.bench.localisation.outliers import Finding, Rule, Unit, judge_links, judge_units

# PCIe per-lane data rate after encoding, Gb/s (PCI-SIG base specifications: Gen1/2 8b/10b,
# Gen3+ 128b/130b; Gen6 FLIT mode ~ 64 GT/s x 242/256).
PCIE_LANE_GBPS = {1: 2.0, 2: 4.0, 3: 7.877, 4: 15.754, 5: 31.508, 6: 60.5}

# (metric in a unit's figures, what it is, unit); GPUs: all three, a CPU unit: the GEMM.
UNIT_METRICS = (
    ("gemm_gflops", "GEMM", "GFLOP/s"),
    ("h2d_gb_s", "host-to-device copy", "GB/s"),
    ("d2h_gb_s", "device-to-host copy", "GB/s"),
)


def rules(
    median_fraction: float, link_fraction: float, line_rate_gbps: float | None, line_source: str
) -> dict[str, dict[str, Any]]:
    """The rules a localisation run is judged by, as the record keeps them."""
    absolute = link_fraction * line_rate_gbps if line_rate_gbps else None
    src = (
        f"{link_fraction:g} x line rate {line_rate_gbps:g} Gb/s, {line_source}" if absolute else ""
    )
    out = {
        "link": Rule("bandwidth", "Gb/s", median_fraction, absolute, src),
        # validation.bench.node.pair_allreduce: judged against the rack's median only (a
        # collective's busbw over TCP or RDMA has no line-rate fraction a rack agrees on)
        "link_allreduce": Rule("two-node allreduce busbw", "GB/s", median_fraction),
        "pcie": Rule("PCIe link", "Gb/s", median_fraction),
        "node_allreduce": Rule("allreduce busbw inside the node", "GB/s", median_fraction),
        "rank": Rule("images/s", "images/s", median_fraction),
    }
    for metric, what, unit in UNIT_METRICS:
        out[metric] = Rule(what, unit, median_fraction)
    return {k: r.to_dict() for k, r in out.items()}


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    if not gen or not width or gen not in PCIE_LANE_GBPS:
        return None
    return PCIE_LANE_GBPS[gen] * width


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per check id: a GPU slow on two metrics is one finding, both reasons."""
    out: dict[str, Finding] = {}
    for f in findings:
        if f.check_id in out:
            out[f.check_id].observed += f"; {f.observed}"
        else:
            out[f.check_id] = f
    return list(out.values())


def _pair_allreduce(record: dict[str, Any], r: dict[str, Rule]) -> tuple[list[Finding], Any]:
    """Each link's two-node allreduce busbw (`allreduce` in its row), as bandwidth is
    judged: a pair whose allreduce failed (or summed wrong) while others ran counts as 0."""
    rows = [p for p in record.get("links") or [] if p.get("allreduce")]
    if "link_allreduce" not in r or not any(p["allreduce"].get("busbw_gb_s") for p in rows):
        return [], None
    figures = {
        (p["a"], p["b"]): 0.0 if ar.get("error") else (ar.get("busbw_gb_s") or 0.0)
        for p in rows
        if (ar := p["allreduce"]) is not None
    }
    if len(figures) < 2:
        return [], None
    found, numbers = judge_links(figures, r["link_allreduce"])
    for f in found:
        f.observed = f"two-node allreduce busbw {f.observed}"
    return found, numbers


def judge(record: dict[str, Any]) -> tuple[list[Finding], dict[str, Any]]:
    """(findings, numbers) of a `localise` record block; numbers: each reference and spread."""
    r = {k: Rule(**v) for k, v in record["rules"].items()}
    findings: list[Finding] = []
    numbers: dict[str, Any] = {}
    pairs = {(p["a"], p["b"]): (p.get("gbps") or 0.0) for p in record.get("links") or []}
    if pairs:
        found, numbers["links"] = judge_links(pairs, r["link"])
        findings += found
    found, ar_numbers = _pair_allreduce(record, r)
    if ar_numbers is not None:
        numbers["link_allreduce"] = ar_numbers
    findings += found
    nodes = [n for n in record.get("nodes") or [] if not n.get("error")]
    for n in record.get("nodes") or []:
        if n.get("error"):
            findings.append(
                Finding(
                    "node",
                    n["node"],
                    "per-node stage",
                    0.0,
                    "",
                    None,
                    f"per-node stage failed: {n['error']}",
                    "the node answers the probe",
                    nodes=[n["node"]],
                )
            )
    for metric, _what, _unit in UNIT_METRICS:
        units = [
            Unit(n["node"], u["unit"], u.get("pci"), u[metric])
            for n in nodes
            for u in n.get("units", [])
            if u.get(metric) is not None
        ]
        if len(units) >= 2:
            found, numbers[metric] = judge_units(units, r[metric], "compute")
            if metric == "gemm_gflops":  # a CPU's own slowness, shared by its nodes
                aside = colocated.set_aside(nodes)
                kept = [f for f in found if not (f.pci is None and f.target in aside)]
                numbers[metric]["shared_cpu_set_aside"] = sorted(
                    f.target for f in found if f not in kept
                )
                found = kept
            findings += found
    pcie = []
    for n in nodes:
        for g in n.get("smi") or []:
            cur = pcie_gbps(g.get("pcie_gen"), g.get("pcie_width"))
            if cur is not None:
                pcie.append((n["node"], g, cur))
    if pcie:
        units = [Unit(node, f"GPU{g['index']}", g["pci"], cur) for node, g, cur in pcie]
        found, numbers["pcie"] = judge_units(units, r["pcie"], "gpu")
        for f in found:  # the link as nvidia-smi reports it, before the figures
            g = next(g for node, g, _c in pcie if node == f.nodes[0] and g["pci"] == f.pci)
            link = f"Gen{g['pcie_gen']} x{g['pcie_width']}"
            f.observed = f"{link} (max Gen{g['pcie_gen_max']} x{g['pcie_width_max']}): {f.observed}"
        findings += found
        for node, g, cur in pcie:  # narrower than the GPU's own max: named even alone
            if g.get("pcie_width_max") and g["pcie_width"] < g["pcie_width_max"]:
                findings.append(
                    Finding(
                        "gpu",
                        f"{node} {g['pci']}",
                        "PCIe link",
                        cur,
                        "Gb/s",
                        None,
                        f"GPU{g['index']} {g['pci']} PCIe x{g['pcie_width']} of"
                        f" x{g['pcie_width_max']} (Gen{g['pcie_gen']})",
                        f"x{g['pcie_width_max']} as the GPU and slot allow",
                        [node],
                        g["pci"],
                    )
                )
    ar = [
        Unit(n["node"], "node", None, n["allreduce"]["busbw_gb_s"])
        for n in nodes
        if (n.get("allreduce") or {}).get("busbw_gb_s")
    ]
    if len(ar) >= 2:
        found, numbers["node_allreduce"] = judge_units(ar, r["node_allreduce"], "node_allreduce")
        findings += found
    for launch in record.get("ranks") or []:
        units = [
            Unit(x["host"], f"rank{x['rank']}", x.get("bus_id"), x["images_per_sec"])
            for x in launch["ranks"]
        ]
        if len(units) >= 2:
            found, numbers[f"rank@{launch['label']}"] = judge_units(units, r["rank"], "rank")
            findings += found
    return _merge(findings), numbers
