"""The generated references in docs/ match the code they are generated from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "tools/gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spec_reference_is_current():
    gen = _generator()
    assert gen.SPEC_DOC.read_text() == gen.spec_reference(), "run tools/gen_reference.py"
    assert "`nvlink_peer`" in gen.SPEC_DOC.read_text()


def test_checks_reference_is_current():
    gen = _generator()
    text = gen.CHECKS_DOC.read_text()
    assert text == gen.checks_reference(), "run tools/gen_reference.py"
    for check_id in ("gpu.driver", "gpu.nvlink.active", "hv."):
        assert check_id in text


FLOORS_MARK = "<!-- floors: checked against pyproject.toml's import-linter contract -->"


FLOORS_MARK = "<!-- floors: checked against pyproject.toml's import-linter contract -->"


def _contract_floors() -> list[list[str]]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return [[part.strip() for part in floor.split("|")] for floor in layers]


def _documented_floors() -> list[list[str]]:
    """docs/architecture.md's floors table: one row a floor, packages in backticks."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split(FLOORS_MARK)[1].strip().split("\n\n")[0]
    rows = table.splitlines()[2:]
    floors = []
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        floors.append(re.findall(r"`([a-z_.]+)`", cells[1]))
    return floors


def test_architecture_floors_table_is_the_import_contract():
    assert _documented_floors() == _contract_floors(), (
        "docs/architecture.md's floors table and pyproject.toml's [tool.importlinter] layers"
        " differ: change both"
    )
