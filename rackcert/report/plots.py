"""The report's figures as inline SVG text, drawn with matplotlib (imported lazily).

Two figures, as in the seed: the weak-scaling speedup against linear (its
Figure 2) and the allreduce bus bandwidth over message sizes against the
link's line rate; and the localisation's n x n link heat map (issue 34).
Text stays text in the SVG (searchable, crisp in the PDF) and the output is
deterministic for the same record.
"""

from __future__ import annotations

import io
import re

from rackcert.core.localisation import Localisation
from rackcert.core.results import AllreduceResult, ScalingResult
from rackcert.report.record import ReferenceFigure

_BLUE, _GREY, _ORANGE, _RED = "#1f5fa8", "#888888", "#d9822b", "#b3261e"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "rackcert",
            "font.family": "DejaVu Sans",
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
            # Titles carry recorded names (a model called "$x"): text, never mathtext to parse.
            "text.parse_math": False,
        }
    )
    import matplotlib.pyplot as plt

    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.clf()
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and doctype: inlined in HTML
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)


def scaling_axis(result: ScalingResult) -> str:
    """'nodes' when each point has its own node count (the seed's multi-node table), else 'gpus'
    (a one-machine run scales over GPUs of one node)."""
    counts = [p.nodes for p in result.points]
    return "nodes" if len(set(counts)) == len(counts) else "gpus"


