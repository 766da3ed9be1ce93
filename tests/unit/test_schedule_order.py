"""The suite's longest-first order (tests/support/plugins/schedule.py) stays honest.

A listed module that was renamed or removed would silently lose its place at the front,
and its long tests would again start last: the list must name modules that exist.
"""

from __future__ import annotations

from rackcert.core.paths import REPO_ROOT
from tests.support.plugins.schedule import LONGEST_MODULES, TOGETHER, longest_first, unit_of


def test_every_listed_module_exists() -> None:
    missing = [m for m in [*LONGEST_MODULES, *TOGETHER] if not (REPO_ROOT / m).is_file()]
    assert not missing, f"tests/support/plugins/schedule.py lists modules that are gone: {missing}"


def test_longest_modules_first_each_module_together_in_its_own_order() -> None:
    alone = [m for m in LONGEST_MODULES if m not in TOGETHER]  # a unit of their own each
    longest, second = sorted(alone, key=lambda m: -LONGEST_MODULES[m])[:2]
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


def test_together_modules_are_one_unit_and_keep_their_module_order() -> None:
    a, b = [m for m, group in TOGETHER.items() if group == "slurm"][:2]
    nodeids = [f"{b}::test_b1", "tests/test_unlisted_a.py::test_one", f"{a}::test_a1",
               f"{b}::test_b2", f"{a}::test_a2"]  # fmt: skip
    order = longest_first(nodeids)
    # One unit (one worker, so one session fixture), weighed as both modules together;
    # inside it, module by module in collection order, each module's tests in their order.
    assert unit_of(f"{a}::x") == unit_of(f"{b}::y") == "slurm"
    assert order == [f"{b}::test_b1", f"{b}::test_b2", f"{a}::test_a1", f"{a}::test_a2",
                     "tests/test_unlisted_a.py::test_one"]  # fmt: skip
