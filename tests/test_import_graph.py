"""The house has no import cycle, and the layers import only downwards.

Why a test: a cycle (provision/apply.py and provision/lifecycle.py once imported each other)
means two modules cannot be understood, changed or tested apart, and the next change makes it
worse. Every import statement counts, the lazy ones inside functions too: a lazy import hides
a cycle from Python, not from the reader. The layering is DESIGN.md's: `provision` and
`validation` import the spine (`rackcert`), never each other, and the spine imports neither
except from the CLI (`rackcert.cli`, which wires the stages) and the lab (below).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rackcert", "provision", "validation")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from provision import lifecycle` imports the submodule when there is one.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


# The spine's parts allowed above the stages: the CLI wires them together, and the lab's guest
# agent plays the VMs' guests by reading what provision wrote into guestinfo.
SPINE_MAY_REACH = {"rackcert.cli", "rackcert.lab"}


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("provision", "validation"),
        ("validation", "provision"),
        ("rackcert", "provision"),
        ("rackcert", "validation"),
    ],
)
def test_layers_import_downwards(lower, upper):
    graph = _graph()
    wrong = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.split(".")[0] == lower
        and not any(name == p or name.startswith(p + ".") for p in SPINE_MAY_REACH)
        for target in targets
        if target.split(".")[0] == upper
    )
    assert wrong == []
