"""The generated references in docs/ match the code they are generated from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
