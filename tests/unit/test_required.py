"""A component set-up installs is required by the tests that use it, never skipped for."""

from __future__ import annotations

import re

import pytest

from tests.support.paths import TESTS
from tests.support.required import require


def test_a_missing_component_fails_the_test_and_names_the_set_up_step() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"40-horovod\.sh") as failed:
        require("horovod.not_a_module_anywhere")
    assert not isinstance(failed.value, pytest.skip.Exception)


def test_an_installed_component_is_returned() -> None:
    assert require("json.decoder").__name__ == "json.decoder"


def test_no_test_skips_when_something_set_up_installs_is_missing() -> None:
    """test_bench_start_sync skipped without Horovod where test_bench_horovod failed."""
    skipping = [
        f"{path.relative_to(TESTS.parent)}:{n}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != "test_required.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bimportorskip\(", line)
    ]
    assert not skipping, f"use tests.support.required.require, which fails: {skipping}"
