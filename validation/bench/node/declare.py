"""A benchmark's option, declared once: what the CLI, BenchOptions and the worker read.

Why here, under node/: a unit (validation.bench.units) declares its options in its own
file, and three places read that one declaration: `rackcert bench`'s typer options
(rackcert.cli.unit_options), BenchOptions' values and choices (validation.bench.options),
and the worker's argument list. The worker runs on the nodes, where neither rackcert nor
the units are installed; so the declarations of the options a launch passes travel with it
as data (`--declared`, compact JSON), and the worker builds its argparse from them with
this module (standard library only, like everything under node/).

    BATCH = Opt("batch", "int", "Images per GPU per step", min=1, worker=True)
    worker_argv([(BATCH, 256)])
    # ['--declared', '[["batch","int",[]]]', '--batch', '256']
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

TYPES = ("int", "float", "str", "bool", "path")  # bool: --x/--no-x, None when neither given
DECLARED = "--declared"
_CONVERT: dict[str, Any] = {"int": int, "float": float, "str": str, "path": str}


@dataclass(frozen=True)
class Opt:
    """One option of a benchmark.

    name: BenchOptions' key and the worker's attribute; the flag is `--name` with dashes.
    kind: int, float, str, path or bool (a bool is a `--x/--no-x` pair; None: neither).
    help: the CLI's help text, whole. default: when the option is not given (None: the
    unit or the worker decides). choices: the values allowed (checked by BenchOptions, so
    by every caller, and by the worker's argparse). minimum: the CLI's lower bound.
    worker: whether a launch passes it to the worker (validation.bench.node.worker).
    """

    name: str
    kind: str
    help: str
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    worker: bool = False

    def __post_init__(self) -> None:
        if self.kind not in TYPES:
            raise ValueError(f"option {self.name}: kind {self.kind!r} is not one of {TYPES}")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def no_flag(self) -> str:
        """A bool's off switch (`--no-x`)."""
        return "--no-" + self.name.replace("_", "-")

    def data(self) -> list[Any]:
        """What the worker needs of it: name, kind, choices (help stays on the controller)."""
        return [self.name, self.kind, list(self.choices)]

    @classmethod
    def from_data(cls, item: list[Any]) -> Opt:
        name, kind, choices = item
        return cls(str(name), str(kind), "", choices=tuple(str(c) for c in choices))

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """This option in an argparse parser (the worker's)."""
        if self.kind == "bool":
            parser.add_argument(self.flag, dest=self.name, action="store_true", default=None)
            parser.add_argument(self.no_flag, dest=self.name, action="store_false")
            return
        parser.add_argument(
            self.flag,
            dest=self.name,
            type=_CONVERT[self.kind],
            choices=list(self.choices) or None,
            default=self.default,
            help=self.help or None,
        )

    def argv(self, value: Any) -> list[str]:
        """The arguments that give it `value` (none for None)."""
        if value is None:
            return []
        if self.kind == "bool":
            return [self.flag if value else self.no_flag]
        return [self.flag, str(value)]


def worker_argv(given: Iterable[tuple[Opt, Any]]) -> list[str]:
    """The worker's arguments for the declared options that carry a value: their
    declarations as data first (what the worker's parser is built from), then the flags."""
    passed = [(opt, value) for opt, value in given if opt.worker and value is not None]
    if not passed:
        return []
    declared = json.dumps([opt.data() for opt, _ in passed], separators=(",", ":"))
    return [DECLARED, declared, *(arg for opt, value in passed for arg in opt.argv(value))]


def add_declared(parser: argparse.ArgumentParser, argv: list[str] | None) -> list[Opt]:
    """Add to `parser` the options `argv`'s `--declared` declares (and `--declared` itself);
    the declarations found. A malformed one is argparse's one-line error."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument(DECLARED, default="[]")
    known, _rest = first.parse_known_args(argv)
    try:
        opts = [Opt.from_data(item) for item in json.loads(known.declared)]
    except (ValueError, TypeError) as exc:
        parser.error(f"{DECLARED}: not a list of [name, kind, choices]: {exc}")
    parser.add_argument(DECLARED, default="[]", help="the launch's options, as data (JSON)")
    for opt in opts:
        opt.add_to(parser)
    return opts
