"""What more than one test module needs from the old test_runs.py: tests/integration/test_runs.py,
tests/unit/test_runs.py.
"""

from __future__ import annotations

import pytest

from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from tests.support.spec_helpers import LAB


@pytest.fixture
def run(tmp_path):
    loaded = load_spec(LAB)
    return RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)
