"""The house has no import cycle, and the layers import only downwards.

Why a test: a cycle (provision/apply.py and provision/lifecycle.py once imported each other)
means two modules cannot be understood, changed or tested apart, and the next change makes it
worse. Every import statement counts, the lazy ones inside functions too: a lazy import hides
a cycle from Python, not from the reader. The layering is DESIGN.md's: `provision` and
`validation` import the spine (`rackcert.core`), never each other; the floors are
pyproject.toml's import-linter contract, which this test reads and checks with its own graph.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

from tests.support.import_graph import PACKAGES, ROOT


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


@functools.cache  # every test reads the same tree: parsed once per process
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


def _floors() -> list[list[str]]:
    """pyproject.toml's layer contract: one list of sibling packages a floor, highest first."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers"]
    return [[part.strip() for part in floor.split("|")] for floor in layers]


def _floor_of(module: str, floors: list[list[str]]) -> tuple[int, str] | None:
    for level, siblings in enumerate(floors):
        for package in siblings:
            if module == package or module.startswith(package + "."):
                return level, package
    return None


def test_every_module_stands_on_a_floor():
    """A module outside every floor escapes the contracts: a new package must be placed."""
    floors = _floors()
    loose = [m for m in _graph() if m != "rackcert" and _floor_of(m, floors) is None]
    assert loose == []


def test_imports_go_down_the_floors_and_never_sideways():
    """The contracts, read by this test's own graph (lazy imports included): import-linter
    judges the same in .ci/run; two readers of one rule."""
    floors = _floors()
    wrong = []
    for name, targets in _graph().items():
        here = _floor_of(name, floors)
        for target in targets:
            there = _floor_of(target, floors)
            if here is None or there is None or here[1] == there[1]:
                continue
            if there[0] < here[0] or there[0] == here[0]:
                wrong.append(f"{name} -> {target}")
    assert sorted(wrong) == []


def _imported_names(path: Path, package: str) -> set[str]:
    """Every absolute module name `path` imports, outside packages included."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            out.add(base)
    return out


def _outside_contracts() -> list[dict]:
    """pyproject.toml's forbidden contracts on outside packages (pyVmomi): their sources and
    the packages only the adapter may import."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return [
        c
        for c in contracts["contracts"]
        if c["type"] == "forbidden"
        and not any(m.split(".")[0] in PACKAGES for m in c["forbidden_modules"])
    ]


def test_only_the_vsphere_adapter_imports_pyvmomi():
    """The `vsphere-adapter` contract, read by this test's own walk (lazy imports included):
    pyVmomi is provision's alone, and the contract covers every other root package."""
    (contract,) = [c for c in _outside_contracts() if c["id"] == "vsphere-adapter"]
    assert {"pyVmomi", "pyVim"} <= set(contract["forbidden_modules"])
    assert set(contract["source_modules"]) == set(PACKAGES) - {"provision"}
    wrong = []
    for name, path in _modules().items():
        if not any(name == s or name.startswith(s + ".") for s in contract["source_modules"]):
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for target in _imported_names(path, package):
            if target.split(".")[0] in contract["forbidden_modules"]:
                wrong.append(f"{name} -> {target}")
    assert sorted(wrong) == []
