"""How an observed value is compared with the spec's: versions, branches, GPU model names."""

from __future__ import annotations

import fnmatch
import re


def _parts(version: str) -> list[int]:
    return [int(p) for p in re.findall(r"\d+", version)]


def version_matches(observed: str, wanted: str) -> bool:
    """`470.82.01` pins exactly; `470` or `470.*` is a branch; `5.4-3.1.0.0` compares as text.

    >>> version_matches("470.82.01", "470"), version_matches("535.54.03", "470.82.01")
    (True, False)
    """
    observed, wanted = observed.strip(), wanted.strip()
    if any(ch in wanted for ch in "*?["):
        return fnmatch.fnmatchcase(observed, wanted)
    if observed == wanted:
        return True
    return observed.startswith(wanted) and observed[len(wanted)] in ".-"


def version_at_least(observed: str, wanted: str) -> bool:
    """Numeric comparison, component by component: 12.2 >= 11.4."""
    a, b = _parts(observed), _parts(wanted)
    width = max(len(a), len(b))
    return a + [0] * (width - len(a)) >= b + [0] * (width - len(b))


def driver_branch(version: str) -> str:
    """An NVIDIA driver's release branch: its major number ('' when it has none).

    >>> driver_branch("550.127.05"), driver_branch("535.154.02-1OEM.702.0.0.17630552")
    ('R550', 'R535')
    """
    major = version.strip().split(".", 1)[0].split("-", 1)[0]
    return f"R{major}" if major.isdigit() else ""


def _tokens(name: str) -> set[str]:
    words = set(re.findall(r"[a-z0-9]+", name.lower())) - {"nvidia", "tesla", "geforce"}
    return {w for w in words if w}


def model_matches(observed: str, wanted: str) -> bool:
    """GPU names as nvidia-smi prints them against the spec's model, word order ignored.

    'NVIDIA A100 80GB PCIe' and 'A100-PCIE-80GB' both match 'NVIDIA A100 PCIe 80GB';
    'NVIDIA H200' matches 'NVIDIA H200' and 'NVIDIA H200 141GB' (one set of words holds
    the other), never 'NVIDIA H100'.
    """
    seen, want = _tokens(observed), _tokens(wanted)
    if not seen or not want:
        return False
    return seen <= want or want <= seen
