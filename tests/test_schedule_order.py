"""The suite's longest-first order (tests/plugins/schedule.py) stays honest.

A listed module that was renamed or removed would silently lose its place at the front,
and its long tests would again start last: the list must name modules that exist.
"""

from __future__ import annotations

from rackcert.paths import REPO_ROOT
from tests.plugins.schedule import LONGEST_MODULES, TOGETHER, longest_first, unit_of


def test_every_listed_module_exists() -> None:
    missing = [m for m in [*LONGEST_MODULES, *TOGETHER] if not (REPO_ROOT / m).is_file()]
    assert not missing, f"tests/plugins/schedule.py lists modules that are gone: {missing}"


def test_longest_units_first_each_unit_together_in_its_own_order() -> None:
    longest = max(LONGEST_MODULES, key=lambda m: LONGEST_MODULES[m])
    grouped = sorted(TOGETHER)
    nodeids = [
        "tests/test_unlisted_a.py::test_one",
        f"{grouped[1]}::test_b1",
        f"{longest}::test_x",
        "tests/test_unlisted_a.py::test_two",
        f"{grouped[0]}::test_a1",
        "tests/test_unlisted_b.py::test_one",
        f"{longest}::test_y",
        f"{grouped[1]}::test_b2",
    ]
    order = longest_first(nodeids)
    # The group is one unit, placed by the sum of its modules; module by module within it
    # (a module fixture is set up once), each module's tests in their own order.
    alone = [f"{longest}::test_x", f"{longest}::test_y"]
    group = [f"{grouped[1]}::test_b1", f"{grouped[1]}::test_b2", f"{grouped[0]}::test_a1"]
    heavier = sum(LONGEST_MODULES.get(m, 0) for m in grouped) > LONGEST_MODULES[longest]
    assert order[:5] == (group + alone if heavier else alone + group), order
    units = [unit_of(n) for n in order]
    assert units == sorted(units, key=units.index), units  # every unit contiguous
    # Unlisted modules keep their collection order, after every listed one.
    assert order[-3:] == [
        "tests/test_unlisted_a.py::test_one",
        "tests/test_unlisted_a.py::test_two",
        "tests/test_unlisted_b.py::test_one",
    ]
