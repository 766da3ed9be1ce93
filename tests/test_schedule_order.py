"""The suite's longest-first order (tests/plugins/schedule.py) stays honest.

A listed module that was renamed or removed would silently lose its place at the front,
and its long tests would again start last: the list must name modules that exist.
"""

from __future__ import annotations

from rackcert.paths import REPO_ROOT
from tests.plugins.schedule import LONGEST_MODULES, longest_first, unit_of


def test_every_listed_module_exists() -> None:
    missing = [m for m in LONGEST_MODULES if not (REPO_ROOT / m).is_file()]
    assert not missing, f"tests/plugins/schedule.py lists modules that are gone: {missing}"


def test_longest_modules_first_each_module_together_in_its_own_order() -> None:
    longest, second = sorted(LONGEST_MODULES, key=lambda m: -LONGEST_MODULES[m])[:2]
    nodeids = [
        "tests/test_unlisted_a.py::test_one",
        f"{second}::test_b1",
        f"{longest}::test_x",
        "tests/test_unlisted_a.py::test_two",
        "tests/test_unlisted_b.py::test_one",
        f"{longest}::test_y",
        f"{second}::test_b2",
    ]
    order = longest_first(nodeids)
    assert order[:4] == [
        f"{longest}::test_x",
        f"{longest}::test_y",
        f"{second}::test_b1",
        f"{second}::test_b2",
    ], order
    units = [unit_of(n) for n in order]
    assert units == sorted(units, key=units.index), units  # every module contiguous
    # Unlisted modules keep their collection order, after every listed one.
    assert order[-3:] == [
        "tests/test_unlisted_a.py::test_one",
        "tests/test_unlisted_a.py::test_two",
        "tests/test_unlisted_b.py::test_one",
    ]
