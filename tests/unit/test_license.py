"""pyproject.toml promises Apache-2.0: the licence text ships with the source."""

from __future__ import annotations

import tomllib

from rackcert.core.paths import REPO_ROOT


def test_license_file_is_the_apache_2_text_pyproject_names():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}
    text = (REPO_ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
