"""Longest first under xdist: whole modules go to the workers, the known-longest modules first.

Why: `pytest -n 2` with xdist's default `--dist load` hands each worker a block of
consecutive tests, then tops it up. Where a long test falls is chance: a 4-minute test
that starts late runs alone while the other worker sits idle, and a module whose tests
share a module fixture (a Slurm rack, a bench run) may be set up on both workers. Here
each module (or TOGETHER group of modules sharing a session fixture) is one unit of work
(as xdist's `--dist loadfile`), and the units go out longest first, so the short tail
fills the gaps at the end (longest-processing-time scheduling). Modules not listed keep
their collection order after the listed ones.

LONGEST_MODULES holds seconds per module (call + setup + teardown) from one full run with
`--durations=0`; only the order matters, so the figures are refreshed when the order
changes, not on every run. tests/unit/test_schedule_order.py fails when a listed (or
TOGETHER) module no longer exists. Without -n, or with an explicit `--dist` other than
load, nothing changes but the order of modules.
"""

from __future__ import annotations

from typing import Any

import pytest

# Seconds per module: the full suite with `-n 2 --durations=0` on a 2-core machine, quiet
# but for the suite itself, 2026-12-06 evening (1,085 tests, 12 min 42 s; the site group's
# configure runs count in test_bench_nodes' setup, which met the session fixture first).
# Modules above ~12 s; the rest in collection order.
LONGEST_MODULES: dict[str, int] = {
    # Measured alone at a load average of 4-6 (2026-12-06 night): four nodes rolled twice, 511;
    # three nodes since (2026-12-07): 1,107 s against 1,342 side by side, scaled.
    "tests/integration/test_upgrade_lab.py": 421,
    "tests/integration/test_bench_nodes.py": 125,
    "tests/integration/test_bench_localise_lab.py": 114,
    # 472 s in a 33-min run (2026-12-07), unlisted until then: on this table's scale ~236.
    # Its journeys and test_configure_versions' run one after another: run at once (tried the
    # same day) they cost the same CPU and put three Ansible runs beside the other worker's
    # shaped-link measurements (suspected in a confirmation that read 0.75x of the line).
    "tests/integration/test_families_driver.py": 236,
    # The Slurm group (TOGETHER below) since one join serves it (2026-12-07, issue 55): the
    # join's setup counts in test_bench_localise_srun (the group's first module), no longer
    # in test_slurm_lab; estimated from the old figures (the morning's load was 15-70, too
    # noisy to measure the order from).
    "tests/integration/test_bench_localise_srun.py": 80,
    "tests/integration/test_slurm_localise.py": 79,
    "tests/integration/test_e2e_bootstrap.py": 77,
    "tests/integration/test_configure_versions.py": 94,
    "tests/integration/test_slurm_lab.py": 40,
    "tests/integration/test_provision_pace.py": 56,
    "tests/integration/test_bench_gloo.py": 42,
    "tests/integration/test_configure_sources.py": 36,
    # 16 s, then a second horovodrun (4 ranks, the wait where ranks outnumber cores): +20 s alone
    # at a load of 8-10 (2026-12-07)
    "tests/integration/test_bench_horovod.py": 36,
    "tests/integration/test_twin_conformance.py": 35,
    "tests/integration/test_vsphere_provision.py": 30,
    "tests/integration/test_rehearse.py": 28,
    "tests/integration/test_spec_fuzz.py": 23,
    "tests/integration/test_configure_faults.py": 22,
    "tests/integration/test_configure_lint.py": 20,
    "tests/integration/test_lab_guest_agent.py": 18,
    "tests/integration/test_configure_nccl_tests.py": 18,
    "tests/integration/test_configure_vgpu_license.py": 15,
    "tests/integration/test_bench_ssh.py": 15,
    "tests/integration/test_upgrade_slurm.py": 15,
    "tests/integration/test_host_keys.py": 14,
    "tests/integration/test_cli_help_pipe.py": 14,
    "tests/integration/test_configure_sshhosts.py": 13,
    "tests/integration/test_report_secrets.py": 13,
    "tests/integration/test_configure_site.py": 2,
}


# Modules that go to one worker as one unit, one after the other.
TOGETHER: dict[str, str] = {
    # One Slurm rack (session-scoped, tests/support/plugins/slurm.py: four nodes, one join) serves
    # all four: on one worker it is set up once; split over two workers, each would build its own.
    "tests/integration/test_bench_localise_srun.py": "slurm",
    "tests/integration/test_slurm_lab.py": "slurm",
    "tests/integration/test_slurm_localise.py": "slurm",
    "tests/integration/test_upgrade_slurm.py": "slurm",
    # Two hosts configured by site.yml (session-scoped, tests/support/plugins/site.py): the
    # configure
    # test judges the runs, the bench on the nodes runs there.
    "tests/integration/test_bench_nodes.py": "site",
    "tests/integration/test_configure_site.py": "site",
}


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """`tests/test_x.py::test_y[param]` -> `tests/test_x.py`, or its TOGETHER group."""
    return TOGETHER.get(_module(nodeid), _module(nodeid))


def _weight(unit: str) -> int:
    members = [m for m, group in TOGETHER.items() if group == unit] or [unit]
    return sum(LONGEST_MODULES.get(m, 0) for m in members)


def longest_first(nodeids: list[str]) -> list[str]:
    """The order the workers get them: listed units by weight, then the rest as collected;
    a unit's tests stay together, module by module, each in its own order."""
    first: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first.setdefault(unit_of(nodeid), i)
        first.setdefault(_module(nodeid), i)
    return sorted(
        nodeids,
        key=lambda n: (-_weight(unit_of(n)), first[unit_of(n)], first[_module(n)]),
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = {nodeid: i for i, nodeid in enumerate(longest_first([i.nodeid for i in items]))}
    items.sort(key=lambda item: order[item.nodeid])


def _scheduler_class() -> Any:
    from xdist.scheduler import LoadFileScheduling

    class LongestFirstScheduling(LoadFileScheduling):  # type: ignore[misc]
        """xdist's loadfile scheduling (one module, or TOGETHER group, per unit) in the
        collection's order.

        xdist would otherwise sort the units by how many tests they hold
        (--loadscope-reorder), which says nothing about how long they take."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            config.option.loadscopereorder = False
            super().__init__(config, log)

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return LongestFirstScheduling


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Ours for xdist's default distribution (`-n N` gives `--dist load`); any other
    explicit `--dist` is left to xdist (None: the next implementation decides)."""
    if config.getvalue("dist") != "load":
        return None
    return _scheduler_class()(config, log)
