"""The house has no import cycle, and the layers import only downwards.

Why a test: a cycle (provision/apply.py and provision/lifecycle.py once imported each other)
means two modules cannot be understood, changed or tested apart, and the next change makes it
worse. Every import statement counts, the lazy ones inside functions too: a lazy import hides
a cycle from Python, not from the reader. The layering is DESIGN.md's: `provision` and
`validation` import the spine (`rackcert.core`), never each other; the floors are
pyproject.toml's import-linter contract, which this test reads and checks with its own graph.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.support.import_graph import PACKAGES, ROOT


def test_import_linter_breaks_on_a_planted_back_import(tmp_path):
    """The CI step fails when the spine imports the lab: shown on a copy of the tree."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    # `rackcert` is a namespace package, and the venv's editable install puts a checkout on
    # sys.path (this one, or another worktree's): every entry holding a rackcert package is
    # dropped, so that the copy alone is the package import-linter reads.
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "sys.path = [p for p in sys.path if p and not Path(p, 'rackcert', 'core').is_dir()]\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from importlinter.cli import lint_imports_command\n"
        "sys.argv = ['lint-imports', '--no-cache']\n"
        "sys.exit(lint_imports_command())\n"
    )

    def lint_imports() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True
        )

    kept = lint_imports()
    assert kept.returncode == 0, kept.stdout + kept.stderr
    with (tmp_path / "rackcert" / "core" / "pci.py").open("a") as f:
        f.write("\nimport rackcert.lab.twin  # planted\n")
    broken = lint_imports()
    assert broken.returncode == 1
    assert "rackcert.core is not allowed to import rackcert.lab" in broken.stdout
    # pyVmomi outside provision, even lazily inside a function, breaks the adapter's contract.
    (tmp_path / "rackcert" / "core" / "pci.py").write_text(
        (ROOT / "rackcert" / "core" / "pci.py").read_text()
        + "\n\ndef _planted():\n    from pyVmomi import vim  # planted\n\n    return vim\n"
    )
    outside = lint_imports()
    assert outside.returncode == 1
    assert "rackcert is not allowed to import pyVmomi" in outside.stdout
    assert "rackcert.core.pci -> pyVmomi" in outside.stdout