def scaling_svg(result: ScalingResult, reference: list[ReferenceFigure] | None = None) -> str:
    """Speedup vs nodes (or GPUs): measured, linear, and the reference's published figures.

    The reference figures are per node with one GPU each (the seed's Table 2), so they sit at
    the same x whichever axis is used.
    """
    plt = _pyplot()
    axis = scaling_axis(result)
    points = sorted(result.points, key=lambda p: (p.nodes, p.gpus))
    fig, ax = plt.subplots(figsize=(6.2, 3.8))
    nodes = [p.nodes if axis == "nodes" else p.gpus for p in points]
    top = max(nodes + [r.nodes for r in reference or []] + [1])
    ax.plot([1, top], [1, top], ls="--", color=_GREY, lw=1.2, label="linear")
    if reference:
        ref = sorted(reference, key=lambda r: r.nodes)
        base = next((r.images_per_sec for r in ref if r.nodes == 1), ref[0].images_per_sec)
        ax.plot(
            [r.nodes for r in ref],
            [r.images_per_sec / base for r in ref],
            ls=":",
            marker="s",
            color=_ORANGE,
            lw=1.2,
            label="reference (published)",
        )
    speedups = [p.speedup for p in points]
    ax.plot(nodes, speedups, marker="o", color=_BLUE, lw=2, label="measured")
    for n, s, p in zip(nodes, speedups, points, strict=True):
        ax.annotate(
            f"{s:.2f}x ({p.efficiency:.0%})",
            (n, s),
            textcoords="offset points",
            xytext=(6, -12),
            fontsize=8,
            color=_BLUE,
        )
    ax.set_xticks(sorted(set(nodes + [r.nodes for r in reference or []])))
    ax.set_xlabel("nodes" if axis == "nodes" else "GPUs")
    ax.set_ylabel("speedup (x)")
    ax.set_title(f"{result.model} weak-scaling speedup vs linear", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", frameon=False, fontsize=8)
    return _svg(fig)


def _size_label(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def allreduce_svg(result: AllreduceResult) -> str:
    """busbw (and algbw) over message sizes, log2 x axis, line rate as a ceiling."""
    plt = _pyplot()
    points = sorted(result.points, key=lambda p: p.size_bytes)
    fig, ax = plt.subplots(figsize=(6.2, 3.8))
    sizes = [p.size_bytes for p in points]
    ax.plot(
        sizes, [p.busbw_gbps for p in points], marker="o", ms=3, color=_BLUE, lw=2, label="busbw"
    )
    ax.plot(sizes, [p.algbw_gbps for p in points], ls="--", color=_GREY, lw=1, label="algbw")
    bad = [p for p in points if not p.correct]
    if bad:
        ax.scatter(
            [p.size_bytes for p in bad],
            [p.busbw_gbps for p in bad],
            color=_RED,
            zorder=5,
            label="wrong result",
        )
    peak = max((p.busbw_gbps for p in points), default=0.0)
    if result.line_rate_gbps and peak < 0.05 * result.line_rate_gbps / 8:
        # Far below the link (a CPU or loopback run): a ceiling line would flatten the curve.
        ax.text(
            0.99,
            0.02,
            f"line rate {result.line_rate_gbps:g} Gb/s off scale",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            color=_ORANGE,
        )
    elif result.line_rate_gbps:
        rate = result.line_rate_gbps / 8
        ax.axhline(
            rate,
            color=_ORANGE,
            ls=":",
            lw=1.2,
            label=f"line rate {result.line_rate_gbps:g} Gb/s = {rate:g} GB/s",
        )
    ax.set_xscale("log", base=2)
    if sizes:
        ticks = [s for i, s in enumerate(sizes) if i % 4 == 0] or sizes
        ax.set_xticks(ticks, [_size_label(s) for s in ticks], rotation=30, fontsize=8)
    ax.set_xlabel("message size")
    ax.set_ylabel("GB/s")
    ax.set_title(
        f"allreduce bus bandwidth ({result.backend}, {result.world_size} ranks, {result.dtype})",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", frameon=False, fontsize=8)
    return _svg(fig)


def link_heatmap_svg(loc: Localisation) -> str:
    """The n x n link picture: each cell the pair's Gb/s (lower of the two directions), colour
    from the rack's own range, the links a finding names outlined in red and marked, the
    nodes a finding names in red on both axes. A grey cell was not measured (ring pattern)."""
    return _svg(link_heatmap_figure(loc))


def link_heatmap_figure(loc: Localisation):  # noqa: ANN201 - a matplotlib Figure
    """The heat map as a matplotlib figure (the report inlines it as SVG; tools save a PNG)."""
    import numpy as np

    plt = _pyplot()
    names, matrix = loc.link_matrix()
    n = len(names)
    values = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    size = min(1.6 + 0.42 * n, 9.0)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#eeeeee")
    measured = values[~np.isnan(values)]
    top = float(measured.max()) if measured.size else 1.0
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0.0, vmax=top)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label("Gb/s")
    index = {name: i for i, name in enumerate(names)}
    for link in loc.named_links():
        ends = sorted(link)
        if len(ends) != 2 or ends[0] not in index or ends[1] not in index:
            continue
        i, j = index[ends[0]], index[ends[1]]
        for x, y in ((i, j), (j, i)):
            ax.add_patch(
                plt.Rectangle((y - 0.5, x - 0.5), 1, 1, fill=False, ec=_RED, lw=2.4, zorder=4)
            )
            ax.text(y, x + 0.12, "x", ha="center", va="center", color="white", zorder=5)
    if n <= 12:  # the figures themselves, where they fit in a cell
        for x in range(n):
            for y in range(n):
                if not np.isnan(values[x, y]):
                    dark = values[x, y] < 0.55 * top
                    ax.text(y, x - 0.28, f"{values[x, y]:.3g}", ha="center", va="center",
                            fontsize=6.5, color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(n), names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(n), names, fontsize=8)
    bad_nodes = set(loc.named_nodes())
    for label in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
        if label.get_text() in bad_nodes:
            label.set_color(_RED)
            label.set_fontweight("bold")
    ax.spines[["top", "right"]].set_visible(True)
    ax.set_title(f"link bandwidth, {n} nodes (red: named by the verdict)", fontsize=10)
    return fig


def burnin_node_svg(node: str, t: list[float], gpus: dict[str, dict[str, list]]) -> str:
    """One node's burn-in: SM clock, power and temperature over time, a line per GPU."""
    plt = _pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 6.0), sharex=True)
    minutes = [x / 60 for x in t]
    for ax, (key, label) in zip(
        axes,
        (("sm_mhz", "SM clock (MHz)"), ("power_w", "power (W)"), ("temp_c", "temp (C)")),
        strict=True,
    ):
        for g, col in sorted(gpus.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
            ys = [float("nan") if v is None else v for v in col.get(key, [])]
            ax.plot(minutes[: len(ys)], ys, linewidth=1, label=f"GPU{g}")
        ax.set_ylabel(label)
    axes[0].set_title(f"{node}: burn-in", loc="left")
    axes[-1].set_xlabel("minutes from the start")
    if len(gpus) > 1:
        axes[0].legend(fontsize=7, ncol=min(8, len(gpus)), loc="lower left")
    fig.tight_layout()
    return _svg(fig)
