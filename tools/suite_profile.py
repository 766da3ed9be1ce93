"""Where a test run's time went, per module: a table of module, tests, seconds, share.

Why: the suite's length is set by a few modules, and which ones changes as tests are added;
a before/after table shows what a change to the suite bought. It reads what a run already
records, so nothing is run twice:

- the `--durations=0` report pytest prints (save the output: `pytest -n 2 -q --durations=0
  -vv | tee run.txt`; `-vv` lists the short phases too), or
- a JUnit XML (`pytest --junitxml=run.xml`; each case's time is its setup, call and
  teardown).

Seconds are the tests' own time summed per module (setup + call + teardown), so under
`-n 2` the column adds up to about twice the wall time; the share is of that sum.

Usage: .venv/bin/python tools/suite_profile.py RUN.txt|RUN.xml [--top N] [--schedule S]
  --schedule S  also print modules over S seconds as tests/support/plugins/schedule.py's
                LONGEST_MODULES lines
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# "12.34s call     tests/unit/test_x.py::test_y[param]"
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S+?\.py)::(\S.*?)\s*$")


@dataclass
class Module:
    """One module's share of the run."""

    seconds: float = 0.0
    tests: set[str] = field(default_factory=set)


def from_durations(text: str) -> dict[str, Module]:
    """Per module, from pytest's `--durations` lines (other lines are ignored)."""
    modules: dict[str, Module] = defaultdict(Module)
    for line in text.splitlines():
        m = DURATION.match(line)
        if m:
            seconds, _phase, module, test = m.groups()
            modules[module].seconds += float(seconds)
            modules[module].tests.add(test)
    return dict(modules)


def from_junit(path: Path) -> dict[str, Module]:
    """Per module, from a JUnit XML: classname `tests.unit.test_x` is tests/unit/test_x.py."""
    modules: dict[str, Module] = defaultdict(Module)
    for case in ET.parse(path).iter("testcase"):
        classname = case.get("classname", "")
        parts = classname.split(".")
        # a test class adds its name after the module: keep up to the test_ module
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        module = "/".join(parts) + ".py" if parts else classname
        modules[module].seconds += float(case.get("time") or 0.0)
        modules[module].tests.add(f"{classname}::{case.get('name')}")
    return dict(modules)


def table(modules: dict[str, Module], top: int | None = None) -> str:
    """The modules, longest first, and a total line."""
    total = sum(m.seconds for m in modules.values()) or 1.0
    rows = sorted(modules.items(), key=lambda kv: (-kv[1].seconds, kv[0]))
    shown = rows[:top] if top else rows
    width = max([len("module"), *(len(name) for name, _ in shown)])
    lines = [f"{'module':<{width}}  {'tests':>5}  {'seconds':>8}  {'share':>6}"]
    for name, m in shown:
        lines.append(
            f"{name:<{width}}  {len(m.tests):>5}  {m.seconds:>8.1f}  {m.seconds / total:>6.1%}"
        )
    if len(shown) < len(rows):
        rest = rows[len(shown) :]
        seconds = sum(m.seconds for _, m in rest)
        tests = sum(len(m.tests) for _, m in rest)
        label = f"({len(rest)} more modules)"
        lines.append(f"{label:<{width}}  {tests:>5}  {seconds:>8.1f}  {seconds / total:>6.1%}")
    tests = sum(len(m.tests) for m in modules.values())
    lines.append(f"{'total':<{width}}  {tests:>5}  {total:>8.1f}  {1:>6.1%}")
    return "\n".join(lines)


def schedule_lines(modules: dict[str, Module], over: float) -> str:
    """LONGEST_MODULES entries for the modules over `over` seconds, longest first."""
    rows = sorted(modules.items(), key=lambda kv: -kv[1].seconds)
    return "\n".join(f'    "{name}": {round(m.seconds)},' for name, m in rows if m.seconds > over)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run's --durations=0 output, or a JUnit XML")
    parser.add_argument("--top", type=int, default=None, help="show the N longest modules")
    parser.add_argument("--schedule", type=float, default=None, metavar="S")
    args = parser.parse_args(argv)
    try:
        if args.run.suffix == ".xml":
            modules = from_junit(args.run)
        else:
            modules = from_durations(args.run.read_text(errors="replace"))
    except (OSError, ET.ParseError) as exc:
        print(f"suite_profile: cannot read {args.run}: {exc}", file=sys.stderr)
        return 2
    if not modules:
        print(
            f"suite_profile: no test durations in {args.run} (run with --durations=0)",
            file=sys.stderr,
        )
        return 2
    print(table(modules, args.top))
    if args.schedule is not None:
        print(schedule_lines(modules, args.schedule))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
