"""The tests' layout holds: tests by kind in two folders, what they share in tests/support/.

Why: the folder is the marker (tests/support/plugins/markers.py) and the unit guard applies by
folder, so a test module elsewhere would be neither; and a test module importing another
would tie two tests' helpers together where nobody looks for them (tests/support/ is where
shared helpers live, under public names).
"""

from __future__ import annotations

import ast

from tests.support.paths import TESTS

KINDS = ("unit", "integration")


def test_test_modules_live_in_a_kind_folder_only() -> None:
    stray = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("test_*.py")
        if p.relative_to(TESTS).parts[0] not in (*KINDS, "support")
    ]
    assert stray == [], f"move these to tests/unit/ or tests/integration/: {stray}"


def test_no_test_module_imports_another() -> None:
    """What two test modules share is in tests/support/; a module may name itself (a child
    process it starts imports it back)."""
    wrong = []
    for kind in KINDS:
        for path in sorted((TESTS / kind).glob("*.py")):
            # itself, and the guard's test its folder's conftest (the hooks it runs)
            allowed = {f"tests.{kind}.{path.stem}", f"tests.{kind}.conftest"}
            for node in ast.walk(ast.parse(path.read_text())):
                names: list[str] = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                tests = ("tests.unit.", "tests.integration.")
                wrong += [
                    f"{path.relative_to(TESTS)} imports {name}"
                    for name in names
                    if name.startswith(tests) and name not in allowed
                ]
    assert wrong == [], wrong


def test_support_imports_no_test_module() -> None:
    wrong = [
        str(path.relative_to(TESTS))
        for path in sorted((TESTS / "support").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith(("tests.unit", "tests.integration"))
    ]
    assert wrong == [], wrong
